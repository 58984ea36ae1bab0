package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
)

// plannedMerge is a version 3 cluster of routes 1 [, m) and 2 [m, )
// with merge op 1 planned for them.
func plannedMerge(t *testing.T) *mergeCluster {
	t.Helper()
	m := newMergeCluster(t, mergeTestConfig(), "m")
	if r := m.idle(3); len(r.PlannedOpIds) != 1 {
		t.Fatalf("planned %v", r.PlannedOpIds)
	}
	return m
}

// nextStep is the command fsm.NextOpStep proposes now.
func (m *mergeCluster) nextStep() *api.Command {
	m.t.Helper()
	st := m.state()
	op, cmd := NextOpStep(st.Switch().GetEnabled(), st.LiveOps(), "scheduler")
	if op == nil {
		m.t.Fatal("no step to propose")
	}
	return cmd
}

func TestMergeOpStepApplies(t *testing.T) {
	m := plannedMerge(t)
	step := m.nextStep()
	if step.GetMergeRange().GetLeftRouteId() != 1 || step.GetMergeRange().GetRightRouteId() != 2 || step.GetMergeRange().GetOpId() != 1 {
		t.Fatalf("step %v", step)
	}
	r := m.run(proto.Clone(step).(*api.Command))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	s := m.state()
	merged, ok := s.Catalog().Route(3)
	if !ok || s.Catalog().Len() != 1 || !merged.Merged() || merged.MergedFrom().Left != 1 || merged.MergedFrom().Right != 2 || len(r.Children) != 1 || r.Children[0].GetRouteId() != 3 {
		t.Fatalf("catalog %d routes, merged %v, result %v", s.Catalog().Len(), merged, r.CommandResult)
	}
	op, _ := s.Op(1)
	if op.GetState() != api.OpState_OP_STATE_DONE || op.GetNextStep() != 2 || len(op.GetStepResults()) != 1 || len(s.LiveOps()) != 0 {
		t.Fatalf("op %v", op)
	}
	ds := decisionsOf(s, api.DecisionKind_DECISION_KIND_MERGE_APPLIED)
	if len(ds) != 1 || ds[0].GetOpId() != 1 || ds[0].GetRouteId() != 1 || string(ds[0].GetSplitKeys()[0]) != "m" ||
		!strings.Contains(ds[0].GetDetail(), "merged r1 and r2 into r3") || len(decisionsOf(s, api.DecisionKind_DECISION_KIND_OP_DONE)) != 1 {
		t.Fatalf("decisions %v", s.Decisions())
	}
	// The merged route is in the split cooldown from the merge.
	if tr, _ := s.Detector().Get(3); tr.CooldownUntilMs != m.ms-1+s.Config().GetCooldownMs() {
		t.Fatalf("merged route's cooldown until %d, merge at %d", tr.CooldownUntilMs, m.ms-1)
	}
	// A duplicate of the step answers the first result and changes nothing.
	before := m.state()
	dup := m.run(proto.Clone(step).(*api.Command))
	if dup.Code != api.ResultCode_RESULT_CODE_OK || !proto.Equal(dup.CommandResult, r.CommandResult) {
		t.Fatalf("duplicate answered %v", dup.CommandResult)
	}
	assertUnchanged(t, before, m.state())
}

