package fsm

import (
	"fmt"
	"slices"
	"strings"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/internal/saturate"
	"github.com/hotsplit/hotsplit/placement"
)

// placeColumn sets the groups' load gauges from a complete version 4
// column and, when cross_group is on, runs automatic placement
// (docs/design.md#automatic-placement) on it: it folds the column into
// the placement state and plans a PENDING move op for each move placement
// decides, which the leader's stepper begins as a fenced catalog change.
// A group that moves nothing records a MOVE_DECLINED decision when its
// reason changes.
func (a *applier) placeColumn(col detector.Column, reporters []string) {
	s := a.s
	if !s.Has(clusterversion.RangeMoves) || !col.Complete {
		return
	}
	dur := col.AtMs - col.WindowStartMs
	loads := make(map[uint64]uint64, len(col.Rows))
	byGroup := map[uint64]uint64{}
	for _, r := range col.Rows {
		loads[r.RouteID] = detector.Score(r.Reads, r.Writes, s.detCfg, dur)
		if route, ok := s.cat.Route(r.RouteID); ok {
			byGroup[route.GroupID] = saturate.Add(byGroup[route.GroupID], loads[r.RouteID])
		}
	}
	a.f.m.groupLoads(s.groups, byGroup)
	if !s.cfg.GetCrossGroup() || len(s.groups) < 2 {
		return
	}
	in := placement.Input{
		Config: placement.Config{Windows: s.cfg.GetPlacementWindows(), CooldownMs: s.cfg.GetMoveCooldownMs(),
			MaxMovesPerCycle: s.cfg.GetMaxMovesPerCycle(), MarginBP: s.cfg.GetMoveMarginBp()},
		Catalog: s.cat, Loads: loads, BusyRoutes: map[uint64]bool{}, BusyGroups: map[uint64]bool{}, Splitting: map[uint64]bool{},
		NowMs: a.now, Enabled: s.sw.GetEnabled(),
	}
	reported := reporterIdentities(reporters)
	for _, g := range s.groups {
		in.Groups = append(in.Groups, placement.Group{ID: g.GetGroupId(), Capacity: g.GetCapacity(),
			Draining: g.GetState() == api.GroupState_GROUP_STATE_DRAINING,
			Reported: slices.ContainsFunc(g.GetIdentities(), func(id string) bool { return reported[id] })})
	}
	for _, op := range s.LiveOps() {
		for _, id := range opRoutes(op) {
			in.BusyRoutes[id] = true
		}
		if isMoveOp(op) {
			in.BusyGroups[op.GetSourceGroupId()], in.BusyGroups[op.GetTargetGroupId()] = true, true
		}
	}
	for _, t := range s.det.Tracked() {
		if r, ok := s.cat.Route(t.RouteID); ok && t.ConsecutiveOver > 0 && !catalog.IsSingleKey(r.Start, r.End) {
			in.Splitting[t.RouteID] = true
		}
	}
	prev := placementFromProto(s.placement)
	next, plans, declines := placement.Decide(in, prev)
	lastDecline := map[uint64]string{}
	for _, g := range prev.Groups {
		lastDecline[g.ID] = g.Declined
	}
	seen := map[uint64]bool{}
	for _, d := range declines {
		seen[d.GroupID] = true
		a.f.m.moveDeclined(d.Reason.String())
		if lastDecline[d.GroupID] != d.Reason.String() {
			a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_MOVE_DECLINED, RouteId: d.RouteID, Actor: "placement",
				Detail: fmt.Sprintf("group %d moved nothing: %s", d.GroupID, d.Reason)})
		}
		setDeclined(&next, d.GroupID, d.Reason.String())
	}
	for i := range next.Groups {
		if !seen[next.Groups[i].ID] {
			next.Groups[i].Declined = ""
		}
	}
	for _, p := range plans {
		a.planMove(p)
	}
	s.placement = placementToProto(next)
}

// reporterIdentities are the identities behind a column's reporters (a
// reporter id is an identity, or an identity, '/' and a suffix): a group
// reported when one of its data nodes is among them.
func reporterIdentities(reporters []string) map[string]bool {
	out := make(map[string]bool, len(reporters))
	for _, r := range reporters {
		id, _, _ := strings.Cut(r, "/")
		out[id] = true
	}
	return out
}

