package fsm

import (
	"strings"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func column(start, at uint64, rows ...*api.ColumnRow) *api.Command {
	return &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: start, AtMs: at, Rows: rows, Reporters: []string{"n1", "n2"}, StepMs: at - start}}}
}

func TestObserveColumnBookkeeping(t *testing.T) {
	h := bootstrapped(t, [][]byte{[]byte("m")}, &api.Config{StepMs: 1000})
	r := h.run(column(1000, 2000, &api.ColumnRow{RouteId: 1, Writes: 5}, &api.ColumnRow{RouteId: 42, Writes: 5}))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	if s.LastColumnAtMs() != 2000 || strings.Join(s.LastColumnReporters(), ",") != "n1,n2" {
		t.Fatalf("last column %d reporters %v", s.LastColumnAtMs(), s.LastColumnReporters())
	}
	if s.Detector().LastColumnAtMs() != 2000 {
		t.Fatalf("detector last column %d", s.Detector().LastColumnAtMs())
	}
	// The next column may start where the last ended, or later (a gap).
	wantCode(t, h.run(column(2000, 3000)), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(column(5000, 6000)), api.ResultCode_RESULT_CODE_OK)
}

func TestObserveColumnRejections(t *testing.T) {
	big := make([]uint64, 257)
	tests := []struct {
		name string
		c    *api.Command
		code api.ResultCode
		msg  string
	}{
		{"stale column", column(1500, 2500), api.ResultCode_RESULT_CODE_STALE_COLUMN, "window_start_ms"},
		{"empty window", column(3000, 3000), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "at_ms"},
		{"duplicate row", column(2000, 3000, &api.ColumnRow{RouteId: 1}, &api.ColumnRow{RouteId: 1}), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "duplicate route_id 1"},
		{"too many buckets", column(2000, 3000, &api.ColumnRow{RouteId: 1, Buckets: big}), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "rows[0].buckets"},
		{"top key too long", column(2000, 3000, &api.ColumnRow{RouteId: 1, TopKeys: []*api.KeyEstimate{{Key: make([]byte, 4097)}}}),
			api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "rows[0].top_keys[0].key"},
		{"top key bounds inverted", column(2000, 3000, &api.ColumnRow{RouteId: 1, TopKeys: []*api.KeyEstimate{{Key: []byte("a"), Lower: 5, Upper: 4}}}),
			api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "lower 5 above upper 4"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrapped(t, [][]byte{[]byte("m")}, &api.Config{StepMs: 1000})
			h.run(column(1000, 2000))
			before := h.state()
			r := h.run(tc.c)
			wantCode(t, r, tc.code)
			if !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("message %q does not mention %q", r.Message, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
	t.Run("unsorted reporters", func(t *testing.T) {
		h := bootstrapped(t, nil, nil)
		c := column(1000, 2000)
		c.GetObserveColumn().Reporters = []string{"n2", "n1"}
		before := h.state()
		r := h.run(c)
		wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
		if !strings.Contains(r.Message, "reporters[1]") {
			t.Fatalf("message %q", r.Message)
		}
		assertUnchanged(t, before, h.state())
	})
}

// hotRow is a route with 6000 writes in a 1 s column, 95% of them on key.
func hotRow(routeID uint64, key string) *api.ColumnRow {
	return &api.ColumnRow{RouteId: routeID, Writes: 6000,
		TopKeys: []*api.KeyEstimate{{Key: []byte(key), Lower: 4 * 5700, Upper: 4 * 5700}}}
}

func hotConfig() *api.Config {
	return &api.Config{Threshold: 100_000, CandidateWindows: 2, StepMs: 1000, CooldownMs: 60_000}
}

// A hot key in consecutive columns becomes a PENDING two-step isolation op
// with the next op id; stepping it isolates the key.
func TestObserveColumnPlansIsolation(t *testing.T) {
	h := bootstrapped(t, nil, hotConfig())
	r := h.run(column(1000, 2000, hotRow(1, "user42")))
	if len(r.PlannedOpIds) != 0 {
		t.Fatalf("planned after one column: %v", r.PlannedOpIds)
	}
	r = h.run(column(2000, 3000, hotRow(1, "user42")))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	if len(r.PlannedOpIds) != 1 || r.PlannedOpIds[0] != 1 {
		t.Fatalf("planned %v", r.PlannedOpIds)
	}
	s := h.state()
	op, ok := s.Op(1)
	if !ok || op.State != api.OpState_OP_STATE_PENDING || op.NextStep != 1 || op.TargetRouteId != 1 ||
		op.Origin != api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND || len(op.SplitKeys) != 2 ||
		string(op.SplitKeys[0]) != "user42" || string(op.SplitKeys[1]) != "user42\x00" || op.RouteDelta != 2 ||
		op.CreatedHlc != s.LastHLC() || op.Score == 0 {
		t.Fatalf("op %v", op)
	}
	if s.Proto().NextOpId != 2 {
		t.Fatal("next op id not advanced")
	}
	d := s.Decisions()
	if last := d[len(d)-1]; last.Kind != api.DecisionKind_DECISION_KIND_PLANNED || last.OpId != 1 || last.Reason != api.Reason_REASON_PLANNED {
		t.Fatalf("decision %v", last)
	}
	// While the op lives the route is not planned again.
	r = h.run(column(3000, 4000, hotRow(1, "user42")))
	if len(r.PlannedOpIds) != 0 {
		t.Fatalf("route of a live op planned again: %v", r.PlannedOpIds)
	}
	// The scheduler steps the op; the hot key ends alone in its route.
	wantCode(t, h.run(step(1, 1, 1, []byte("user42"))), api.ResultCode_RESULT_CODE_OK)
	op, _ = h.state().Op(1)
	wantCode(t, h.run(step(1, 2, op.TargetRouteId, []byte("user42\x00"))), api.ResultCode_RESULT_CODE_OK)
	iso := h.state().Catalog().Lookup([]byte("user42"))
	if string(iso.Start) != "user42" || string(iso.End) != "user42\x00" {
		t.Fatalf("hot key route %v", iso)
	}
}

// A suppressed (switch off) or declined route writes one decision for a
// run of identical explanations, not one per column.
func TestObserveColumnSkipDecisionsDoNotFlood(t *testing.T) {
	for _, tc := range []struct {
		name string
		on   bool
		row  func() *api.ColumnRow
		kind api.DecisionKind
	}{
		{"suppressed", false, func() *api.ColumnRow { return hotRow(1, "user42") }, api.DecisionKind_DECISION_KIND_SUPPRESSED},
		{"declined: no split key", true, func() *api.ColumnRow { return &api.ColumnRow{RouteId: 1, Writes: 6000} }, api.DecisionKind_DECISION_KIND_DECLINED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrapped(t, nil, hotConfig())
			if !tc.on {
				h.run(operatorSwitch(false))
			}
			base := len(h.state().Decisions())
			for i := range uint64(6) {
				wantCode(t, h.run(column(1000*(i+1), 1000*(i+2), tc.row())), api.ResultCode_RESULT_CODE_OK)
			}
			ds := h.state().Decisions()[base:]
			if len(ds) != 1 || ds[0].Kind != tc.kind || ds[0].RouteId != 1 {
				t.Fatalf("decisions %v, want one %v", ds, tc.kind)
			}
			tr, _ := h.state().Detector().Get(1)
			if tr.Explanation.Repeats == 0 {
				t.Fatalf("explanation did not repeat: %+v", tr.Explanation)
			}
		})
	}
}

// A row of a route that split away is dropped, not scored.
func TestObserveColumnDropsDeadRows(t *testing.T) {
	h := bootstrapped(t, nil, hotConfig())
	h.run(split(1, "m"))
	m := NewMetrics(nil)
	h.f.m = m
	wantCode(t, h.run(column(1000, 2000, hotRow(1, "user42"), &api.ColumnRow{RouteId: 2, Writes: 1})), api.ResultCode_RESULT_CODE_OK)
	if _, ok := h.state().Detector().Get(1); ok {
		t.Fatal("dead route 1 tracked")
	}
	if got := testutilCounter(t, m.droppedRows.WithLabelValues("apply")); got != 1 {
		t.Fatalf("dropped rows %v, want 1", got)
	}
}
