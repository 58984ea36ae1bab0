package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotsplit/hotsplit/node/health"
	"github.com/hotsplit/hotsplit/node/raftobs"
	"github.com/hotsplit/hotsplit/node/storage"
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
	h := health.NewMonitor(n.cfg.ID, n.raft, n.fsm, n.peers.Probe, n.log, n.markRemoved)
	// The record of another cluster (the data dir was recovered into a new
	// one since) says nothing about this one.
	if r := storage.ReadMemberRecord(n.cfg.DataDir); r != nil && r.ClusterID == n.knownClusterID() {
		h.UseRecorded(&health.Recorded{ClusterID: r.ClusterID, Index: r.Index, Members: r.Members()})
	}
	return h
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
