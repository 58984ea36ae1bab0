package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotsplit/hotsplit/node/health"
	"github.com/hotsplit/hotsplit/node/raftobs"
)

// removedFile marks a data dir whose node was removed from its cluster: it
// may not start again (it would campaign or rejoin under an id the cluster
// dropped).
const removedFile = "removed"

// ErrRemoved: the data dir belongs to a node removed from its cluster.
var ErrRemoved = errors.New("this node was removed from its cluster")

// checkNotRemoved refuses a data dir marked removed, naming why.
func checkNotRemoved(dataDir string) error {
	b, err := os.ReadFile(filepath.Join(dataDir, removedFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	return fmt.Errorf("data dir %s: %w (%s): wipe the data dir and join under a new id", dataDir, ErrRemoved, strings.TrimSpace(string(b)))
}

// newHealth creates the node's health monitor; its probes go through the
// peer connections.
func (n *Node) newHealth() *health.Monitor {
	return health.NewMonitor(n.cfg.ID, n.raft, n.fsm, n.peers.Probe, n.log, n.markRemoved)
}

// startOperations registers the node's operational metrics and starts the
// health monitor and the raft observer, until ctx ends.
func (n *Node) startOperations(ctx context.Context, reg prometheus.Registerer, snaps *raft.FileSnapshotStore) {
	m := n.registerNodeMetrics(reg, snaps, n.health.LastContact)
	reg.MustRegister(n.health.Collector())
	ch := make(chan raft.Observation, 64)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		switch o.Data.(type) {
		case raft.LeaderObservation, raft.FailedHeartbeatObservation, raft.ResumedHeartbeatObservation, raft.PeerObservation:
			return true
		}
		return false
	})
	n.raft.RegisterObserver(obs)
	n.goRun(func() {
		defer n.raft.DeregisterObserver(obs)
		for {
			select {
			case <-ctx.Done():
				return
			case o := <-ch:
				switch d := o.Data.(type) {
				case raft.LeaderObservation:
					m.leaderChanges.Inc()
					n.srv.NoteLeaderChange()
				case raft.PeerObservation:
					if d.Removed {
						raftobs.ForgetPeer(string(d.Peer.ID))
					}
				}
				n.health.Note(o)
			}
		}
	})
	n.goRun(func() { n.health.Run(ctx) })
}

// Removed is closed when this node learnt that it was removed from the
// cluster; it has then logged one line and marked its data dir.
func (n *Node) Removed() <-chan struct{} { return n.removed }

// markRemoved records that the cluster dropped this node: one line, the
// data dir marked so it never starts again, Removed closed.
func (n *Node) markRemoved(reason string) {
	select {
	case <-n.halted:
		return // a halted node's raft shut down on purpose
	case <-n.removed:
		return
	default:
	}
	msg := fmt.Sprintf("removed from cluster %s: %s", n.fsm.State().ClusterID(), reason)
	if err := os.WriteFile(filepath.Join(n.cfg.DataDir, removedFile), []byte(msg+"\n"), 0o640); err != nil {
		n.log.Error("could not mark the data dir removed", "reason", err.Error())
	}
	n.log.Warn(msg+"; exiting: this data dir cannot rejoin (wipe it and join under a new id)", "reason", "removed")
	close(n.removed)
}

// configRecorder remembers the latest raft configuration this node's FSM
// saw committed: raft hands committed configuration entries to the FSM
// (StoreConfiguration), and a restored snapshot's configuration was
// committed when it was taken. raft's own GetConfiguration returns the
// latest one, committed or not, without its index.
type configRecorder struct {
	raft.ConfigurationStore

	mu      sync.Mutex
	index   uint64
	servers []string
}

// newConfigRecorder wraps an FSM, seeded from the newest snapshot's
// configuration.
func newConfigRecorder(f raft.ConfigurationStore, snaps raft.SnapshotStore) *configRecorder {
	c := &configRecorder{ConfigurationStore: f}
	if list, err := snaps.List(); err == nil && len(list) > 0 {
		c.record(list[0].ConfigurationIndex, list[0].Configuration)
	}
	return c
}

func (c *configRecorder) StoreConfiguration(index uint64, conf raft.Configuration) {
	c.ConfigurationStore.StoreConfiguration(index, conf)
	c.record(index, conf)
}

func (c *configRecorder) record(index uint64, conf raft.Configuration) {
	ids := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		ids = append(ids, string(s.ID))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if index >= c.index {
		c.index, c.servers = index, ids
	}
}

// committed returns the configuration's index and server ids (0, nil
// before any).
func (c *configRecorder) committed() (uint64, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.index, slices.Clone(c.servers)
}
