package raftobs

import (
	"strings"
	"testing"

	gometrics "github.com/hashicorp/go-metrics/compat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
)

// The bridge turns raft's go-metrics into Prometheus names: snake_case,
// _total on counters, seconds for raft's milliseconds, the peer as a label;
// raft's copies with the peer inside the name, and names it does not know,
// are dropped.
func TestRaftSinkMapsRaftMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	s := newRaftSink(reg)
	peer := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	s.IncrCounter([]string{"hotsplit", "raft", "apply"}, 3)
	s.IncrCounter([]string{"hotsplit", "raft", "state", "leader"}, 1)
	s.AddSampleWithLabels([]string{"hotsplit", "raft", "replication", "heartbeat"}, 12.5, peer)
	s.AddSample([]string{"hotsplit", "raft", "replication", "heartbeat", "n2"}, 12.5) // legacy copy
	s.AddSampleWithLabels([]string{"hotsplit", "raft", "net", "rpcDecode"}, 2, []gometrics.Label{{Name: "rpcType", Value: "AppendEntries"}})
	s.SetGauge([]string{"hotsplit", "raft", "leader", "oldestLogAge"}, 1500)
	s.IncrCounter([]string{"hotsplit", "raft", "somethingNew"}, 1)
	s.AddSample([]string{"hotsplit", "raft", "apply"}, 1) // wrong kind for the row

	want := `
# HELP hotsplit_raft_apply_total Entries proposed through raft.Apply on this node (leader).
# TYPE hotsplit_raft_apply_total counter
hotsplit_raft_apply_total 3
# HELP hotsplit_raft_leader_oldest_log_age_seconds Age of the oldest entry in the leader's log store (how far back a lagging follower can catch up without a snapshot).
# TYPE hotsplit_raft_leader_oldest_log_age_seconds gauge
hotsplit_raft_leader_oldest_log_age_seconds 1.5
# HELP hotsplit_raft_state_transitions_total Raft state entered, by state.
# TYPE hotsplit_raft_state_transitions_total counter
hotsplit_raft_state_transitions_total{state="candidate"} 0
hotsplit_raft_state_transitions_total{state="follower"} 0
hotsplit_raft_state_transitions_total{state="leader"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "hotsplit_raft_apply_total", "hotsplit_raft_state_transitions_total", "hotsplit_raft_leader_oldest_log_age_seconds"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			h := m.GetHistogram()
			if h == nil || h.GetSampleCount() == 0 {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = true
			if mf.GetName() == "hotsplit_raft_replication_heartbeat_seconds" && (h.GetSampleCount() != 1 || h.GetSampleSum() != 0.0125) {
				t.Errorf("heartbeat histogram: %d samples summing to %v, want 1 of 0.0125 s", h.GetSampleCount(), h.GetSampleSum())
			}
		}
		if strings.Contains(mf.GetName(), "n2") || strings.Contains(mf.GetName(), "something") {
			t.Errorf("exported %s", mf.GetName())
		}
	}
	for _, k := range []string{"hotsplit_raft_replication_heartbeat_seconds{peer=n2}", "hotsplit_raft_net_rpc_decode_seconds{rpc_type=append_entries}"} {
		if !got[k] {
			t.Errorf("no observation under %s; observed %v", k, got)
		}
	}
	s.forgetPeer("n2")
	if n := testutil.CollectAndCount(reg, "hotsplit_raft_replication_heartbeat_seconds"); n != 0 {
		t.Errorf("%d heartbeat series after the peer left", n)
	}
	problems, err := promlint.NewWithMetricFamilies(mfs).Lint()
	if err != nil || len(problems) > 0 {
		t.Errorf("promlint: %v %v", problems, err)
	}
}
