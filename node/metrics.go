package node

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotsplit/hotsplit/version"
)

// raftStates are the values of hotsplit_raft_state's state label.
var raftStates = []raft.RaftState{raft.Follower, raft.Candidate, raft.Leader, raft.Shutdown}

// nodeMetrics are the node's own operational metrics: build, raft's view
// of the cluster, the data dir. Everything is read at scrape time except
// leader changes, counted by the observer.
type nodeMetrics struct {
	leaderChanges prometheus.Counter
}

// registerNodeMetrics registers the node metrics with reg; peers gives
// the seconds since this node last heard from each peer (the health
// monitor).
func (n *Node) registerNodeMetrics(reg prometheus.Registerer, snaps *raft.FileSnapshotStore, peers func() map[string]time.Duration) *nodeMetrics {
	started := time.Now()
	bi := version.Get()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hotsplit_build_info", Help: "Always 1; the labels name this node's build."},
		[]string{"version", "revision", "go_version"})
	build.WithLabelValues(bi.Release, bi.Revision, bi.GoVersion).Set(1)
	m := &nodeMetrics{leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_raft_leader_changes_total",
		Help: "Leader changes this node observed (including to no leader, during an election)."})}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
	}
	state := &raftStateCollector{desc: prometheus.NewDesc("hotsplit_raft_state", "1 for this node's raft state, 0 for the others.", []string{"state"}, nil), r: n.raft}
	contact := &peerContactCollector{desc: prometheus.NewDesc("hotsplit_raft_peer_last_contact_seconds",
		"Seconds since this node last heard from each peer (a health probe answer or, from the leader, raft contact), by peer.", []string{"peer"}, nil), peers: peers}
	reg.MustRegister(build, m.leaderChanges, state, contact,
		gauge("hotsplit_raft_has_leader", "1 when this node knows a leader.", func() float64 {
			if _, id := n.raft.LeaderWithID(); id != "" {
				return 1
			}
			return 0
		}),
		gauge("hotsplit_raft_term", "This node's current raft term.", func() float64 { return float64(n.raft.CurrentTerm()) }),
		gauge("hotsplit_raft_commit_index", "The highest log index this node knows committed.", func() float64 { return float64(n.raft.CommitIndex()) }),
		gauge("hotsplit_raft_applied_index", "The highest log index applied to this node's state machine.", func() float64 { return float64(n.fsm.State().Index()) }),
		gauge("hotsplit_raft_last_index", "The last index in this node's log or snapshot.", func() float64 { return float64(n.raft.LastIndex()) }),
		gauge("hotsplit_raft_snapshot_age_seconds", "Seconds since the newest snapshot in the data dir was taken (since the process started while there is none).", func() float64 {
			if t, ok := newestSnapshot(snaps); ok {
				return time.Since(t).Seconds()
			}
			return time.Since(started).Seconds()
		}),
		gauge("hotsplit_raft_store_size_bytes", "Size of the raft log store (raft.db).", func() float64 {
			fi, err := os.Stat(filepath.Join(n.cfg.DataDir, "raft.db"))
			if err != nil {
				return 0
			}
			return float64(fi.Size())
		}),
		gauge("hotsplit_data_dir_free_bytes", "Bytes free for this node's user on the file system of the data dir.", func() float64 {
			free, _, err := diskSpace(n.cfg.DataDir)
			if err != nil {
				return 0
			}
			return float64(free)
		}),
		gauge("hotsplit_data_dir_capacity_bytes", "Size of the file system of the data dir.", func() float64 {
			_, size, err := diskSpace(n.cfg.DataDir)
			if err != nil {
				return 0
			}
			return float64(size)
		}),
		gauge("hotsplit_columns_last_committed_age_seconds", "Seconds since the window of the last committed load column ended (0 before the first column).", func() float64 {
			at := n.fsm.State().LastColumnAtMs()
			if at == 0 {
				return 0
			}
			return max(0, float64(time.Now().UnixMilli()-int64(at))/1000)
		}),
		gauge("hotsplit_autosplit_step_seconds", "The replicated load step (column length).", func() float64 {
			return float64(n.fsm.State().Config().GetStepMs()) / 1000
		}),
		gauge("hotsplit_autosplit_max_routes", "The replicated max_auto_routes: the detector does not grow the catalog beyond it.", func() float64 {
			return float64(n.fsm.State().Config().GetMaxAutoRoutes())
		}),
	)
	return m
}

// newestSnapshot is when the newest snapshot was taken: raft names
// snapshots term-index-unixmillis.
func newestSnapshot(snaps *raft.FileSnapshotStore) (time.Time, bool) {
	if snaps == nil {
		return time.Time{}, false
	}
	list, err := snaps.List()
	if err != nil || len(list) == 0 {
		return time.Time{}, false
	}
	id := list[0].ID
	ms, err := strconv.ParseInt(id[strings.LastIndexByte(id, '-')+1:], 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

// diskSpace is the space available to unprivileged users on dir's file
// system, and its size.
func diskSpace(dir string) (free, size uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, err
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}

// raftStateCollector exports hotsplit_raft_state{state} with every state
// present.
type raftStateCollector struct {
	desc *prometheus.Desc
	r    *raft.Raft
}

func (c *raftStateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *raftStateCollector) Collect(ch chan<- prometheus.Metric) {
	cur := c.r.State()
	for _, s := range raftStates {
		v := 0.0
		if s == cur {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, strings.ToLower(s.String()))
	}
}

// peerContactCollector exports the seconds since each peer was heard from.
type peerContactCollector struct {
	desc  *prometheus.Desc
	peers func() map[string]time.Duration
}

func (c *peerContactCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }
func (c *peerContactCollector) Collect(ch chan<- prometheus.Metric) {
	for peer, d := range c.peers() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, d.Seconds(), peer)
	}
}
