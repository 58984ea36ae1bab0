package fsm

import (
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// Moves between shard groups (docs/design.md#moves, feature RangeMoves).
// A MOVE op has three steps, each one catalog change delivered to
// watchers as the route changed in place:
//
//	1 begin   ACTIVE -> MIGRATING_SOURCE (applied when the op is made)
//	2 fence   MIGRATING_SOURCE -> WRITE_FENCED, once every identity of the
//	          target acknowledged its copy (COPIED)
//	3 commit  WRITE_FENCED -> ACTIVE in the target, once every identity of
//	          the source acknowledged the fence (FENCED, with its last
//	          write) and every identity of the target caught up to the
//	          highest of those watermarks (CAUGHT_UP)
//
// An abort (an operator's, or the leader's after move_ttl_ms without the
// acknowledgements the step waits for) returns a begun or fenced route to
// ACTIVE in its source. Apply checks every acknowledgement a step needs
// itself: the leader's stepper only proposes.

// Move steps.
const (
	moveStepBegin  = 1
	moveStepFence  = 2
	moveStepCommit = 3
)

func isMoveOp(op *api.Op) bool { return op.GetKind() == api.OpKind_OP_KIND_MOVE }

// applyMoveRange: an operator's move (op_id 0) makes a MOVE op and begins
// it; with op_id it is the leader's step of that op.
func (a *applier) applyMoveRange(c *api.MoveRange) *api.CommandResult {
	if err := a.s.Require(clusterversion.RangeMoves); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "move_range: %v", err)
	}
	if c.GetOpId() != 0 {
		return a.applyMoveStep(c)
	}
	return a.applyMoveBegin(c)
}

