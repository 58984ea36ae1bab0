package fsm

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// placementCluster: version 4, groups 7, 8 and 9 (capacity 100,000
// weighted ops/min each, one data node apiece: dn-7, dn-8, dn-9), routes
// 1 ["", g), 2 [g, p) in group 7, 3 [p, +inf) in group 8, the switch on
// and cross_group on.
func placementCluster(t *testing.T) *harness {
	t.Helper()
	h := groupsBootstrapped(t, 3, "g", "p")
	h.editState(func(p *api.StateSnapshot) {
		p.Catalog.Routes[1].GroupId = 7
		p.Catalog.Routes[2].GroupId = 8
		for _, g := range p.Groups {
			g.Capacity = 100_000
			g.Identities = []string{"dn-" + strings.TrimPrefix(g.GetName(), "group-")}
		}
	})
	wantCode(t, h.run(operatorSwitch(true)), api.ResultCode_RESULT_CODE_OK)
	// A threshold above every route's load: no route waits to be split
	// before it may move.
	wantCode(t, h.run(setConfig(&api.ConfigPatch{CrossGroup: proto.Bool(true), Threshold: proto.Uint64(1_000_000)})), api.ResultCode_RESULT_CODE_OK)
	return h
}

// loadColumn commits the next complete 1 s column: writes per route (the
// default weights count a write 4), reported by the given data nodes.
func loadColumn(h *harness, reporters []string, writes map[uint64]uint64) *Result {
	h.t.Helper()
	start := h.state().LastColumnAtMs()
	if start == 0 {
		start = (h.ms/1000 + 1) * 1000
	}
	h.ms = max(h.ms, start+1000)
	var loads []api.RouteLoad
	for id := uint64(1); id <= 16; id++ {
		if w, ok := writes[id]; ok {
			loads = append(loads, api.RouteLoad{RouteID: id, Writes: w})
		}
	}
	return h.run(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: start, AtMs: start + 1000, StepMs: 1000, Reporters: reporters, RouteLoads: api.NewRouteLoads(loads)}}})
}

// detailsOf are the details of s's decisions of kind, oldest first.
func detailsOf(s *State, kind api.DecisionKind) []string {
	var out []string
	for _, d := range decisionsOf(s, kind) {
		out = append(out, d.GetDetail())
	}
	return out
}

// Group 7 over capacity for placement_windows columns moves its hottest
// route to the group with room (8 is warm, 9 cold): a MOVE_PLANNED
// decision and a PENDING op, which the stepper begins as a catalog change.
func TestPlacementMovesTheHotRoute(t *testing.T) {
	h := placementCluster(t)
	all := []string{"dn-7", "dn-8/0", "dn-9"}
	// 1 s columns: 500 writes = 2,000 weighted ops/s = 120,000 per minute.
	hot := map[uint64]uint64{1: 300, 2: 200, 3: 100}
	for i := range 3 {
		wantCode(t, loadColumn(h, all, hot), api.ResultCode_RESULT_CODE_OK)
		if ops := h.state().LiveOps(); i < 2 && len(ops) != 0 {
			t.Fatalf("column %d: ops %v before placement_windows columns", i, ops)
		}
	}
	planned := detailsOf(h.state(), api.DecisionKind_DECISION_KIND_MOVE_PLANNED)
	if len(planned) != 1 || planned[0] != "move r1 (load 72000) from group 7 (load 120000) to group 9 (peak 0)" {
		t.Fatalf("planned %q", planned)
	}
	op := h.state().LiveOps()[0]
	if !isMoveOp(op) || op.GetState() != api.OpState_OP_STATE_PENDING || op.GetNextStep() != moveStepBegin || op.GetTargetGroupId() != 9 {
		t.Fatalf("op %v", op)
	}
	if n := stepMoves(t, h); n != 1 {
		t.Fatalf("%d steps, want the begin", n)
	}
	if r, _ := h.state().Catalog().Route(1); r.State != catalog.StateMigratingSource || r.Moving().TargetGroupID != 9 {
		t.Fatalf("route 1 after the begin: %v", r)
	}
	// The move in flight holds both groups: no second plan, a decline.
	wantCode(t, loadColumn(h, all, hot), api.ResultCode_RESULT_CODE_OK)
	if declined := detailsOf(h.state(), api.DecisionKind_DECISION_KIND_MOVE_DECLINED); len(declined) != 1 || declined[0] != "group 7 moved nothing: live_move" {
		t.Fatalf("declined %q", declined)
	}
	wantCode(t, loadColumn(h, all, hot), api.ResultCode_RESULT_CODE_OK)
	if declined := detailsOf(h.state(), api.DecisionKind_DECISION_KIND_MOVE_DECLINED); len(declined) != 1 {
		t.Fatalf("the same decline recorded again: %q", declined)
	}
}

