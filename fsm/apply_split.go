package fsm

import (
	"bytes"
	"errors"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// applySplitRange is a manual split (op_id 0) or a step of a detector op.
func (a *applier) applySplitRange(c *api.SplitRange) *api.CommandResult {
	if c.GetOpId() == 0 {
		return a.applyManualSplit(c)
	}
	return a.applyOpStep(c)
}

func (a *applier) applyManualSplit(c *api.SplitRange) *api.CommandResult {
	if c.GetStep() != 0 {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: %d given without op_id (manual splits have no step)", c.GetStep())
	}
	if r := a.fence(kindSplitRange, "route_id", c.GetRouteId(), "op_id", c.GetOpId()); r != nil {
		return r
	}
	var (
		next     *catalog.Catalog
		children [2]*catalog.RouteDescriptor
		err      error
		by       = catalog.PlacedByRule // version 2 records no placement
	)
	if a.s.Has(clusterversion.OperatorBoundariesKept) {
		by = catalog.PlacedByOperator // automatic merges keep the key
	}
	if c.ExpectedVersion != nil && !skipCAS() {
		next, children, err = a.s.cat.SplitCAS(c.GetExpectedVersion(), by, c.GetRouteId(), c.GetSplitKey(), a.cmd.GetHlc())
	} else {
		next, children, err = a.s.cat.SplitPlaced(by, c.GetRouteId(), c.GetSplitKey(), a.cmd.GetHlc())
	}
	if err != nil {
		return fail(splitErrorCode(err), "%v", err)
	}
	a.commitSplit(c.GetRouteId(), next, children, 0)
	a.markSplit(c.GetRouteId(), 0, api.SplitOrigin_SPLIT_ORIGIN_MANUAL, [][]byte{c.GetSplitKey()})
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_MANUAL_SPLIT, RouteId: c.GetRouteId(),
		Origin: api.SplitOrigin_SPLIT_ORIGIN_MANUAL, SplitKeys: [][]byte{c.GetSplitKey()}, Actor: c.GetActor(), Note: a.s.KeptNote(c.GetNote())})
	a.f.m.split(api.SplitOrigin_SPLIT_ORIGIN_MANUAL)
	a.f.log.Info("fsm: manual split", "route_id", c.GetRouteId(), "split_origin", "manual",
		"catalog_version", next.Version(), "commit_hlc", a.cmd.GetHlc(), "actor", c.GetActor())
	return splitResult(next, children, a.cmd.GetHlc(), 0)
}

// splitErrorCode maps the catalog's split errors to result codes.
func splitErrorCode(err error) api.ResultCode {
	switch {
	case errors.Is(err, catalog.ErrKeyTooLarge):
		return api.ResultCode_RESULT_CODE_KEY_TOO_LARGE
	case errors.Is(err, catalog.ErrVersionMismatch):
		return api.ResultCode_RESULT_CODE_VERSION_MISMATCH
	case errors.Is(err, catalog.ErrRouteNotFound):
		return api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND
	case errors.Is(err, catalog.ErrRouteNotActive):
		return api.ResultCode_RESULT_CODE_ROUTE_NOT_ACTIVE
	case errors.Is(err, catalog.ErrSplitKeyAtBoundary):
		return api.ResultCode_RESULT_CODE_SPLIT_KEY_AT_BOUNDARY
	case errors.Is(err, catalog.ErrSplitKeyOutsideRoute):
		return api.ResultCode_RESULT_CODE_SPLIT_KEY_OUTSIDE_ROUTE
	}
	return api.ResultCode_RESULT_CODE_INVALID_ARGUMENT
}

func splitResult(cat *catalog.Catalog, children [2]*catalog.RouteDescriptor, commitHLC, opID uint64) *api.CommandResult {
	return &api.CommandResult{
		CatalogVersion: cat.Version(),
		Children:       []*api.RouteDescriptor{children[0].ToProto(), children[1].ToProto()},
		CommitHlc:      commitHLC,
		OpId:           opID,
	}
}

// commitSplit installs a split: catalog, watcher history, and the
// children's cooldowns (all but consumed, the middle child an op's next
// step will split).
func (a *applier) commitSplit(parentID uint64, next *catalog.Catalog, children [2]*catalog.RouteDescriptor, consumed uint64) {
	commit := a.cmd.GetHlc()
	a.s.cat = next
	a.s.hist = a.s.hist.Append(catalog.SplitDelta(next.Version(), parentID, children, commit))
	a.s.det = a.s.det.OnSplit(a.s.detCfg, parentID, []uint64{children[0].ID, children[1].ID}, consumed, hlc.Physical(commit))
}

