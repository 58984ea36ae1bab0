package fsm

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/hlc"
)

// NextOpStep chooses what the op stepper proposes next
// (docs/design.md#ops-the-scheduler-and-the-switch): the next step of the
// oldest live op that is pending or running, while the switch is on — a
// SplitRange of a split op, the one MergeRange of a merge op (AutoMerge; the
// command carries its min_version). It returns nil, nil when nothing is to be
// proposed: the switch is off (a paused op waits for it), no op is runnable, or
// the oldest runnable op has no step left to take (step 0, or past its last
// step: the FSM finishes such an op itself). A paused op is skipped, not waited
// for, and so is a move: its steps wait for the data plane (NextMoveStep).
//
// It is pure and reads only its arguments: live is State.LiveOps (oldest
// first), switchOn the replicated switch and actor the step's actor. The
// leader's scheduler and simlab both step ops with it; the caller stamps
// the command. The returned step's slices are the op's: do not modify.
func NextOpStep(switchOn bool, live []*api.Op, actor string) (*api.Op, *api.Command) {
	if !switchOn {
		return nil, nil
	}
	for _, op := range live {
		if s := op.GetState(); isMoveOp(op) || s != api.OpState_OP_STATE_PENDING && s != api.OpState_OP_STATE_RUNNING {
			continue
		}
		step := op.GetNextStep()
		if isMergeOp(op) {
			if step != 1 {
				return nil, nil
			}
			return op, &api.Command{MinVersion: clusterversion.AutoMerge.Version(), Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{
				LeftRouteId: op.GetTargetRouteId(), RightRouteId: op.GetRightRouteId(), OpId: op.GetOpId(), Step: step, Actor: actor}}}
		}
		keys := op.GetSplitKeys()
		if step == 0 || int(step) > len(keys) {
			return nil, nil
		}
		return op, &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{
			RouteId: op.GetTargetRouteId(), SplitKey: keys[step-1], OpId: op.GetOpId(), Step: step, Actor: actor}}}
	}
	return nil, nil
}

// NextMoveStep chooses what the leader proposes next for the live moves
// (docs/design.md#moves), oldest first: the abort of a move whose step has
// waited move_ttl_ms (AbortOp with move_ttl), else the begin of a planned
// move (while the switch is on), else the fence of
// a move every target node acknowledged the copy of (while the switch is
// on: it holds moves before their fence), else the commit of a move whose
// source nodes all acknowledged the fence and whose target nodes all
// caught up. A move that waits is skipped, not waited for. When nothing
// is due it returns the milliseconds until the earliest TTL (0: none).
//
// It is pure and reads only s and nowMs (the leader's clock, ms); Apply
// checks every condition again, so a stale choice is refused, never
// applied.
func NextMoveStep(s *State, nowMs uint64, actor string) (*api.Op, *api.Command, uint64) {
	if !s.Has(clusterversion.RangeMoves) {
		return nil, nil, 0
	}
	var wait uint64
	for _, op := range s.LiveOps() {
		if st := op.GetState(); !isMoveOp(op) || st != api.OpState_OP_STATE_RUNNING && st != api.OpState_OP_STATE_PENDING {
			continue
		}
		if moveExpired(op, s.cfg, nowMs) {
			return op, &api.Command{MinVersion: clusterversion.RangeMoves.Version(), Body: &api.Command_AbortOp{AbortOp: &api.AbortOp{
				OpId: op.GetOpId(), Actor: actor, Reason: "move_ttl", MoveTtl: true}}}, 0
		}
		due := hlc.Physical(op.GetStepHlc()) + s.cfg.GetMoveTtlMs() - nowMs
		if wait == 0 || due < wait {
			wait = due
		}
		ready := false
		switch op.GetNextStep() {
		case moveStepBegin:
			ready = s.sw.GetEnabled()
		case moveStepFence:
			ready = s.sw.GetEnabled() && len(missingAcks(s, op, api.MoveAck_MOVE_ACK_COPIED)) == 0
		case moveStepCommit:
			ready = len(missingAcks(s, op, api.MoveAck_MOVE_ACK_FENCED)) == 0 && len(missingAcks(s, op, api.MoveAck_MOVE_ACK_CAUGHT_UP)) == 0
		}
		if ready {
			return op, &api.Command{MinVersion: clusterversion.RangeMoves.Version(), Body: &api.Command_MoveRange{MoveRange: &api.MoveRange{
				RouteId: op.GetTargetRouteId(), TargetGroupId: op.GetTargetGroupId(), OpId: op.GetOpId(), Step: op.GetNextStep(), Actor: actor}}}, 0
		}
	}
	return nil, nil, wait
}

// answerOutOfOrderStep answers a step of op that is not the live op's next one,
// the same for split and merge ops
// (docs/design.md#ops-the-scheduler-and-the-switch): step 0; a duplicate (a
// step below next_step answers its first result, even for a finished op); a
// step from the future; a finished op. nil: step is the next step of a live op.
func answerOutOfOrderStep(op *api.Op, step uint32) *api.CommandResult {
	switch {
	case step == 0:
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: must be >= 1 for op %d", op.GetOpId())
	case step < op.GetNextStep():
		if int(step) <= len(op.GetStepResults()) {
			return op.GetStepResults()[step-1]
		}
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step %d of op %d has no recorded result", step, op.GetOpId())
	case step > op.GetNextStep():
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "step: %d ahead of op %d's next step %d", step, op.GetOpId(), op.GetNextStep())
	}
	switch op.GetState() {
	case api.OpState_OP_STATE_DONE:
		return fail(api.ResultCode_RESULT_CODE_OP_FINISHED, "op %d is done", op.GetOpId())
	case api.OpState_OP_STATE_ABORTED:
		return fail(api.ResultCode_RESULT_CODE_OP_ABORTED, "op %d was aborted (%s): %s", op.GetOpId(), op.GetAbortReason(), op.GetDetail())
	}
	return nil
}
