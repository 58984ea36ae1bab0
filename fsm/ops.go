package fsm

import (
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// Op bookkeeping shared by SplitRange steps, ObserveColumn, SetAutoSplit and
// AbortOp. Ops are immutable once published: a change clones the op and
// replaces it in a new slice.

// cloneOp returns a deep copy of op that the applier may modify.
func cloneOp(op *api.Op) *api.Op { return proto.Clone(op).(*api.Op) }

// putOp replaces (or appends, ids only grow) op in a new ops slice.
func (a *applier) putOp(op *api.Op) {
	i, found := findOp(a.s.ops, op.GetOpId())
	ops := make([]*api.Op, 0, len(a.s.ops)+1)
	ops = append(ops, a.s.ops[:i]...)
	ops = append(ops, op)
	if found {
		i++
	}
	ops = append(ops, a.s.ops[i:]...)
	a.s.ops = ops
}

// retireFinished drops the lowest-id finished ops beyond the kept bound.
func (a *applier) retireFinished() {
	finished := 0
	for _, op := range a.s.ops {
		if !isLive(op) {
			finished++
		}
	}
	drop := finished - a.f.finishedOps
	if drop <= 0 {
		return
	}
	ops := make([]*api.Op, 0, len(a.s.ops)-drop)
	for _, op := range a.s.ops {
		if drop > 0 && !isLive(op) {
			drop--
			continue
		}
		ops = append(ops, op)
	}
	a.s.ops = ops
}

// abortOp marks a live op ABORTED. When at least one step applied, the middle
// child — the route the next step would have split — gets a cooldown from now
// (docs/design.md#ops-the-scheduler-and-the-switch), if it is still a live
// route. With StickyAbort an operator's or a stale abort before the first step
// puts the planned route itself in cooldown, so the abort sticks: the next hot
// column does not plan the same split again at once. An aborted merge op sticks
// by restarting its routes' cold streaks (mergeOpAborted).
func (a *applier) abortOp(op *api.Op, reason api.OpAbortReason, detail string) *api.Op {
	n := cloneOp(op)
	n.State = api.OpState_OP_STATE_ABORTED
	n.AbortReason = reason
	n.Detail = detail
	n.UpdatedHlc = a.nowHLC
	sticks := a.s.Has(clusterversion.StickyAbort) &&
		(reason == api.OpAbortReason_OP_ABORT_REASON_OPERATOR || reason == api.OpAbortReason_OP_ABORT_REASON_STALE)
	switch {
	case isMoveOp(n):
		// The route is back in its source (abortMove); nothing sticks.
	case isMergeOp(n):
		a.mergeOpAborted(n)
	case n.GetNextStep() > 1 || sticks:
		if _, live := a.s.cat.Route(n.GetTargetRouteId()); live {
			a.s.det = a.s.det.StartCooldown(a.s.detCfg, n.GetTargetRouteId(), a.now)
		}
	}
	a.putOp(n)
	a.retireFinished()
	a.markOpSplits(n) // the steps that did apply
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_OP_ABORTED, RouteId: n.GetTargetRouteId(), OpId: n.GetOpId(),
		Origin: n.GetOrigin(), AbortReason: reason, Detail: detail, Actor: n.GetActor(), Note: n.GetNote(), SplitKeys: n.GetSplitKeys()})
	if isMergeOp(n) {
		a.f.m.mergeOp(mergeOpAborted)
	} else {
		a.f.m.opAborted(reason)
	}
	a.f.log.Warn("fsm: op aborted", "op_id", n.GetOpId(), "route_id", n.GetTargetRouteId(), "reason", abortLabel(reason),
		"detail", detail, "next_step", n.GetNextStep(), "commit_hlc", a.nowHLC)
	return n
}

// pauseOp marks a PENDING or RUNNING op PAUSED from now.
func (a *applier) pauseOp(op *api.Op) *api.Op {
	n := cloneOp(op)
	n.State = api.OpState_OP_STATE_PAUSED
	if n.GetPausedAtHlc() == 0 {
		n.PausedAtHlc = a.nowHLC
	}
	n.UpdatedHlc = a.nowHLC
	a.putOp(n)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_OP_PAUSED, RouteId: n.GetTargetRouteId(), OpId: n.GetOpId(), Origin: n.GetOrigin()})
	if isMergeOp(n) {
		a.f.m.mergeOp(mergeOpPaused)
	} else {
		a.f.m.opPaused()
	}
	a.f.log.Info("fsm: op paused", "op_id", n.GetOpId(), "route_id", n.GetTargetRouteId(), "next_step", n.GetNextStep())
	return n
}

// liveFootprints describes the live ops for the detector: the routes each
// will still change (opRoutes) and how many routes it will still add. A
// merge op adds none: its -1 counts against the route cap only once it is
// applied.
func liveFootprints(ops []*api.Op) []detector.LiveOp {
	var out []detector.LiveOp
	for _, op := range ops {
		if !isLive(op) {
			continue
		}
		delta := remainingSteps(op)
		if isMergeOp(op) {
			delta = 0
		}
		out = append(out, detector.LiveOp{
			OpID:           op.GetOpId(),
			RouteIDs:       opRoutes(op),
			RemainingDelta: delta,
		})
	}
	return out
}

func remainingSteps(op *api.Op) int {
	return max(0, len(op.GetSplitKeys())-int(op.GetNextStep())+1)
}

// decide appends a decision to the bounded ring, stamping its sequence
// number and time.
func (a *applier) decide(d *api.Decision) {
	d.Seq = a.s.nextDecisionSeq
	d.AtHlc = a.nowHLC
	a.s.nextDecisionSeq++
	drop := max(0, len(a.s.decisions)+1-a.f.decisionRingSize)
	ring := make([]*api.Decision, 0, len(a.s.decisions)+1-drop)
	ring = append(ring, a.s.decisions[drop:]...)
	a.s.decisions = append(ring, d)
}
