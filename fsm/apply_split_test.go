package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/hlc"
)

func TestManualSplit(t *testing.T) {
	h := bootstrapped(t, [][]byte{[]byte("m")}, &api.Config{CooldownMs: 60_000})
	r := h.run(split(1, "g"))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	commit := s.LastHLC()
	if r.CatalogVersion != 2 || s.Catalog().Version() != 2 || r.CommitHlc != commit || len(r.Children) != 2 {
		t.Fatalf("result %v", r.CommandResult)
	}
	left, right := r.Children[0], r.Children[1]
	if left.RouteId != 3 || right.RouteId != 4 || string(left.End) != "g" || string(right.Start) != "g" ||
		left.ParentRouteId != 1 || left.SplitAtHlc != commit || left.GroupId != 7 {
		t.Fatalf("children %v %v", left, right)
	}
	if _, ok := s.Catalog().Route(1); ok {
		t.Fatal("parent still live")
	}
	deltas, ok := s.History().Since(1)
	if !ok || len(deltas) != 1 || deltas[0].Version != 2 || deltas[0].Removed[0] != 1 || deltas[0].CommitHLC != commit {
		t.Fatalf("history %v %v", deltas, ok)
	}
	for _, id := range []uint64{3, 4} {
		tr, ok := s.Detector().Get(id)
		if !ok || tr.CooldownUntilMs != hlc.Physical(commit)+60_000 {
			t.Fatalf("child %d cooldown %+v %v", id, tr, ok)
		}
	}
	d := s.Decisions()
	if len(d) != 1 || d[0].Kind != api.DecisionKind_DECISION_KIND_MANUAL_SPLIT || d[0].RouteId != 1 ||
		d[0].Origin != api.SplitOrigin_SPLIT_ORIGIN_MANUAL || d[0].Seq != 1 || d[0].AtHlc != commit || d[0].Actor != "test" {
		t.Fatalf("decisions %v", d)
	}
	// CAS with the current version succeeds.
	wantCode(t, h.run(splitCAS(4, "h", 2)), api.ResultCode_RESULT_CODE_OK)
}

func TestManualSplitRejections(t *testing.T) {
	long := strings.Repeat("k", catalog.MaxBoundaryLen+1)
	tests := []struct {
		name string
		c    *api.Command
		code api.ResultCode
		msg  string
	}{
		{"stale expected version", splitCAS(1, "g", 7), api.ResultCode_RESULT_CODE_VERSION_MISMATCH, "version"},
		{"route id 0", split(0, "g"), api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, "route"},
		{"unknown route", split(99, "g"), api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, "99"},
		{"key at start", split(2, "m"), api.ResultCode_RESULT_CODE_SPLIT_KEY_AT_BOUNDARY, "boundary"},
		{"empty key", split(1, ""), api.ResultCode_RESULT_CODE_SPLIT_KEY_AT_BOUNDARY, "boundary"},
		{"key outside", split(1, "x"), api.ResultCode_RESULT_CODE_SPLIT_KEY_OUTSIDE_ROUTE, "outside"},
		{"key too large", split(1, long), api.ResultCode_RESULT_CODE_KEY_TOO_LARGE, "large"},
		{"step without op", &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: 1, SplitKey: []byte("g"), Step: 1}}},
			api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrapped(t, [][]byte{[]byte("m")}, nil)
			before := h.state()
			r := h.run(tc.c)
			wantCode(t, r, tc.code)
			if !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("message %q does not mention %q", r.Message, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
}

func TestManualSplitNotActive(t *testing.T) {
	h := bootstrapped(t, [][]byte{[]byte("m")}, nil)
	h.editState(func(p *api.StateSnapshot) {
		p.Catalog.Routes[0].State = api.RouteState_ROUTE_STATE_WRITE_FENCED
	})
	before := h.state()
	wantCode(t, h.run(split(1, "g")), api.ResultCode_RESULT_CODE_ROUTE_NOT_ACTIVE)
	assertUnchanged(t, before, h.state())
}