// planMove makes a PENDING move op for a placement plan: its first step,
// the begin, comes from the leader's stepper.
func (a *applier) planMove(p placement.Plan) {
	route, _ := a.s.cat.Route(p.RouteID)
	id := a.s.nextOpID
	a.s.nextOpID++
	op := &api.Op{OpId: id, Kind: api.OpKind_OP_KIND_MOVE, State: api.OpState_OP_STATE_PENDING, NextStep: moveStepBegin,
		TargetRouteId: route.ID, TargetStart: route.Start, TargetEnd: route.End, SourceGroupId: p.From, TargetGroupId: p.To,
		CreatedHlc: a.nowHLC, UpdatedHlc: a.nowHLC, StepHlc: a.nowHLC, Actor: "placement", Score: p.Load}
	a.putOp(op)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_MOVE_PLANNED, RouteId: route.ID, OpId: id, Actor: "placement", Score: p.Load,
		Detail: fmt.Sprintf("move r%d (load %d) from group %d (load %d) to group %d (peak %d)", route.ID, p.Load, p.From, p.FromLoad, p.To, p.ToPeak)})
	a.f.m.moveStep("planned")
	a.f.log.Info("fsm: move planned", "op_id", id, "route_id", route.ID, "source_group", p.From, "target_group", p.To, "load", p.Load)
}

func setDeclined(st *placement.State, group uint64, reason string) {
	for i := range st.Groups {
		if st.Groups[i].ID == group {
			st.Groups[i].Declined = reason
		}
	}
}

func placementFromProto(p *api.PlacementState) placement.State {
	var st placement.State
	for _, g := range p.GetGroups() {
		st.Groups = append(st.Groups, placement.GroupState{ID: g.GetGroupId(), Over: g.GetOverColumns(), Reported: g.GetReportedColumns(),
			Loads: g.GetLoads(), Declined: g.GetDeclined()})
	}
	for _, m := range p.GetMoved() {
		st.Moved = append(st.Moved, placement.Moved{RouteID: m.GetRouteId(), AtMs: m.GetAtMs()})
	}
	return st
}

func placementToProto(st placement.State) *api.PlacementState {
	p := &api.PlacementState{}
	for _, g := range st.Groups {
		p.Groups = append(p.Groups, &api.PlacementState_Group{GroupId: g.ID, OverColumns: g.Over, ReportedColumns: g.Reported, Loads: g.Loads, Declined: g.Declined})
	}
	for _, m := range st.Moved {
		p.Moved = append(p.Moved, &api.PlacementState_Moved{RouteId: m.RouteID, AtMs: m.AtMs})
	}
	return p
}

// checkPlacement: no placement state below RangeMoves; groups and moved
// routes by increasing id, reasons from placement's set.
func checkPlacement(p *api.StateSnapshot) error {
	ps := p.GetPlacement()
	if ps == nil {
		return nil
	}
	if !clusterversion.RangeMoves.EnabledAt(p.GetClusterVersion()) {
		return fmt.Errorf("placement state at cluster version %d", p.GetClusterVersion())
	}
	for i, g := range ps.GetGroups() {
		if i > 0 && g.GetGroupId() <= ps.GetGroups()[i-1].GetGroupId() {
			return fmt.Errorf("placement groups[%d]: id %d unsorted or repeated", i, g.GetGroupId())
		}
		if len(g.GetLoads()) > 100 {
			return fmt.Errorf("placement groups[%d]: %d loads", i, len(g.GetLoads()))
		}
		if d := g.GetDeclined(); d != "" && !knownDecline(d) {
			return fmt.Errorf("placement groups[%d]: declined %q", i, d)
		}
	}
	for i, m := range ps.GetMoved() {
		if i > 0 && m.GetRouteId() <= ps.GetMoved()[i-1].GetRouteId() {
			return fmt.Errorf("placement moved[%d]: route %d unsorted or repeated", i, m.GetRouteId())
		}
	}
	return nil
}

func knownDecline(s string) bool {
	for _, r := range placement.Reasons() {
		if r.String() == s {
			return true
		}
	}
	return false
}
