package fsm

import (
	"bytes"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/heatmap"
)

// The key visualizer's heat history (HeatHistory, cluster version 3): the
// applies feed it committed columns and catalog changes; heatmap decides
// everything else. Below version 3 nothing is kept, so a version 2 state
// hashes as the version 2 release did.

// heatColumn adds a committed column to the heat history, with the
// catalog and weights in force as it applies. A column without
// route_loads (committed at version 2, or assembled just before the
// cluster rose to 3) adds nothing: its rows list only the hottest routes,
// so bands drawn from them would call every other route cold. The page
// shows the gap.
func (a *applier) heatColumn(c *api.ObserveColumn) {
	s := a.s
	if !s.Has(clusterversion.HeatHistory) || c.GetRouteLoads() == nil {
		return
	}
	rl := c.GetRouteLoads()
	loads := make([]heatmap.RouteLoad, rl.Len())
	for i, l := range rl.All() {
		loads[i] = heatmap.RouteLoad{RouteID: l.RouteID, Reads: l.Reads, Writes: l.Writes, ReadBytes: l.ReadBytes, WriteBytes: l.WriteBytes}
	}
	h, err := a.heat().AddColumn(heatmap.ColumnInput{
		WindowStartMs: c.GetWindowStartMs(),
		AtMs:          c.GetAtMs(),
		Weights:       heatmap.Weights{Read: s.cfg.GetReadWeight(), Write: s.cfg.GetWriteWeight()},
		Catalog:       s.cat,
		Loads:         loads,
	})
	if err != nil {
		// checkColumn and the window check admit only what AddColumn
		// takes; every replica skips alike, so the states stay equal.
		a.f.log.Error("fsm: heat history column skipped", "window_start_ms", c.GetWindowStartMs(), "at_ms", c.GetAtMs(), "err", err)
		return
	}
	s.heat = h
}

// markSplit records a split on the heat history: a manual split, or the
// keys an op applied (one mark for a two-step isolation, with both keys).
// routeID is the route split first.
func (a *applier) markSplit(routeID, opID uint64, origin api.SplitOrigin, keys [][]byte) {
	a.mark(heatmap.Mark{Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT, SplitOrigin: origin, Keys: keys, RouteID: routeID, OpID: opID})
}

// markMerge records a merge on the heat history: leftRouteID is the left
// route of the merge, boundary the start of the right one (the boundary
// the merge removed). The merge applies call it once the merged catalog is
// in place.
func (a *applier) markMerge(leftRouteID uint64, boundary []byte, origin api.HeatmapMergeOrigin) {
	a.mark(heatmap.Mark{Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_MERGE, MergeOrigin: origin, Keys: [][]byte{boundary}, RouteID: leftRouteID})
}

// mark adds m at this entry's HLC. nowHLC never moves backwards, so marks
// arrive in the order heatmap requires (it refuses back-dated ones).
func (a *applier) mark(m heatmap.Mark) {
	if !a.s.Has(clusterversion.HeatHistory) {
		return
	}
	m.AtHLC = a.nowHLC
	m.Keys = slices.SortedFunc(slices.Values(m.Keys), bytes.Compare)
	h, err := a.heat().AddMark(m)
	if err != nil {
		a.f.log.Error("fsm: heat history mark skipped", "route_id", m.RouteID, "op_id", m.OpID, "err", err)
		return
	}
	a.s.heat = h
}

// markOpSplits marks the keys op has applied so far: at the end of the op,
// or when it is aborted after a step.
func (a *applier) markOpSplits(op *api.Op) {
	applied := int(op.GetNextStep()) - 1
	if applied < 1 || op.GetKind() != api.OpKind_OP_KIND_SPLIT {
		return
	}
	a.markSplit(op.GetParentRouteId(), op.GetOpId(), op.GetOrigin(), op.GetSplitKeys()[:applied])
}

// heat is the history to extend: the empty one before the first column
// or mark.
func (a *applier) heat() *heatmap.History {
	if a.s.heat == nil {
		return heatmap.New()
	}
	return a.s.heat
}