// A split whose commit HLC does not move forward is refused, counted and
// changes nothing else.
func TestFenceViolation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		delta int64 // entry hlc relative to last_hlc
	}{{"equal", 0}, {"behind", -5}} {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrapped(t, nil, nil)
			h.run(split(1, "m"))
			before := h.state()
			c := split(2, "g")
			c.Hlc = uint64(int64(before.LastHLC()) + tc.delta)
			r := h.run(c)
			wantCode(t, r, api.ResultCode_RESULT_CODE_FENCE_VIOLATION)
			after := h.state()
			if after.FenceViolations() != 1 || after.LastHLC() != before.LastHLC() {
				t.Fatalf("fence violations %d, last hlc %d -> %d", after.FenceViolations(), before.LastHLC(), after.LastHLC())
			}
			p := proto.Clone(after.Proto()).(*api.StateSnapshot)
			p.FenceViolations = 0
			if hashOf(p) != before.Hash() {
				t.Fatal("a fence violation changed more than its counter")
			}
		})
	}
}

// opState builds a bootstrapped harness (routes [-inf, m), [m, +inf)) with
// the given ops installed and next_op_id after them.
func opState(t *testing.T, enabled bool, ops ...*api.Op) *harness {
	t.Helper()
	h := bootstrapped(t, [][]byte{[]byte("m")}, &api.Config{CooldownMs: 60_000, OpTtlMs: 30_000})
	h.editState(func(p *api.StateSnapshot) {
		p.Ops = ops
		p.NextOpId = uint64(len(ops)) + 1
		p.Switch.Enabled = enabled
	})
	return h
}

// compoundOp isolates key "k" in route 2 ([m, +inf)): steps at "k" and
// "k\x00".
func compoundOp(id uint64) *api.Op {
	return &api.Op{OpId: id, ParentRouteId: 2, SplitKeys: [][]byte{[]byte("k"), []byte("k\x00")},
		Origin: api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, NextStep: 1, State: api.OpState_OP_STATE_PENDING,
		TargetRouteId: 1, TargetStart: nil, TargetEnd: []byte("m"), RouteDelta: 2, Score: 99, CreatedHlc: 1, UpdatedHlc: 1}
}

func medianOp(id uint64) *api.Op {
	return &api.Op{OpId: id, ParentRouteId: 2, SplitKeys: [][]byte{[]byte("t")},
		Origin: api.SplitOrigin_SPLIT_ORIGIN_SUB_BUCKET_MEDIAN, NextStep: 1, State: api.OpState_OP_STATE_PENDING,
		TargetRouteId: 2, TargetStart: []byte("m"), RouteDelta: 1, Score: 42, CreatedHlc: 1, UpdatedHlc: 1}
}

func decisionKinds(s *State) []api.DecisionKind {
	var out []api.DecisionKind
	for _, d := range s.Decisions() {
		out = append(out, d.Kind)
	}
	return out
}