// A silent group is not a cold one: with group 9's node missing from the
// columns, nothing moves to it; off, or with the switch off, nothing moves
// at all; placement settings reset no split hysteresis.
func TestPlacementDeclines(t *testing.T) {
	hot := map[uint64]uint64{1: 300, 2: 200, 3: 100}
	t.Run("silent target", func(t *testing.T) {
		h := placementCluster(t)
		for range 3 {
			// Group 8 at 72,000: room for neither route of group 7.
			loadColumn(h, []string{"dn-7", "dn-8"}, map[uint64]uint64{1: 300, 2: 200, 3: 300})
		}
		if d := detailsOf(h.state(), api.DecisionKind_DECISION_KIND_MOVE_DECLINED); len(d) != 1 || d[0] != "group 7 moved nothing: silent_target" {
			t.Fatalf("declined %q, ops %v", d, h.state().LiveOps())
		}
	})
	t.Run("cross_group off", func(t *testing.T) {
		h := placementCluster(t)
		wantCode(t, h.run(setConfig(&api.ConfigPatch{CrossGroup: proto.Bool(false)})), api.ResultCode_RESULT_CODE_OK)
		for range 4 {
			loadColumn(h, []string{"dn-7", "dn-8", "dn-9"}, hot)
		}
		if len(h.state().LiveOps()) != 0 || h.state().Proto().GetPlacement() != nil {
			t.Fatalf("ops %v placement %v with cross_group off", h.state().LiveOps(), h.state().Proto().GetPlacement())
		}
	})
	t.Run("placement settings keep split hysteresis", func(t *testing.T) {
		h := placementCluster(t)
		loadColumn(h, []string{"dn-7", "dn-8", "dn-9"}, map[uint64]uint64{1: 300_000})
		before, _ := h.state().Detector().Get(1)
		if before.ConsecutiveOver == 0 {
			t.Fatal("route 1 not over the split threshold")
		}
		wantCode(t, h.run(setConfig(&api.ConfigPatch{MoveMarginBp: proto.Uint32(2000), PlacementWindows: proto.Uint32(5)})), api.ResultCode_RESULT_CODE_OK)
		if after, _ := h.state().Detector().Get(1); after.ConsecutiveOver != before.ConsecutiveOver {
			t.Fatalf("counter %d -> %d after a placement-only patch", before.ConsecutiveOver, after.ConsecutiveOver)
		}
		wantCode(t, h.run(setConfig(&api.ConfigPatch{Threshold: proto.Uint64(60_000)})), api.ResultCode_RESULT_CODE_OK)
		if after, _ := h.state().Detector().Get(1); after.ConsecutiveOver != 0 {
			t.Fatalf("counter %d after a threshold patch", after.ConsecutiveOver)
		}
	})
}

// Each group's load in a complete column and its capacity are gauges by
// group id, whether placement is on or not; a removed group's series go.
func TestGroupLoadMetrics(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	h := newHarness(t, Options{Metrics: m})
	wantCode(t, h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "c1", InitialSplits: [][]byte{[]byte("m")}, GroupId: 1, GroupCount: 2, ClusterVersion: 4}}}), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(addGroup("spare", 7000)), api.ResultCode_RESULT_CODE_OK)
	// 1 s columns: 100 writes = 24,000 weighted ops/min.
	loadColumn(h, []string{"dn"}, map[uint64]uint64{1: 100, 2: 50})
	for _, tc := range []struct {
		group      string
		load, capa float64
	}{{"1", 24_000, DefaultGroupCapacity}, {"2", 12_000, DefaultGroupCapacity}, {"3", 0, 7000}} {
		if l, c := testutil.ToFloat64(m.groupLoad.WithLabelValues(tc.group)), testutil.ToFloat64(m.groupCapacity.WithLabelValues(tc.group)); l != tc.load || c != tc.capa {
			t.Errorf("group %s: load %v capacity %v, want %v %v", tc.group, l, c, tc.load, tc.capa)
		}
	}
	wantCode(t, h.run(removeGroup(3)), api.ResultCode_RESULT_CODE_OK)
	loadColumn(h, []string{"dn"}, map[uint64]uint64{1: 100})
	if n := testutil.CollectAndCount(m.groupLoad); n != 2 {
		t.Fatalf("%d group load series after the removal, want 2", n)
	}
}
