package scheduler

import (
	"context"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
)

// stepOps is the op-stepping duty of
// docs/design.md#ops-the-scheduler-and-the-switch: while the switch is on, take
// the oldest live op and propose its next step (a SplitRange, or a merge op's
// MergeRange) through the single proposer, one step in flight at a time. The
// FSM decides what a step does (apply, pause, abort, or answer a duplicate with
// the first result), so a step re-proposed after an ambiguous failure is
// harmless, and a new leader needs nothing but the replicated ops to continue
// at the exact next step.
func (s *Scheduler) stepOps(ctx context.Context) {
	backoff := s.cfg.OpRetryMin
	for {
		changed := s.fsm.Changed()
		stepped, wait, err := s.stepOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.log.Warn("op step failed; retrying", "reason", err.Error(), "backoff", backoff.String())
			if !sleepCtx(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, s.cfg.OpRetryMax)
			continue
		case stepped:
			backoff = s.cfg.OpRetryMin
			continue // the next step of the same or another op may be due
		}
		backoff = s.cfg.OpRetryMin
		if wait <= 0 {
			wait = time.Hour // nothing due: only a state change wakes us
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// stepOnce proposes the step fsm.NextOpStep chooses, else the one
// fsm.NextMoveStep chooses (a move's fence, commit or TTL abort). It
// reports whether it proposed anything and, when the oldest op is held by
// OpStepDelay or a move waits for its TTL, how long until it is due (a
// state change, such as an acknowledgement, wakes the loop sooner).
func (s *Scheduler) stepOnce(ctx context.Context) (bool, time.Duration, error) {
	st := s.fsm.State()
	op, cmd := fsm.NextOpStep(st.Bootstrapped() && st.Switch().GetEnabled(), st.LiveOps(), "scheduler")
	if op == nil && st.Bootstrapped() {
		var waitMs uint64
		op, cmd, waitMs = fsm.NextMoveStep(st, hlc.Physical(s.clock.Now()), "scheduler")
		if op == nil {
			return false, time.Duration(waitMs) * time.Millisecond, nil
		}
	}
	if op == nil {
		return false, 0, nil
	}
	if op.GetState() == api.OpState_OP_STATE_PENDING && s.cfg.OpStepDelay > 0 {
		due := hlc.Physical(op.GetCreatedHlc()) + uint64(s.cfg.OpStepDelay.Milliseconds())
		if now := hlc.Physical(s.clock.Now()); now < due {
			return false, time.Duration(due-now) * time.Millisecond, nil
		}
	}
	pctx, cancel := context.WithTimeout(ctx, s.cfg.RaftTimeout)
	defer cancel()
	res, err := s.proposer.Propose(pctx, cmd)
	if err != nil {
		return false, 0, err
	}
	log := s.log.With("op_id", op.GetOpId(), "step", op.GetNextStep(), "route_id", op.GetTargetRouteId(), "commit_hlc", cmd.GetHlc())
	switch {
	case res.GetCode() == api.ResultCode_RESULT_CODE_OK && op.GetKind() == api.OpKind_OP_KIND_MOVE:
		log.Info("op step applied", "catalog_version", res.GetCatalogVersion(), "kind", "move", "op_state", fsm.EnumName(res.GetOp().GetState()))
	case res.GetCode() == api.ResultCode_RESULT_CODE_OK && op.GetKind() == api.OpKind_OP_KIND_MERGE:
		log.Info("op step applied", "catalog_version", res.GetCatalogVersion(), "kind", "merge", "right_route_id", op.GetRightRouteId())
	case res.GetCode() == api.ResultCode_RESULT_CODE_OK:
		log.Info("op step applied", "catalog_version", res.GetCatalogVersion(), "split_origin", fsm.EnumName(op.GetOrigin()))
	default:
		// Paused, aborted, finished: the op's state says so; nothing to retry.
		log.Info("op step not applied", "reason", fsm.EnumName(res.GetCode()), "detail", res.GetMessage())
	}
	return true, 0, nil
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
