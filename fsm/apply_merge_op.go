package fsm

import (
	"bytes"
	"errors"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// applyMergeOpStep applies the one step of merge op c.OpId (AutoMerge), as
// applyOpStep does a split op's
// (docs/design.md#ops-the-scheduler-and-the-switch): unknown op; not a merge
// op; step 0; duplicate (a step below next_step answers its first result); a
// step from the future; a finished op; routes other than planned; switch off
// (the op pauses); fence; the planned shape (a route gone, changed or not
// ACTIVE aborts the op). The merge itself is the manual merge's transition
// (catalog.Merge, commitMerge), validated by the op's recorded shape, never by
// catalog version.
func (a *applier) applyMergeOpStep(c *api.MergeRange) *api.CommandResult {
	if err := a.s.Require(clusterversion.AutoMerge); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "op_id: %v", err)
	}
	i, found := findOp(a.s.ops, c.GetOpId())
	if !found {
		return fail(api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "op %d not found", c.GetOpId())
	}
	op := a.s.ops[i]
	step := c.GetStep()
	if !isMergeOp(op) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "op_id: op %d splits; its steps are SplitRange", op.GetOpId())
	}
	if r := answerOutOfOrderStep(op, step); r != nil {
		return r
	}
	if c.GetLeftRouteId() != op.GetTargetRouteId() || c.GetRightRouteId() != op.GetRightRouteId() {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "left_route_id, right_route_id: %d and %d, but op %d merges %d and %d",
			c.GetLeftRouteId(), c.GetRightRouteId(), op.GetOpId(), op.GetTargetRouteId(), op.GetRightRouteId())
	}
	if c.ExpectedVersion != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "expected_version: an op step is validated by the op's planned shape, not a catalog version")
	}
	if !a.s.sw.GetEnabled() {
		if op.GetState() != api.OpState_OP_STATE_PAUSED {
			a.pauseOp(op)
		}
		return fail(api.ResultCode_RESULT_CODE_OP_PAUSED, "auto-split is disabled: op %d paused before step %d", op.GetOpId(), step)
	}
	if r := a.fence(kindMergeRange, "route_id", c.GetLeftRouteId(), "right_route_id", c.GetRightRouteId(), "op_id", op.GetOpId()); r != nil {
		return r
	}
	if r := a.checkMergeShape(op); r != nil {
		return r
	}
	next, merged, err := a.s.cat.Merge(op.GetTargetRouteId(), op.GetRightRouteId(), a.cmd.GetHlc())
	if err != nil {
		// The shape checks above leave only what the catalog alone knows.
		reason := api.OpAbortReason_OP_ABORT_REASON_SHAPE_CHANGED
		if errors.Is(err, catalog.ErrRouteNotActive) {
			reason = api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE
		}
		return a.abortStep(op, reason, "%v", err)
	}
	return a.mergeStepApplied(op, next, merged)
}

// checkMergeShape aborts op when its routes are not as planned: both live,
// [target_start, target_end) and [target_end, right_end), both ACTIVE.
func (a *applier) checkMergeShape(op *api.Op) *api.CommandResult {
	shapes := []struct {
		id         uint64
		start, end []byte
	}{
		{op.GetTargetRouteId(), op.GetTargetStart(), op.GetTargetEnd()},
		{op.GetRightRouteId(), op.GetTargetEnd(), op.GetRightEnd()},
	}
	for _, sh := range shapes {
		r, live := a.s.cat.Route(sh.id)
		switch {
		case !live:
			return a.abortStep(op, api.OpAbortReason_OP_ABORT_REASON_ROUTE_GONE, "route %d no longer exists", sh.id)
		case !bytes.Equal(r.Start, sh.start) || !bytes.Equal(r.End, sh.end):
			return a.abortStep(op, api.OpAbortReason_OP_ABORT_REASON_SHAPE_CHANGED, "route %d is now [%s, %s), planned [%s, %s)",
				r.ID, catalog.FormatKey(r.Start), catalog.FormatKey(r.End), catalog.FormatKey(sh.start), catalog.FormatKey(sh.end))
		case r.State != catalog.StateActive:
			return a.abortStep(op, api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE, "route %d is %s", r.ID, r.State)
		}
	}
	return nil
}

// mergeStepApplied installs the merge (catalog, watcher history, the
// detector: both parents forgotten, the merged route in the split
// cooldown from the merge, so it is not split again at once) and finishes
// the op.
func (a *applier) mergeStepApplied(op *api.Op, next *catalog.Catalog, merged *catalog.RouteDescriptor) *api.CommandResult {
	commit := a.cmd.GetHlc()
	left, right := op.GetTargetRouteId(), op.GetRightRouteId()
	boundary := a.commitMerge(left, right, next, merged)
	res := mergeResult(next, merged, commit, op.GetOpId())
	n := cloneOp(op)
	n.StepResults = append(n.StepResults, res)
	n.NextStep++
	n.UpdatedHlc = commit
	n.State = api.OpState_OP_STATE_DONE
	a.putOp(n)
	a.retireFinished()
	detail := fmt.Sprintf("merged r%d and r%d into r%d", left, right, merged.ID)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_MERGE_APPLIED, RouteId: left, OpId: n.GetOpId(),
		Score: n.GetScore(), SplitKeys: [][]byte{boundary}, Detail: detail})
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_OP_DONE, RouteId: left, OpId: n.GetOpId(), Score: n.GetScore(), Detail: detail})
	a.f.m.merge(mergeOriginAutomatic)
	a.f.log.Info("fsm: merge op applied", "op_id", n.GetOpId(), "route_id", left, "right_route_id", right, "merged_route_id", merged.ID,
		"merged_estimate", n.GetScore(), "catalog_version", next.Version(), "commit_hlc", commit)
	return res
}