// Refused steps change nothing (but, where said, the op).
func TestMergeOpStepRefusals(t *testing.T) {
	mutate := func(edit func(c *api.MergeRange)) func(c *api.Command) {
		return func(c *api.Command) { edit(c.GetMergeRange()) }
	}
	for name, tc := range map[string]struct {
		edit func(c *api.Command)
		code api.ResultCode
		msg  string
	}{
		"unknown op":       {mutate(func(c *api.MergeRange) { c.OpId = 9 }), api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "op 9 not found"},
		"step 0":           {mutate(func(c *api.MergeRange) { c.Step = 0 }), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: must be >= 1"},
		"a future step":    {mutate(func(c *api.MergeRange) { c.Step = 2 }), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: 2 ahead"},
		"other routes":     {mutate(func(c *api.MergeRange) { c.RightRouteId = 1; c.LeftRouteId = 2 }), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "op 1 merges 1 and 2"},
		"expected version": {mutate(func(c *api.MergeRange) { c.ExpectedVersion = proto.Uint64(1) }), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "expected_version"},
		"the fence":        {func(c *api.Command) { c.Hlc = 1 }, api.ResultCode_RESULT_CODE_FENCE_VIOLATION, "not after last applied hlc"},
	} {
		t.Run(name, func(t *testing.T) {
			m := plannedMerge(t)
			c := m.nextStep()
			tc.edit(c)
			before := m.state()
			r := m.run(c)
			wantCode(t, r, tc.code)
			if !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("message %q does not mention %q", r.Message, tc.msg)
			}
			if tc.code == api.ResultCode_RESULT_CODE_FENCE_VIOLATION {
				return // the violation counter moved, nothing else
			}
			assertUnchanged(t, before, m.state())
		})
	}
	t.Run("a split op's id", func(t *testing.T) {
		m := newMergeCluster(t, mergeTestConfig(), "f", "m")
		hot := api.RouteLoad{RouteID: 3, Writes: 6000}
		m.column(hot)
		r := m.column(hot)
		if len(r.PlannedOpIds) != 1 {
			t.Fatalf("planned %v", r.PlannedOpIds)
		}
		before := m.state()
		r2 := m.run(&api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: 1, RightRouteId: 2, OpId: r.PlannedOpIds[0], Step: 1}}})
		wantCode(t, r2, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
		if !strings.Contains(r2.Message, "its steps are SplitRange") {
			t.Fatalf("message %q", r2.Message)
		}
		assertUnchanged(t, before, m.state())
	})
}

// A step committed while the switch is off pauses the op and merges
// nothing; a changed route aborts it, and a manual merge of either of its
// routes is refused while it lives.
func TestMergeOpStepPausesAndAborts(t *testing.T) {
	m := plannedMerge(t)
	step := m.nextStep()
	wantCode(t, m.run(setSwitch(false, api.SwitchSource_SWITCH_SOURCE_OPERATOR)), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, m.run(proto.Clone(step).(*api.Command)), api.ResultCode_RESULT_CODE_OP_PAUSED)
	if op, _ := m.state().Op(1); op.GetState() != api.OpState_OP_STATE_PAUSED || m.state().Catalog().Len() != 2 {
		t.Fatalf("op %v, %d routes", op, m.state().Catalog().Len())
	}

	m = newMergeCluster(t, mergeTestConfig(), "f", "m")
	m.idle(3)
	live := m.state().LiveOps()
	if len(live) != 1 || live[0].GetTargetRouteId() != 1 || live[0].GetRightRouteId() != 2 {
		t.Fatalf("live ops %v", live)
	}
	step = m.nextStep()
	r := m.run(&api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: 2, RightRouteId: 3}}})
	wantCode(t, r, api.ResultCode_RESULT_CODE_ROUTE_IN_LIVE_OP)
	wantCode(t, m.run(split(1, "c")), api.ResultCode_RESULT_CODE_OK)
	r = m.run(step)
	wantCode(t, r, api.ResultCode_RESULT_CODE_OP_ABORTED)
	op, _ := m.state().Op(1)
	if op.GetState() != api.OpState_OP_STATE_ABORTED || op.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_ROUTE_GONE || m.state().Catalog().Len() != 4 {
		t.Fatalf("op %v after its left route split", op)
	}
}

// A route an automatic merge made is not split again within the cooldown
// of its merge, however hot: the merged route gets the split cooldown from
// merged_at_hlc.
func TestAutomaticMergeGetsTheSplitCooldown(t *testing.T) {
	m := plannedMerge(t)
	wantCode(t, m.run(m.nextStep()), api.ResultCode_RESULT_CODE_OK)
	hot := api.RouteLoad{RouteID: 3, Writes: 6000}
	for range 3 {
		if r := m.column(hot); len(r.PlannedOpIds) != 0 {
			t.Fatalf("the merged route was planned for a split within its cooldown: %v", r.PlannedOpIds)
		}
	}
	if tr, _ := m.state().Detector().Get(3); tr.Explanation.Reason != detector.ReasonCooldown {
		t.Fatalf("merged route explained %+v", tr.Explanation)
	}
	m.ms += m.state().Config().GetCooldownMs()
	if r := m.column(hot); len(r.PlannedOpIds) != 1 {
		t.Fatalf("planned %v once the cooldown ended", r.PlannedOpIds)
	}
}