// applyMoveBegin checks, in order: no step without an op, the fence, the
// expected version, the route (exists, ACTIVE, in no live op), the target
// group (exists, ACTIVE, not the route's own), data nodes on both sides to
// acknowledge; then makes the op and applies its begin.
func (a *applier) applyMoveBegin(c *api.MoveRange) *api.CommandResult {
	if c.GetStep() != 0 {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: %d given without op_id (an operator's move is its begin)", c.GetStep())
	}
	if r := a.fence(kindMoveRange, "route_id", c.GetRouteId(), "target_group_id", c.GetTargetGroupId()); r != nil {
		return r
	}
	if c.ExpectedVersion != nil && c.GetExpectedVersion() != a.s.cat.Version() {
		return fail(api.ResultCode_RESULT_CODE_VERSION_MISMATCH, "expected version %d, catalog is at %d", c.GetExpectedVersion(), a.s.cat.Version())
	}
	route, ok := a.s.cat.Route(c.GetRouteId())
	switch {
	case !ok:
		return fail(api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, "route %d", c.GetRouteId())
	case route.State != catalog.StateActive:
		return fail(api.ResultCode_RESULT_CODE_ROUTE_NOT_ACTIVE, "route %d is %s", route.ID, route.State)
	}
	if r := a.refuseLiveOpRoute(route.ID); r != nil {
		return r
	}
	target, ok := a.s.Group(c.GetTargetGroupId())
	switch {
	case !ok:
		return fail(api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND, "move of route %d: no shard group %d", route.ID, c.GetTargetGroupId())
	case target.GetGroupId() == route.GroupID:
		return fail(api.ResultCode_RESULT_CODE_MOVE_REFUSED, "move of route %d: group %d serves it already", route.ID, route.GroupID)
	case target.GetState() != api.GroupState_GROUP_STATE_ACTIVE:
		return fail(api.ResultCode_RESULT_CODE_MOVE_REFUSED, "move of route %d: group %d (%s) is %s and receives no route",
			route.ID, target.GetGroupId(), target.GetName(), groupStateName(target.GetState()))
	}
	source, _ := a.s.Group(route.GroupID) // restore checks every route's group is in the table
	for _, g := range []*api.ShardGroup{source, target} {
		if len(g.GetIdentities()) == 0 {
			return fail(api.ResultCode_RESULT_CODE_MOVE_REFUSED, "move of route %d: group %d (%s) has no data-node identity to acknowledge the move: add one first",
				route.ID, g.GetGroupId(), g.GetName())
		}
	}
	id := a.s.nextOpID
	next, moved, err := a.s.cat.BeginMove(route.ID, target.GetGroupId(), id)
	if err != nil {
		return fail(moveErrorCode(err), "%v", err)
	}
	op := &api.Op{OpId: id, Kind: api.OpKind_OP_KIND_MOVE, State: api.OpState_OP_STATE_RUNNING, NextStep: moveStepFence,
		TargetRouteId: route.ID, TargetStart: route.Start, TargetEnd: route.End, SourceGroupId: route.GroupID, TargetGroupId: target.GetGroupId(),
		CreatedHlc: a.nowHLC, Actor: c.GetActor(), Note: a.s.KeptNote(c.GetNote())}
	a.s.nextOpID++
	res := a.commitMoveStep(op, next, moved, "begun")
	if !a.s.sw.GetEnabled() {
		// The switch holds a move before its fence.
		res.Op = a.pauseOp(res.Op)
	}
	return res
}

// applyMoveStep applies the next step of a live move: the begin of a
// planned one (aborted instead if its route or groups changed since), the
// fence or the commit once their acknowledgements are complete. A
// duplicate answers its first result.
func (a *applier) applyMoveStep(c *api.MoveRange) *api.CommandResult {
	i, found := findOp(a.s.ops, c.GetOpId())
	if !found {
		return fail(api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "op %d not found", c.GetOpId())
	}
	op := a.s.ops[i]
	if !isMoveOp(op) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "op %d is a %s op, not a move", op.GetOpId(), EnumName(op.GetKind()))
	}
	if r := answerOutOfOrderStep(op, c.GetStep()); r != nil {
		return r
	}
	if c.GetRouteId() != op.GetTargetRouteId() {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "route_id: %d, but op %d moves route %d", c.GetRouteId(), op.GetOpId(), op.GetTargetRouteId())
	}
	if op.GetState() == api.OpState_OP_STATE_PAUSED {
		return fail(api.ResultCode_RESULT_CODE_OP_PAUSED, "op %d is paused before its fence: auto-split is disabled", op.GetOpId())
	}
	if r := a.fence(kindMoveRange, "route_id", op.GetTargetRouteId(), "op_id", op.GetOpId()); r != nil {
		return r
	}
	var (
		next  *catalog.Catalog
		moved *catalog.RouteDescriptor
		err   error
		what  string
	)
	switch c.GetStep() {
	case moveStepBegin:
		// A planned move (automatic placement) begins if its route and
		// groups still allow it; otherwise the op ends here.
		if !a.s.sw.GetEnabled() {
			a.pauseOp(op)
			return fail(api.ResultCode_RESULT_CODE_OP_PAUSED, "auto-split is disabled: op %d paused before its begin", op.GetOpId())
		}
		if reason, why := a.beginBlocked(op); reason != api.OpAbortReason_OP_ABORT_REASON_UNSPECIFIED {
			n := a.abortOp(op, reason, why)
			return &api.CommandResult{Code: api.ResultCode_RESULT_CODE_OP_ABORTED, Message: fmt.Sprintf("op %d aborted: %s", op.GetOpId(), why), OpId: n.GetOpId(), Op: n}
		}
		next, moved, err = a.s.cat.BeginMove(op.GetTargetRouteId(), op.GetTargetGroupId(), op.GetOpId())
		what = "begun"
	case moveStepFence:
		if !a.s.sw.GetEnabled() {
			a.pauseOp(op)
			return fail(api.ResultCode_RESULT_CODE_OP_PAUSED, "auto-split is disabled: op %d paused before its fence", op.GetOpId())
		}
		if missing := missingAcks(a.s, op, api.MoveAck_MOVE_ACK_COPIED); len(missing) > 0 {
			return fail(api.ResultCode_RESULT_CODE_MOVE_ACK_STALE, "op %d: the fence waits for the copy acknowledgements of %v", op.GetOpId(), missing)
		}
		next, moved, err = a.s.cat.FenceMove(op.GetTargetRouteId(), op.GetOpId())
		what = "fenced"
	case moveStepCommit:
		for _, ack := range []api.MoveAck{api.MoveAck_MOVE_ACK_FENCED, api.MoveAck_MOVE_ACK_CAUGHT_UP} {
			if missing := missingAcks(a.s, op, ack); len(missing) > 0 {
				return fail(api.ResultCode_RESULT_CODE_MOVE_ACK_STALE, "op %d: the commit waits for the %s acknowledgements of %v", op.GetOpId(), ackName(ack), missing)
			}
		}
		next, moved, err = a.s.cat.CommitMove(op.GetTargetRouteId(), op.GetOpId())
		what = "committed"
	default:
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: %d is not a step of a move (1 begin, 2 fence, 3 commit)", c.GetStep())
	}
	if err != nil {
		// Only a move keeps its route out of every other change, so this is
		// a state no command sequence makes: every replica refuses alike.
		return fail(moveErrorCode(err), "%v", err)
	}
	return a.commitMoveStep(cloneOp(op), next, moved, what)
}

