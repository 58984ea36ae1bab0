package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// mergeTestConfig: 1 s columns, the hot threshold of hotConfig (6000
// writes are hot), merges after 3 cold columns, no merge delay.
func mergeTestConfig() *api.Config {
	c := hotConfig()
	c.MergeWindows = proto.Uint32(3)
	c.MergeDelayMs = proto.Uint64(0)
	return c
}

// mergeCluster is a version 3 harness with the given splits. Its
// complete 1 s columns follow one another from the first second after the
// harness clock at the first column, so that routes created before then
// were created before every column started. The bootstrap's routes stand
// for pieces automatic splits left behind: their starts are unmarked, so
// automatic merges may remove them (operator_boundaries_kept's tests
// bootstrap with marks).
type mergeCluster struct {
	*harness
	at uint64
}

func newMergeCluster(t *testing.T, cfg *api.Config, splits ...string) *mergeCluster {
	var keys [][]byte
	for _, s := range splits {
		keys = append(keys, []byte(s))
	}
	m := &mergeCluster{harness: bootstrappedAt(t, clusterversion.Version3, keys, cfg)}
	m.editState(unmarkStarts)
	return m
}

// unmarkStarts clears every route's operator mark: the boundaries then
// count as automatic splits'.
func unmarkStarts(p *api.StateSnapshot) {
	for _, r := range p.GetCatalog().GetRoutes() {
		r.OperatorStart = false
	}
}

// column commits one complete 1 s column with the given loads (every other
// live route had none); loads at or above the threshold carry a hot row
// whose top key is the route's own start (isolation at its lower edge).
func (m *mergeCluster) column(loads ...api.RouteLoad) *Result {
	m.t.Helper()
	if m.at == 0 {
		m.at = (m.ms/1000 + 1) * 1000
	}
	var rows []*api.ColumnRow
	for _, l := range loads {
		if l.Writes >= 6000 {
			r, _ := m.state().Catalog().Route(l.RouteID)
			row := hotRow(l.RouteID, string(r.Start))
			row.Writes = l.Writes
			rows = append(rows, row)
		}
	}
	r := m.run(loadsColumn(m.at, m.at+1000, loads, rows...))
	wantCode(m.t, r, api.ResultCode_RESULT_CODE_OK)
	m.at += 1000
	return r
}

func (m *mergeCluster) idle(n int) *Result {
	var r *Result
	for range n {
		r = m.column()
	}
	return r
}

func decisionsOf(s *State, kind api.DecisionKind) []*api.Decision {
	var out []*api.Decision
	for _, d := range s.Decisions() {
		if d.GetKind() == kind {
			out = append(out, d)
		}
	}
	return out
}

func TestMergeOpPlanned(t *testing.T) {
	m := newMergeCluster(t, mergeTestConfig(), "m")
	if r := m.idle(2); len(r.PlannedOpIds) != 0 {
		t.Fatalf("planned after 2 columns: %v", r.PlannedOpIds)
	}
	r := m.column()
	if len(r.PlannedOpIds) != 1 || r.PlannedOpIds[0] != 1 {
		t.Fatalf("planned %v", r.PlannedOpIds)
	}
	s := m.state()
	op, _ := s.Op(1)
	if !isMergeOp(op) || op.GetState() != api.OpState_OP_STATE_PENDING || op.GetTargetRouteId() != 1 || op.GetRightRouteId() != 2 ||
		string(op.GetTargetEnd()) != "m" || len(op.GetRightEnd()) != 0 || op.GetRouteDelta() != -1 || op.GetNextStep() != 1 ||
		len(op.GetSplitKeys()) != 0 || op.GetActor() != "detector" {
		t.Fatalf("op %v", op)
	}
	ds := decisionsOf(s, api.DecisionKind_DECISION_KIND_MERGE_PLANNED)
	if len(ds) != 1 || ds[0].GetRouteId() != 1 || ds[0].GetOpId() != 1 || ds[0].GetExplanation().GetMergePartnerRouteId() != 2 ||
		ds[0].GetExplanation().GetColdColumns() != 3 || !strings.Contains(ds[0].GetDetail(), "r1 and r2") {
		t.Fatalf("decisions %v", ds)
	}
	for _, id := range []uint64{1, 2} {
		if tr, _ := s.Detector().Get(id); tr.Merge.Reason != detector.ReasonMergePlanned || tr.Merge.OpID != 1 {
			t.Errorf("route %d: merge explanation %+v", id, tr.Merge)
		}
	}
	// The routes of a live merge op are not planned again.
	if r := m.idle(3); len(r.PlannedOpIds) != 0 || len(s.LiveOps()) != 1 {
		t.Fatalf("planned again: %v", r.PlannedOpIds)
	}
	// The op, the cold state and the merge explanations survive a snapshot.
	p := m.state().Proto()
	if p.GetCold() == nil || p.GetCold().GetRunColumns() != 6 {
		t.Fatalf("cold state %v", p.GetCold())
	}
	back, err := stateFromProto(proto.Clone(p).(*api.StateSnapshot), m.f.limits())
	if err != nil {
		t.Fatal(err)
	}
	if back.Hash() != m.state().Hash() {
		t.Fatal("a restored state hashes differently")
	}
}

