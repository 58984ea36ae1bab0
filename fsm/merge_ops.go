package fsm

import (
	"bytes"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/hlc"
)

// Automatic merge ops (AutoMerge, docs/design.md#merges). The detector plans a merge of
// two adjacent cold routes; the plan becomes a PENDING op of kind MERGE
// with one step, a MergeRange of the planned pair. The op records both
// routes' shape (target_* the left one, right_route_id and [target_end,
// right_end) the right one), so its step is validated structurally, never
// by catalog version. It lives like a split op: PAUSED by the switch,
// ABORTED(stale) when resumed after op_ttl_ms, ABORTED when either route
// is gone or not ACTIVE at its step.

// isMergeOp reports whether op merges (every op before version 3 splits).
func isMergeOp(op *api.Op) bool { return op.GetKind() == api.OpKind_OP_KIND_MERGE }

// opRoutes are the routes a live op will still change: a split op's next
// target, a merge op's two routes. Neither is split nor merged again
// while the op lives.
func opRoutes(op *api.Op) []uint64 {
	if isMergeOp(op) {
		return []uint64{op.GetTargetRouteId(), op.GetRightRouteId()}
	}
	return []uint64{op.GetTargetRouteId()}
}

// routeCreatedAtMs is when r was created: the physical time of the split
// or merge that made it (0 for a bootstrap route). The detector's merge
// delay and cold count start there.
func routeCreatedAtMs(r *catalog.RouteDescriptor) uint64 {
	at := r.SplitAtHLC
	if m := r.MergedFrom(); m != nil {
		at = max(at, m.AtHLC)
	}
	return hlc.Physical(at)
}

// planMerge turns a merge plan into a PENDING op with the next op id and
// records the MERGE_PLANNED decision. It returns nil for a plan that does
// not hold (a detector bug: every replica skips it alike).
func (a *applier) planMerge(p detector.Plan, id uint64) *api.Op {
	op, err := a.mergeOpFromPlan(p, id)
	if err != nil {
		a.f.log.Error("fsm: detector merge plan skipped", "route_id", p.RouteID, "right_route_id", p.RightRouteID, "op_id", p.OpID, "err", err)
		return nil
	}
	a.putOp(op)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_MERGE_PLANNED, RouteId: p.RouteID, OpId: id,
		Reason: api.Reason_REASON_MERGE_PLANNED, Score: p.Score, Explanation: explanationToProto(p.Explanation),
		Detail: fmt.Sprintf("merge r%d and r%d", p.RouteID, p.RightRouteID)})
	a.f.m.mergeDecision(api.Reason_REASON_MERGE_PLANNED)
	a.f.m.mergeOp(mergeOpPlanned)
	a.f.log.Info("fsm: merge op planned", "op_id", id, "route_id", p.RouteID, "right_route_id", p.RightRouteID,
		"merged_estimate", p.Score, "cold_columns", p.Explanation.ColdColumns)
	return op
}

// mergeOpFromPlan is the op of a merge plan: both routes live and
// adjacent now.
func (a *applier) mergeOpFromPlan(p detector.Plan, id uint64) (*api.Op, error) {
	if p.OpID != id {
		return nil, fmt.Errorf("plan op id %d, expected %d", p.OpID, id)
	}
	left, okL := a.s.cat.Route(p.RouteID)
	right, okR := a.s.cat.Route(p.RightRouteID)
	switch {
	case !okL || !okR:
		return nil, fmt.Errorf("routes %d and %d: live %v and %v", p.RouteID, p.RightRouteID, okL, okR)
	case left.Unbounded() || !bytes.Equal(left.End, right.Start):
		return nil, fmt.Errorf("routes %v and %v are not adjacent", left, right)
	}
	return &api.Op{
		OpId:          id,
		Kind:          api.OpKind_OP_KIND_MERGE,
		ParentRouteId: left.ID,
		NextStep:      1,
		State:         api.OpState_OP_STATE_PENDING,
		CreatedHlc:    a.nowHLC,
		UpdatedHlc:    a.nowHLC,
		TargetRouteId: left.ID,
		TargetStart:   left.Start,
		TargetEnd:     left.End,
		RightRouteId:  right.ID,
		RightEnd:      right.End,
		RouteDelta:    -1,
		Score:         p.Score,
		Actor:         "detector",
	}, nil
}

// recordMergeDeclines counts this column's merge declines and writes a
// decision for each pair whose explanation is new (Repeats == 0), on its
// left route, so a pair declined for the same reason column after column
// does not flood the ring. The detector explains a bounded number of
// pairs per column; tracked entries are visited in route-id order.
func (a *applier) recordMergeDeclines(col detector.Column, det *detector.State) {
	if !a.s.Has(clusterversion.AutoMerge) {
		return
	}
	for _, t := range det.Tracked() {
		x := t.Merge
		if x.AtMs != col.AtMs || x.Reason == detector.ReasonUnspecified || x.Reason == detector.ReasonMergePlanned {
			continue
		}
		route, ok := a.s.cat.Route(t.RouteID)
		partner, okP := a.s.cat.Route(x.MergePartner)
		if !ok || !okP || bytes.Compare(route.Start, partner.Start) > 0 {
			continue // the right route of the pair: counted with the left one
		}
		reason := api.Reason(x.Reason)
		a.f.m.mergeDecision(reason)
		if x.Repeats != 0 {
			continue
		}
		kind := api.DecisionKind_DECISION_KIND_MERGE_DECLINED
		if x.Reason == detector.ReasonMergeSuppressed {
			kind = api.DecisionKind_DECISION_KIND_MERGE_SUPPRESSED
		}
		a.decide(&api.Decision{Kind: kind, RouteId: t.RouteID, Reason: reason, Score: x.MergedEstimate,
			Explanation: explanationToProto(x), Detail: fmt.Sprintf("merge r%d and r%d", t.RouteID, x.MergePartner)})
		a.f.log.Info("fsm: routes not merged", "route_id", t.RouteID, "right_route_id", x.MergePartner, "reason", reasonLabel(reason),
			"merged_estimate", x.MergedEstimate, "cold_columns", x.ColdColumns, "merge_delay_left_ms", x.MergeDelayLeftMs)
	}
}

// mergeOpAborted makes the abort of a merge op stick: the pair's routes
// that are still live start their cold streak again, so the next column
// does not plan the same merge at once.
func (a *applier) mergeOpAborted(op *api.Op) {
	var live []uint64
	for _, id := range opRoutes(op) {
		if _, ok := a.s.cat.Route(id); ok {
			live = append(live, id)
		}
	}
	a.s.det = a.s.det.Warm(live...)
}

// checkMergeOp verifies what the step path relies on for a merge op: no
// split keys, one step, a right route, and no merge op below AutoMerge.
func checkMergeOp(op *api.Op, version uint32) error {
	id := op.GetOpId()
	switch {
	case !clusterversion.AutoMerge.EnabledAt(version):
		return fmt.Errorf("op %d: a merge op, which needs cluster version %d, at cluster version %d", id, clusterversion.AutoMerge.Version(), version)
	case len(op.GetSplitKeys()) != 0:
		return fmt.Errorf("op %d: a merge op with %d split keys", id, len(op.GetSplitKeys()))
	case op.GetRightRouteId() == 0 || op.GetRightRouteId() == op.GetTargetRouteId():
		return fmt.Errorf("op %d: right route %d", id, op.GetRightRouteId())
	case op.GetRouteDelta() != -1:
		return fmt.Errorf("op %d: a merge op with route delta %d", id, op.GetRouteDelta())
	}
	return nil
}