// beginBlocked says why a planned move may no longer begin: its route gone
// or reshaped, moved to another group or not ACTIVE, its target gone, not
// ACTIVE, or either group without data nodes.
func (a *applier) beginBlocked(op *api.Op) (api.OpAbortReason, string) {
	r, ok := a.s.cat.Route(op.GetTargetRouteId())
	switch {
	case !ok:
		return api.OpAbortReason_OP_ABORT_REASON_ROUTE_GONE, fmt.Sprintf("route %d no longer exists", op.GetTargetRouteId())
	case string(r.Start) != string(op.GetTargetStart()) || string(r.End) != string(op.GetTargetEnd()) || r.GroupID != op.GetSourceGroupId():
		return api.OpAbortReason_OP_ABORT_REASON_SHAPE_CHANGED, fmt.Sprintf("route %d changed since the plan", r.ID)
	case r.State != catalog.StateActive:
		return api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE, fmt.Sprintf("route %d is %s", r.ID, r.State)
	}
	for _, id := range []uint64{op.GetSourceGroupId(), op.GetTargetGroupId()} {
		g, ok := a.s.Group(id)
		switch {
		case !ok:
			return api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE, fmt.Sprintf("group %d no longer exists", id)
		case id == op.GetTargetGroupId() && g.GetState() != api.GroupState_GROUP_STATE_ACTIVE:
			return api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE, fmt.Sprintf("group %d is %s", id, groupStateName(g.GetState()))
		case len(g.GetIdentities()) == 0:
			return api.OpAbortReason_OP_ABORT_REASON_NOT_ACTIVE, fmt.Sprintf("group %d has no data-node identity", id)
		}
	}
	return api.OpAbortReason_OP_ABORT_REASON_UNSPECIFIED, ""
}

// commitMoveStep installs a move's step: the catalog and the watchers'
// delta, the op one step on (DONE after the commit), its decision.
func (a *applier) commitMoveStep(op *api.Op, next *catalog.Catalog, moved *catalog.RouteDescriptor, what string) *api.CommandResult {
	commit := a.cmd.GetHlc()
	a.s.cat = next
	a.s.hist = a.s.hist.Append(catalog.MoveDelta(next.Version(), moved, commit))
	res := &api.CommandResult{CatalogVersion: next.Version(), CommitHlc: commit, OpId: op.GetOpId(), Children: []*api.RouteDescriptor{moved.ToProto()}}
	op.StepResults = append(op.StepResults, res)
	op.NextStep = uint32(len(op.StepResults)) + 1
	op.StepCatalogVersion, op.StepHlc, op.UpdatedHlc = next.Version(), a.nowHLC, a.nowHLC
	switch {
	case op.GetNextStep() > moveStepCommit:
		op.State = api.OpState_OP_STATE_DONE
	case op.GetState() == api.OpState_OP_STATE_PENDING:
		op.State = api.OpState_OP_STATE_RUNNING
	}
	a.putOp(op)
	a.retireFinished()
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_MOVE, RouteId: op.GetTargetRouteId(), OpId: op.GetOpId(),
		Actor: op.GetActor(), Note: op.GetNote(),
		Detail: fmt.Sprintf("move %s: r%d from group %d to group %d", what, op.GetTargetRouteId(), op.GetSourceGroupId(), op.GetTargetGroupId())})
	a.f.m.moveStep(what)
	a.f.log.Info("fsm: move step", "op_id", op.GetOpId(), "route_id", op.GetTargetRouteId(), "step", what,
		"source_group", op.GetSourceGroupId(), "target_group", op.GetTargetGroupId(), "catalog_version", next.Version(), "commit_hlc", commit)
	// The op keeps the step's answer for a duplicate; the answer now also
	// carries the op (not kept inside itself).
	out := proto.CloneOf(res)
	out.Op = op
	return out
}