// A pair declined for the same reason column after column writes one
// decision; the switch off suppresses merges and says so.
func TestMergeDeclinesAndSuppression(t *testing.T) {
	cfg := mergeTestConfig()
	cfg.MergeDelayMs = proto.Uint64(3_600_000)
	m := newMergeCluster(t, cfg)
	wantCode(t, m.run(split(1, "m")), api.ResultCode_RESULT_CODE_OK) // routes 2 and 3, created now
	m.editState(unmarkStarts)                                        // as if an automatic split made them
	m.idle(5)
	s := m.state()
	ds := decisionsOf(s, api.DecisionKind_DECISION_KIND_MERGE_DECLINED)
	if len(ds) != 1 || ds[0].GetReason() != api.Reason_REASON_MERGE_DELAY || ds[0].GetRouteId() != 2 ||
		ds[0].GetExplanation().GetMergeDelayLeftMs() == 0 {
		t.Fatalf("declines %v", ds)
	}
	if tr, _ := s.Detector().Get(3); tr.Merge.Reason != detector.ReasonMergeDelay || tr.Merge.Repeats != 2 {
		t.Fatalf("route 3 explained %+v", tr.Merge)
	}
	if len(s.LiveOps()) != 0 {
		t.Fatalf("live ops %v", s.LiveOps())
	}

	m2 := newMergeCluster(t, mergeTestConfig(), "m")
	wantCode(t, m2.run(operatorSwitch(false)), api.ResultCode_RESULT_CODE_OK)
	m2.idle(4)
	ds = decisionsOf(m2.state(), api.DecisionKind_DECISION_KIND_MERGE_SUPPRESSED)
	if len(ds) != 1 || ds[0].GetReason() != api.Reason_REASON_MERGE_SUPPRESSED || len(m2.state().LiveOps()) != 0 {
		t.Fatalf("suppressed %v, live ops %v", ds, m2.state().LiveOps())
	}
	wantCode(t, m2.run(operatorSwitch(true)), api.ResultCode_RESULT_CODE_OK)
	if r := m2.column(); len(r.PlannedOpIds) != 1 {
		t.Fatalf("nothing planned once enabled: the cold evidence stands (%v)", r.PlannedOpIds)
	}
}

// A pending merge's -1 counts against the route cap only once applied: a
// hot route next to a planned merge is still declined at the cap.
func TestPendingMergeDoesNotFreeTheCap(t *testing.T) {
	cfg := mergeTestConfig()
	cfg.MaxAutoRoutes = 3
	m := newMergeCluster(t, cfg, "f", "m")
	hot := api.RouteLoad{RouteID: 3, Writes: 6000}
	for range 3 {
		m.column(hot)
	}
	s := m.state()
	if live := s.LiveOps(); len(live) != 1 || !isMergeOp(live[0]) {
		t.Fatalf("live ops %v", live)
	}
	m.column(hot)
	tr, _ := m.state().Detector().Get(3)
	if tr.Explanation.Reason != detector.ReasonRouteCap || tr.Explanation.ProjectedRoutes != 4 {
		t.Fatalf("route 3 explained %+v, want route_cap projecting 4 routes", tr.Explanation)
	}
}