func TestOpStepsCompound(t *testing.T) {
	h := opState(t, true, compoundOp(1))
	r1 := h.run(step(1, 1, 1, []byte("k")))
	wantCode(t, r1, api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	op, _ := s.Op(1)
	// Step 1 split [-inf, m) at k into 3 [-inf, k) and 4 [k, m); the next
	// key k\x00 lies in the right child, which becomes the target.
	if op.State != api.OpState_OP_STATE_RUNNING || op.NextStep != 2 || op.TargetRouteId != 4 ||
		string(op.TargetStart) != "k" || string(op.TargetEnd) != "m" || len(op.StepResults) != 1 {
		t.Fatalf("op after step 1: %v", op)
	}
	if r1.OpId != 1 || r1.CatalogVersion != 2 {
		t.Fatalf("step result %v", r1.CommandResult)
	}
	step1 := hlc.Physical(s.LastHLC())
	if tr, ok := s.Detector().Get(3); !ok || tr.CooldownUntilMs != step1+60_000 {
		t.Fatalf("left child cooldown %+v %v", tr, ok)
	}
	if tr, ok := s.Detector().Get(4); ok && tr.CooldownUntilMs != 0 {
		t.Fatalf("consumed middle child got a cooldown: %+v", tr)
	}

	// A duplicate of step 1 answers the first result and applies nothing.
	before := h.state()
	dup := h.run(step(1, 1, 1, []byte("k")))
	wantCode(t, dup, api.ResultCode_RESULT_CODE_OK)
	if !proto.Equal(dup.CommandResult, r1.CommandResult) {
		t.Fatalf("duplicate answered %v, first %v", dup.CommandResult, r1.CommandResult)
	}
	assertUnchanged(t, before, h.state())

	// The final step marks the op DONE; both children get cooldowns.
	r2 := h.run(step(1, 2, 4, []byte("k\x00")))
	wantCode(t, r2, api.ResultCode_RESULT_CODE_OK)
	s = h.state()
	op, _ = s.Op(1)
	if op.State != api.OpState_OP_STATE_DONE || op.NextStep != 3 || len(op.StepResults) != 2 {
		t.Fatalf("op after step 2: %v", op)
	}
	iso, ok := s.Catalog().Route(r2.Children[0].RouteId)
	if !ok || string(iso.Start) != "k" || string(iso.End) != "k\x00" {
		t.Fatalf("isolated route %v", iso)
	}
	step2 := hlc.Physical(s.LastHLC())
	for _, c := range r2.Children {
		if tr, ok := s.Detector().Get(c.RouteId); !ok || tr.CooldownUntilMs != step2+60_000 {
			t.Fatalf("child %d cooldown %+v", c.RouteId, tr)
		}
	}
	want := []api.DecisionKind{api.DecisionKind_DECISION_KIND_SPLIT_APPLIED, api.DecisionKind_DECISION_KIND_SPLIT_APPLIED, api.DecisionKind_DECISION_KIND_OP_DONE}
	if got := decisionKinds(s); !equalKinds(got, want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if len(s.LiveOps()) != 0 {
		t.Fatal("done op still live")
	}
	// Steps of a finished op: a duplicate still answers, the next is refused.
	dup2 := h.run(step(1, 2, 4, []byte("k\x00")))
	if !proto.Equal(dup2.CommandResult, r2.CommandResult) {
		t.Fatal("duplicate final step did not answer the first result")
	}
	before = h.state()
	wantCode(t, h.run(step(1, 3, 4, []byte("k\x00"))), api.ResultCode_RESULT_CODE_OP_FINISHED)
	assertUnchanged(t, before, h.state())
}

func equalKinds(a, b []api.DecisionKind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOpStepRejections(t *testing.T) {
	aborted := medianOp(1)
	aborted.State = api.OpState_OP_STATE_ABORTED
	aborted.AbortReason = api.OpAbortReason_OP_ABORT_REASON_OPERATOR
	tests := []struct {
		name string
		op   *api.Op
		c    *api.Command
		code api.ResultCode
		msg  string
	}{
		{"unknown op", medianOp(1), step(9, 1, 2, []byte("t")), api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "op 9"},
		{"step 0", medianOp(1), step(1, 0, 2, []byte("t")), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step"},
		{"step ahead", compoundOp(1), step(1, 2, 1, []byte("k\x00")), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "ahead"},
		{"wrong route", medianOp(1), step(1, 1, 1, []byte("t")), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "route_id"},
		{"wrong key", medianOp(1), step(1, 1, 2, []byte("u")), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "split_key"},
		{"aborted op", aborted, step(1, 1, 2, []byte("t")), api.ResultCode_RESULT_CODE_OP_ABORTED, "aborted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := opState(t, true, tc.op)
			before := h.state()
			r := h.run(tc.c)
			wantCode(t, r, tc.code)
			if !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("message %q does not mention %q", r.Message, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
}

func TestOpStepFenceViolation(t *testing.T) {
	h := opState(t, true, medianOp(1))
	before := h.state()
	c := step(1, 1, 2, []byte("t"))
	c.Hlc = before.LastHLC()
	wantCode(t, h.run(c), api.ResultCode_RESULT_CODE_FENCE_VIOLATION)
	if op, _ := h.state().Op(1); op.NextStep != 1 || op.State != api.OpState_OP_STATE_PENDING || h.state().FenceViolations() != 1 {
		t.Fatalf("op %v, violations %d", op, h.state().FenceViolations())
	}
}

// A step committed while the switch is off pauses the op and applies
// nothing; enabling resumes it where it stopped.
func TestOpStepWhileDisabled(t *testing.T) {
	h := opState(t, false, medianOp(1))
	before := h.state()
	r := h.run(step(1, 1, 2, []byte("t")))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OP_PAUSED)
	s := h.state()
	op, _ := s.Op(1)
	if op.State != api.OpState_OP_STATE_PAUSED || op.PausedAtHlc != s.LastHLC() || op.NextStep != 1 {
		t.Fatalf("op %v", op)
	}
	if s.Catalog().Version() != before.Catalog().Version() {
		t.Fatal("a step applied while the switch was off")
	}
	paused := op.PausedAtHlc
	// A second step while still off keeps the first pause time.
	wantCode(t, h.run(step(1, 1, 2, []byte("t"))), api.ResultCode_RESULT_CODE_OP_PAUSED)
	if op, _ := h.state().Op(1); op.PausedAtHlc != paused {
		t.Fatalf("paused_at moved: %d -> %d", paused, op.PausedAtHlc)
	}
	wantCode(t, h.run(operatorSwitch(true)), api.ResultCode_RESULT_CODE_OK)
	if op, _ := h.state().Op(1); op.State != api.OpState_OP_STATE_PENDING || op.PausedAtHlc != 0 {
		t.Fatalf("after enable: %v", op)
	}
	wantCode(t, h.run(step(1, 1, 2, []byte("t"))), api.ResultCode_RESULT_CODE_OK)
	if op, _ := h.state().Op(1); op.State != api.OpState_OP_STATE_DONE {
		t.Fatalf("after step: %v", op)
	}
}

// Disable pauses every live op; enable resumes a RUNNING op as RUNNING,
// unless it was paused longer than op_ttl_ms: then it is ABORTED(STALE)
// and its middle child gets a cooldown from the abort.
func TestSwitchPausesAndResumes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		pauseMs   uint64
		wantState api.OpState
	}{
		{"resume within ttl", 30_000, api.OpState_OP_STATE_RUNNING},
		{"stale after ttl", 30_001, api.OpState_OP_STATE_ABORTED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := opState(t, true, compoundOp(1), medianOp(2))
			wantCode(t, h.run(step(1, 1, 1, []byte("k"))), api.ResultCode_RESULT_CODE_OK)
			off := h.run(&api.Command{Hlc: h.stamp(tc.pauseMs), Body: operatorSwitch(false).Body})
			wantCode(t, off, api.ResultCode_RESULT_CODE_OK)
			offHLC := h.state().LastHLC()
			for _, op := range h.state().LiveOps() {
				if op.State != api.OpState_OP_STATE_PAUSED || op.PausedAtHlc != offHLC {
					t.Fatalf("after disable: %v", op)
				}
			}
			on := h.run(operatorSwitch(true))
			wantCode(t, on, api.ResultCode_RESULT_CODE_OK)
			s := h.state()
			op, _ := s.Op(1)
			if op.State != tc.wantState {
				t.Fatalf("op 1 %v, want %v", op.State, tc.wantState)
			}
			if tc.wantState == api.OpState_OP_STATE_ABORTED {
				if op.AbortReason != api.OpAbortReason_OP_ABORT_REASON_STALE {
					t.Fatalf("abort reason %v", op.AbortReason)
				}
				if tr, ok := s.Detector().Get(4); !ok || tr.CooldownUntilMs != hlc.Physical(s.LastHLC())+60_000 {
					t.Fatalf("middle child cooldown %+v %v", tr, ok)
				}
				// Op 2 (never stepped) is just as stale; no cooldown for it.
				if op2, _ := s.Op(2); op2.State != api.OpState_OP_STATE_ABORTED {
					t.Fatalf("op 2 %v", op2.State)
				}
			} else if op2, _ := s.Op(2); op2.State != api.OpState_OP_STATE_PENDING {
				t.Fatalf("op 2 %v, want PENDING", op2.State)
			}
		})
	}
}

// A step whose target no longer has the planned shape aborts the op with
// the reason; steps already applied stand and the middle child gets a
// cooldown from the abort.
func TestOpStepShapeAborts(t *testing.T) {
	tests := []struct {
		name   string
		prep   func(h *harness) // runs before the failing step
		edit   func(p *api.StateSnapshot)
		step   *api.Command
		reason api.OpAbortReason
		middle bool // a step applied before: route 4 gets a cooldown
	}{
		{name: "route gone (split by hand)", prep: func(h *harness) { h.run(split(2, "p")) },
			step: step(2, 1, 2, []byte("t")), reason: api.OpAbortReason_OP_ABORT_REASON_ROUTE_GONE},
		{name: "shape changed after step 1", edit: func(p *api.StateSnapshot) { p.Ops[0].TargetEnd = []byte("l") },
			step: step(1, 2, 4, []byte("k\x00")), reason: api.OpAbortReason_OP_ABORT_REASON_SHAPE_CHANGED, middle: true},
		{name: "not active after step 1", edit: func(p *api.StateSnapshot) {
			for _, r := range p.Catalog.Routes {
				if r.RouteId == 4 {
					r.State = api.RouteState_ROUTE_STATE_MIGRATING_SOURCE
				}
			}
		}, step: step(1, 2, 4, []byte("k\x00")), reason: api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE, middle: true},
		{name: "invalid key", edit: func(p *api.StateSnapshot) { p.Ops[1].SplitKeys[0] = []byte("m") },
			step: step(2, 1, 2, []byte("m")), reason: api.OpAbortReason_OP_ABORT_REASON_INVALID_KEY},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := opState(t, true, compoundOp(1), medianOp(2))
			wantCode(t, h.run(step(1, 1, 1, []byte("k"))), api.ResultCode_RESULT_CODE_OK)
			if tc.prep != nil {
				tc.prep(h)
			}
			if tc.edit != nil {
				h.editState(tc.edit)
			}
			before := h.state()
			r := h.run(tc.step)
			wantCode(t, r, api.ResultCode_RESULT_CODE_OP_ABORTED)
			s := h.state()
			id := tc.step.GetSplitRange().OpId
			op, _ := s.Op(id)
			if op.State != api.OpState_OP_STATE_ABORTED || op.AbortReason != tc.reason || op.Detail == "" || r.Op == nil {
				t.Fatalf("op %v result %v", op, r.CommandResult)
			}
			if s.Catalog().Version() != before.Catalog().Version() {
				t.Fatal("an aborted step changed the catalog")
			}
			tr, ok := s.Detector().Get(4)
			gotCooldown := ok && tr.CooldownUntilMs == hlc.Physical(s.LastHLC())+60_000
			if gotCooldown != tc.middle {
				t.Fatalf("middle child cooldown %+v, want %v", tr, tc.middle)
			}
			if k := decisionKinds(s); k[len(k)-1] != api.DecisionKind_DECISION_KIND_OP_ABORTED {
				t.Fatalf("last decision %v", k)
			}
		})
	}
}

func TestAbortOp(t *testing.T) {
	h := opState(t, true, compoundOp(1), medianOp(2))
	wantCode(t, h.run(step(1, 1, 1, []byte("k"))), api.ResultCode_RESULT_CODE_OK)
	r := h.run(abort(1, "too hot to touch"))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	op, _ := s.Op(1)
	if op.State != api.OpState_OP_STATE_ABORTED || op.AbortReason != api.OpAbortReason_OP_ABORT_REASON_OPERATOR ||
		op.Detail != "too hot to touch" || op.Actor != "alice" || !proto.Equal(r.Op, op) {
		t.Fatalf("op %v result %v", op, r.Op)
	}
	if tr, ok := s.Detector().Get(4); !ok || tr.CooldownUntilMs != hlc.Physical(s.LastHLC())+60_000 {
		t.Fatalf("middle child cooldown %+v", tr)
	}
	// Op 2 never stepped: abort, no cooldown anywhere new.
	wantCode(t, h.run(abort(2, "")), api.ResultCode_RESULT_CODE_OK)
	if _, ok := h.state().Detector().Get(2); ok {
		t.Fatal("aborting an op before its first step started a cooldown")
	}
	before := h.state()
	wantCode(t, h.run(abort(1, "again")), api.ResultCode_RESULT_CODE_OP_FINISHED)
	wantCode(t, h.run(abort(77, "")), api.ResultCode_RESULT_CODE_OP_NOT_FOUND)
	assertUnchanged(t, before, h.state())
}

// Finished ops beyond the bound are dropped lowest id first; live ops are
// always kept.
func TestFinishedOpsBounded(t *testing.T) {
	h := newHarness(t, Options{FinishedOps: 2})
	h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1", AutoSplit: true}}})
	var ops []*api.Op
	for id := uint64(1); id <= 4; id++ {
		op := medianOp(id)
		op.TargetRouteId, op.TargetStart = 1, nil
		ops = append(ops, op)
	}
	h.editState(func(p *api.StateSnapshot) { p.Ops, p.NextOpId = ops, 5 })
	for _, id := range []uint64{4, 1, 3} {
		wantCode(t, h.run(abort(id, "")), api.ResultCode_RESULT_CODE_OK)
	}
	var ids []uint64
	for _, op := range h.state().Ops() {
		ids = append(ids, op.OpId)
	}
	if len(ids) != 3 || ids[0] != 2 || ids[1] != 3 || ids[2] != 4 {
		t.Fatalf("kept ops %v, want [2 3 4]", ids)
	}
	if h.state().Ops()[0].State != api.OpState_OP_STATE_PENDING {
		t.Fatal("live op 2 not kept")
	}
}