// applyAckMove records a data node's acknowledgement. It is refused,
// changing nothing, when it is not one the move waits for: another op,
// route or catalog version, an identity of the wrong group, the wrong
// ack for the step, a catch-up before the fence is complete or naming
// another watermark. A repeated acknowledgement changes nothing.
func (a *applier) applyAckMove(c *api.AckMove) *api.CommandResult {
	if err := a.s.Require(clusterversion.RangeMoves); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "ack_move: %v", err)
	}
	i, found := findOp(a.s.ops, c.GetOpId())
	if !found {
		return fail(api.ResultCode_RESULT_CODE_OP_NOT_FOUND, "ack_move: op %d not found", c.GetOpId())
	}
	op := a.s.ops[i]
	ack := c.GetAck()
	stale := func(format string, args ...any) *api.CommandResult {
		return fail(api.ResultCode_RESULT_CODE_MOVE_ACK_STALE, "ack_move %s for op %d (step %d): %s", ackName(ack), op.GetOpId(), op.GetNextStep(), fmt.Sprintf(format, args...))
	}
	switch {
	case !isMoveOp(op):
		return stale("op %d is not a move", op.GetOpId())
	case !isLive(op):
		return stale("the move is %s", EnumName(op.GetState()))
	case c.GetRouteId() != op.GetTargetRouteId():
		return stale("route %d given, the move is of route %d", c.GetRouteId(), op.GetTargetRouteId())
	}
	owed, wantStep := op.GetTargetGroupId(), uint32(moveStepCommit)
	switch ack {
	case api.MoveAck_MOVE_ACK_COPIED:
		wantStep = moveStepFence
	case api.MoveAck_MOVE_ACK_FENCED:
		owed = op.GetSourceGroupId()
	case api.MoveAck_MOVE_ACK_CAUGHT_UP:
	default:
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "ack_move: ack %v is not COPIED, FENCED or CAUGHT_UP", ack)
	}
	if g, ok := a.s.Group(owed); !ok || !slices.Contains(g.GetIdentities(), c.GetIdentity()) {
		return fail(api.ResultCode_RESULT_CODE_MOVE_ACK_WRONG_GROUP, "ack_move %s for op %d (step %d): identity %q does not serve group %d, which owes it",
			ackName(ack), op.GetOpId(), op.GetNextStep(), c.GetIdentity(), owed)
	}
	switch {
	case op.GetNextStep() != wantStep:
		return stale("a %s acknowledgement belongs to step %d", ackName(ack), wantStep)
	case c.GetCatalogVersion() != op.GetStepCatalogVersion():
		return stale("catalog version %d given, the step took effect at %d", c.GetCatalogVersion(), op.GetStepCatalogVersion())
	}
	n := cloneOp(op)
	list := ackList(n, ack)
	if _, dup := slices.BinarySearch(*list, c.GetIdentity()); dup {
		if ack == api.MoveAck_MOVE_ACK_CAUGHT_UP && c.GetWatermark() != op.GetWatermark() {
			return stale("watermark %d given, the source's final watermark is %d", c.GetWatermark(), op.GetWatermark())
		}
		return &api.CommandResult{OpId: op.GetOpId(), Op: op, Message: "duplicate acknowledgement"}
	}
	switch ack {
	case api.MoveAck_MOVE_ACK_FENCED:
		if len(n.GetAckedCaughtUp()) > 0 {
			return stale("the target has caught up to watermark %d already", op.GetWatermark())
		}
		n.Watermark = max(n.GetWatermark(), c.GetWatermark())
	case api.MoveAck_MOVE_ACK_CAUGHT_UP:
		if missing := missingAcks(a.s, op, api.MoveAck_MOVE_ACK_FENCED); len(missing) > 0 {
			return stale("the source's fence acknowledgements of %v are missing, so its final watermark is not known", missing)
		}
		if c.GetWatermark() != op.GetWatermark() {
			return stale("watermark %d given, the source's final watermark is %d", c.GetWatermark(), op.GetWatermark())
		}
	}
	i, _ = slices.BinarySearch(*list, c.GetIdentity())
	*list = slices.Insert(*list, i, c.GetIdentity())
	n.UpdatedHlc = a.nowHLC
	a.putOp(n)
	a.f.log.Info("fsm: move acknowledged", "op_id", n.GetOpId(), "route_id", n.GetTargetRouteId(), "ack", ackName(ack),
		"identity", c.GetIdentity(), "watermark", c.GetWatermark(), "commit_hlc", a.nowHLC)
	return &api.CommandResult{OpId: n.GetOpId(), Op: n}
}