// applyOpStep applies step c.Step of op c.OpId exactly as
// docs/design.md#ops-the-scheduler-and-the-switch says. The checks run in this
// order: unknown op; step 0; duplicate (a step below next_step returns its
// first result, even for a finished op); a step from the future; a finished op;
// route and key other than planned; switch off (the op pauses); fence; the
// target's shape (a mismatch aborts the op).
func (a *applier) applyOpStep(c *api.SplitRange) *api.CommandResult {
	i, found := findOp(a.s.ops, c.GetOpId())
	if !found {
		return fail(api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "op %d not found", c.GetOpId())
	}
	op := a.s.ops[i]
	if op.GetKind() != api.OpKind_OP_KIND_SPLIT {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "op %d is a %s op: its steps are not splits", op.GetOpId(), EnumName(op.GetKind()))
	}
	step := c.GetStep()
	if r := answerOutOfOrderStep(op, step); r != nil {
		return r
	}
	// A live op's next step always has a planned key (checked on restore).
	key := op.GetSplitKeys()[step-1]
	if c.GetRouteId() != op.GetTargetRouteId() {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "route_id: %d, but step %d of op %d splits route %d",
			c.GetRouteId(), step, op.GetOpId(), op.GetTargetRouteId())
	}
	if !bytes.Equal(c.GetSplitKey(), key) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "split_key: %s, but step %d of op %d splits at %s",
			catalog.FormatKey(c.GetSplitKey()), step, op.GetOpId(), catalog.FormatKey(key))
	}
	if !a.s.sw.GetEnabled() {
		if op.GetState() != api.OpState_OP_STATE_PAUSED {
			a.pauseOp(op)
		}
		return fail(api.ResultCode_RESULT_CODE_OP_PAUSED, "auto-split is disabled: op %d paused before step %d", op.GetOpId(), step)
	}
	if r := a.fence(kindSplitRange, "route_id", c.GetRouteId(), "op_id", c.GetOpId()); r != nil {
		return r
	}
	route, live := a.s.cat.Route(op.GetTargetRouteId())
	if !live {
		return a.abortStep(op, api.OpAbortReason_OP_ABORT_REASON_ROUTE_GONE, "route %d no longer exists", op.GetTargetRouteId())
	}
	if !bytes.Equal(route.Start, op.GetTargetStart()) || !bytes.Equal(route.End, op.GetTargetEnd()) {
		return a.abortStep(op, api.OpAbortReason_OP_ABORT_REASON_SHAPE_CHANGED, "route %d is now [%s, %s), planned [%s, %s)",
			route.ID, catalog.FormatKey(route.Start), catalog.FormatKey(route.End),
			catalog.FormatKey(op.GetTargetStart()), catalog.FormatKey(op.GetTargetEnd()))
	}
	next, children, err := a.s.cat.Split(route.ID, key, a.cmd.GetHlc())
	if errors.Is(err, catalog.ErrRouteNotActive) {
		return a.abortStep(op, api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE, "route %d is %s", route.ID, route.State)
	}
	if err != nil {
		return a.abortStep(op, api.OpAbortReason_OP_ABORT_REASON_INVALID_KEY, "%v", err)
	}
	return a.stepApplied(op, next, children)
}

func (a *applier) abortStep(op *api.Op, reason api.OpAbortReason, format string, args ...any) *api.CommandResult {
	r := fail(api.ResultCode_RESULT_CODE_OP_ABORTED, format, args...)
	n := a.abortOp(op, reason, r.Message)
	r.Op = n
	r.OpId = n.GetOpId()
	return r
}

// stepApplied records a successful step: the op advances (its target
// becomes the child holding the next key) or is DONE.
func (a *applier) stepApplied(op *api.Op, next *catalog.Catalog, children [2]*catalog.RouteDescriptor) *api.CommandResult {
	commit := a.cmd.GetHlc()
	res := splitResult(next, children, commit, op.GetOpId())
	parent := op.GetTargetRouteId()
	n := cloneOp(op)
	n.StepResults = append(n.StepResults, res)
	n.NextStep++
	n.UpdatedHlc = commit
	var consumed uint64
	if int(n.NextStep) <= len(n.GetSplitKeys()) {
		nextKey := n.GetSplitKeys()[n.NextStep-1]
		target := children[0]
		if children[1].Contains(nextKey) {
			target = children[1]
		}
		n.State = api.OpState_OP_STATE_RUNNING
		n.TargetRouteId, n.TargetStart, n.TargetEnd = target.ID, target.Start, target.End
		consumed = target.ID
	} else {
		n.State = api.OpState_OP_STATE_DONE
	}
	a.commitSplit(parent, next, children, consumed)
	a.putOp(n)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_SPLIT_APPLIED, RouteId: parent, OpId: n.GetOpId(),
		Origin: n.GetOrigin(), Score: n.GetScore(), SplitKeys: [][]byte{n.GetSplitKeys()[n.NextStep-2]}})
	a.f.m.split(n.GetOrigin())
	a.f.log.Info("fsm: op step applied", "op_id", n.GetOpId(), "route_id", parent, "split_origin", originLabel(n.GetOrigin()),
		"score", n.GetScore(), "step", n.NextStep-1, "catalog_version", next.Version(), "commit_hlc", commit)
	if n.State == api.OpState_OP_STATE_DONE {
		a.markOpSplits(n)
		a.retireFinished()
		a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_OP_DONE, RouteId: parent, OpId: n.GetOpId(),
			Origin: n.GetOrigin(), Score: n.GetScore(), SplitKeys: n.GetSplitKeys()})
		a.f.m.opDone()
	}
	return res
}