// An aborted merge op sticks: its pair needs merge_windows more cold
// columns before it is planned again. A merge op paused past op_ttl_ms is
// aborted as stale when the switch comes back.
func TestMergeOpAbortSticks(t *testing.T) {
	m := newMergeCluster(t, mergeTestConfig(), "m")
	m.idle(3)
	wantCode(t, m.run(abort(1, "not now")), api.ResultCode_RESULT_CODE_OK)
	op, _ := m.state().Op(1)
	if op.GetState() != api.OpState_OP_STATE_ABORTED || op.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_OPERATOR {
		t.Fatalf("op %v", op)
	}
	if r := m.idle(2); len(r.PlannedOpIds) != 0 {
		t.Fatalf("planned again 2 columns after the abort: %v", r.PlannedOpIds)
	}
	if r := m.column(); len(r.PlannedOpIds) != 1 || r.PlannedOpIds[0] != 2 {
		t.Fatalf("planned %v 3 columns after the abort", r.PlannedOpIds)
	}
	wantCode(t, m.run(operatorSwitch(false)), api.ResultCode_RESULT_CODE_OK)
	if op, _ := m.state().Op(2); op.GetState() != api.OpState_OP_STATE_PAUSED {
		t.Fatalf("op 2 not paused: %v", op)
	}
	m.ms += m.state().Config().GetOpTtlMs() + 1
	wantCode(t, m.run(operatorSwitch(true)), api.ResultCode_RESULT_CODE_OK)
	if op, _ := m.state().Op(2); op.GetState() != api.OpState_OP_STATE_ABORTED || op.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_STALE {
		t.Fatalf("op 2 after op_ttl: %v", op)
	}
}

// Restore refuses merge state a replica of the cluster's version never
// writes, and merge ops the step path cannot take.
func TestRestoreRefusesBadMergeState(t *testing.T) {
	m := newMergeCluster(t, mergeTestConfig(), "m")
	m.idle(3)
	good := m.state().Proto()
	for name, tc := range map[string]struct {
		edit func(p *api.StateSnapshot)
		msg  string
	}{
		"cold state at version 2": {func(p *api.StateSnapshot) {
			p.ClusterVersion = 2
			clearMerge(p.Config)
			p.HeatHistory = nil
			p.Ops = nil
			dropMergeExplanations(p)
		}, "cold state"},
		"merge op at version 2": {func(p *api.StateSnapshot) {
			p.ClusterVersion = 2
			clearMerge(p.Config)
			p.HeatHistory = nil
			p.Cold = nil
			dropMergeExplanations(p)
		}, "merge op"},
		"merge explanation at v2": {func(p *api.StateSnapshot) {
			p.ClusterVersion = 2
			clearMerge(p.Config)
			p.Cold, p.Ops, p.HeatHistory = nil, nil, nil
		}, "merge explanation"},
		"merge explanation no reason": {func(p *api.StateSnapshot) { p.Tracked[0].MergeExplanation.Reason = 0 }, "without a reason"},
		"merge op with a split key":   {func(p *api.StateSnapshot) { p.Ops[0].SplitKeys = [][]byte{[]byte("x")} }, "split keys"},
		"merge op without right":      {func(p *api.StateSnapshot) { p.Ops[0].RightRouteId = 0 }, "right route"},
		"merge op of unknown kind":    {func(p *api.StateSnapshot) { p.Ops[0].Kind = 7 }, "kind"},
		"cold list lengths differ":    {func(p *api.StateSnapshot) { p.Cold.Peaks = append(p.Cold.Peaks, 1) }, "cold"},
		"cold starts unsorted":        {func(p *api.StateSnapshot) { p.Cold.RecentStarts[0] = p.Cold.RecentStarts[1] }, "recent_starts"},
	} {
		p := proto.Clone(good).(*api.StateSnapshot)
		tc.edit(p)
		if _, err := stateFromProto(p, m.f.limits()); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.msg)
		}
	}
}

func dropMergeExplanations(p *api.StateSnapshot) {
	for _, t := range p.Tracked {
		t.MergeExplanation = nil
	}
}