// abortMove returns an aborted move's route to ACTIVE in its source (one
// catalog change) and marks the op ABORTED. It refuses, changing nothing,
// a commit HLC that does not move forward.
func (a *applier) abortMove(op *api.Op, reason api.OpAbortReason, detail string) *api.CommandResult {
	if op.GetNextStep() <= moveStepBegin {
		// Planned, never begun: the catalog has nothing to undo.
		n := a.abortOp(op, reason, detail)
		a.f.m.moveStep("aborted")
		return &api.CommandResult{OpId: n.GetOpId(), Op: n}
	}
	if r := a.fence(kindAbortOp, "route_id", op.GetTargetRouteId(), "op_id", op.GetOpId()); r != nil {
		return r
	}
	next, moved, err := a.s.cat.AbortMove(op.GetTargetRouteId(), op.GetOpId())
	if err != nil {
		return fail(moveErrorCode(err), "%v", err)
	}
	commit := a.cmd.GetHlc()
	a.s.cat = next
	a.s.hist = a.s.hist.Append(catalog.MoveDelta(next.Version(), moved, commit))
	n := a.abortOp(op, reason, detail)
	a.f.m.moveStep("aborted")
	return &api.CommandResult{OpId: n.GetOpId(), Op: n, CatalogVersion: next.Version(), CommitHlc: commit, Children: []*api.RouteDescriptor{moved.ToProto()}}
}

// moveExpired reports whether op's current step has waited move_ttl_ms at
// nowMs.
func moveExpired(op *api.Op, cfg *api.Config, nowMs uint64) bool {
	return nowMs >= hlc.Physical(op.GetStepHlc())+cfg.GetMoveTtlMs()
}

// missingAcks lists the identities of the group that owes ack which have
// not given it, sorted; a placeholder when the group has none (a group
// without data nodes never completes a step).
func missingAcks(s *State, op *api.Op, ack api.MoveAck) []string {
	owed := op.GetTargetGroupId()
	if ack == api.MoveAck_MOVE_ACK_FENCED {
		owed = op.GetSourceGroupId()
	}
	g, _ := s.Group(owed)
	ids := g.GetIdentities()
	if len(ids) == 0 {
		return []string{fmt.Sprintf("(group %d has no data-node identity)", owed)}
	}
	var got []string
	switch ack {
	case api.MoveAck_MOVE_ACK_COPIED:
		got = op.GetAckedCopied()
	case api.MoveAck_MOVE_ACK_FENCED:
		got = op.GetAckedFenced()
	case api.MoveAck_MOVE_ACK_CAUGHT_UP:
		got = op.GetAckedCaughtUp()
	}
	var missing []string
	for _, id := range ids {
		if _, ok := slices.BinarySearch(got, id); !ok {
			missing = append(missing, id)
		}
	}
	return missing
}

// ackList is the op's list of identities that gave ack.
func ackList(op *api.Op, ack api.MoveAck) *[]string {
	switch ack {
	case api.MoveAck_MOVE_ACK_COPIED:
		return &op.AckedCopied
	case api.MoveAck_MOVE_ACK_FENCED:
		return &op.AckedFenced
	}
	return &op.AckedCaughtUp
}

func ackName(a api.MoveAck) string { return enumLabel(a.String(), "MOVE_ACK_") }

// moveErrorCode maps the catalog's move errors to result codes.
func moveErrorCode(err error) api.ResultCode {
	switch {
	case errors.Is(err, catalog.ErrRouteNotFound):
		return api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND
	case errors.Is(err, catalog.ErrRouteNotActive):
		return api.ResultCode_RESULT_CODE_ROUTE_NOT_ACTIVE
	case errors.Is(err, catalog.ErrMoveSameGroup):
		return api.ResultCode_RESULT_CODE_MOVE_REFUSED
	}
	return api.ResultCode_RESULT_CODE_INVALID_ARGUMENT
}
