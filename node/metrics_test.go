package node

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/hotsplit/hotsplit/node/raftobs"
)

// A live node's whole /metrics registry passes promtool's lint (the same
// rules as `promtool check metrics`, which CI also runs on a live process)
// and has the operational metrics the dashboards and alerts use.
func TestNodeMetricsPassLint(t *testing.T) {
	c := newTestCluster(t, 1, nil)
	n := c.node("n1")
	mfs, err := prometheus.Gatherers{n.cfg.Registry, raftobs.Registry()}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	for _, name := range []string{"hotsplit_build_info", "hotsplit_raft_has_leader", "hotsplit_raft_leader_changes_total", "hotsplit_raft_term",
		"hotsplit_raft_commit_index", "hotsplit_raft_applied_index", "hotsplit_raft_snapshot_age_seconds", "hotsplit_raft_store_size_bytes",
		"hotsplit_data_dir_free_bytes", "hotsplit_raft_state", "hotsplit_cluster_voters", "hotsplit_cluster_voters_reachable",
		"hotsplit_cluster_health", "hotsplit_raft_apply_total", "hotsplit_raft_commit_seconds"} {
		if !have[name] {
			t.Errorf("no %s on a live node", name)
		}
	}
}
