package detector

import (
	"bytes"
	"cmp"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Automatic merges (RuleMerge; docs/design.md#merges, docs/design.md "Merges").
//
// A pair of routes is merged when, in this column:
//
//  1. they are adjacent, of one group, both ACTIVE, neither in a live op
//     nor planned for a split in this column, and the boundary between
//     them was not placed by an operator (the right route's
//     OperatorStart; catalog/placement.go): a layout an operator chose is
//     only undone by an operator's merge. Such a pair is no candidate at
//     all — never explained, so a pinned layout writes no decisions;
//  2. each has been cold (cold.go) for MergeWindows consecutive complete
//     columns, counting only columns that started after it was created;
//  3. each was created (split_at_hlc, merged_at_hlc) at least MergeDelayMs
//     ago, else merge_delay;
//  4. the switch is on, else merge_suppressed;
//  5. the merged estimate — both routes' recent peak scores added — is at
//     most the merge limit, threshold·(10000 − MergeMarginBP)/10000, else
//     merge_margin: the merged route starts well below the threshold and
//     is not split again at once;
//  6. fewer than MaxMergesPerCycle merges are planned in this column, else
//     merge_budget.
//
// Pairs satisfying 1 and 2 are taken coldest first (lowest merged estimate,
// ties by the left route's id); a route planned in one pair is not
// considered for another. Merges never count against the route cap: they
// only lower it, and a planned merge's -1 counts only once it is applied
// (the op's RemainingDelta is 0).
//
// Bounds. The scan walks at most MergeScanRoutes routes per column in key
// order from a replicated cursor, so a column's work never grows with the
// catalog: a catalog of up to that many routes is scanned whole every
// column, a larger one in turns. At most mergeDeclinesExplained declined
// pairs are explained per column (planned ones always are), so the tracked
// entries merge explanations add stay bounded too.

// MergeScanRoutes bounds the routes one column's pair scan examines.
const MergeScanRoutes = 4096

// mergeDeclinesExplained bounds the declined pairs one column explains.
const mergeDeclinesExplained = 8

// mergeCandidate is a pair satisfying rules 1 and 2.
type mergeCandidate struct {
	left, right *catalog.RouteDescriptor
	estimate    uint64
	cold        uint64
	delayLeftMs uint64
}

// mergeNote is a merge explanation for one route of a pair.
type mergeNote struct {
	routeID uint64
	x       Explanation
}

// decideMerges chooses this column's merges from the cold state the column
// produced (o.coldOut) and explains them and the first declines. splits
// are the split plans of the same column; merge ops take the ids after
// theirs.
func (o *observation) decideMerges(splits []Plan) []Plan {
	c := o.coldOut
	w := uint64(o.cfg.MergeWindows)
	if c == nil || o.in.Catalog == nil || uint64(len(c.starts)) < w {
		return nil // no route can have been cold long enough yet
	}
	busy := slices.Clone(o.liveOpIDs)
	for _, p := range splits {
		busy = append(busy, p.RouteID)
	}
	slices.Sort(busy)
	cands := o.scanPairs(c, busy)
	slices.SortFunc(cands, func(a, b mergeCandidate) int {
		if x := cmp.Compare(a.estimate, b.estimate); x != 0 {
			return x
		}
		return cmp.Compare(a.left.ID, b.left.ID)
	})

	limit := mergeLimit(o.cfg)
	var (
		plans    []Plan
		used     []uint64
		notes    []mergeNote
		declines int
	)
	for _, cd := range cands {
		full := uint64(len(plans)) >= uint64(o.cfg.MaxMergesPerCycle)
		if full && declines >= mergeDeclinesExplained {
			break
		}
		if slices.Contains(used, cd.left.ID) || slices.Contains(used, cd.right.ID) {
			continue
		}
		var reason Reason
		switch {
		case cd.delayLeftMs > 0:
			reason = ReasonMergeDelay
		case !o.in.Enabled:
			reason = ReasonMergeSuppressed
		case cd.estimate > limit:
			reason = ReasonMergeMargin
		case full:
			reason = ReasonMergeBudget
		default:
			reason = ReasonMergePlanned
		}
		if reason != ReasonMergePlanned {
			if declines >= mergeDeclinesExplained {
				continue
			}
			declines++
		}
		x := Explanation{
			Reason:           reason,
			AtMs:             o.col.AtMs,
			MergedEstimate:   cd.estimate,
			MergeLimit:       limit,
			MergeThreshold:   mergeThreshold(o.cfg),
			ColdColumns:      uint32(cd.cold),
			MergeWindows:     o.cfg.MergeWindows,
			MergeDelayLeftMs: cd.delayLeftMs,
		}
		if reason == ReasonMergePlanned {
			x.OpID = o.in.NextOpID + uint64(len(splits)+len(plans))
			used = append(used, cd.left.ID, cd.right.ID)
		}
		left, right := x, x
		left.MergePartner, left.Score = cd.right.ID, o.scoreOf(cd.left.ID)
		right.MergePartner, right.Score = cd.left.ID, o.scoreOf(cd.right.ID)
		notes = append(notes, mergeNote{cd.left.ID, left}, mergeNote{cd.right.ID, right})
		if reason == ReasonMergePlanned {
			plans = append(plans, Plan{Kind: PlanMerge, OpID: x.OpID, RouteID: cd.left.ID, RightRouteID: cd.right.ID,
				RouteDelta: -1, Score: cd.estimate})
		}
	}
	o.applyMergeNotes(notes)
	for i := range plans {
		if t, ok := o.tracked(plans[i].RouteID); ok {
			plans[i].Explanation = t.Merge
		}
	}
	return plans
}

// scanPairs walks at most MergeScanRoutes routes in key order from the
// cursor (wrapping at the end of the key space) and returns the pairs of
// neighbours satisfying rules 1 and 2. It sets c.cursor to the start of
// the last route examined when the scan stopped before covering the
// catalog, so the next column's scan continues there (that route's pair
// with its right neighbour is examined then); c is the column's fresh
// cold state, not yet published.
func (o *observation) scanPairs(c *coldState, busy []uint64) []mergeCandidate {
	cat := o.in.Catalog
	limit := min(cat.Len(), MergeScanRoutes)
	var from []byte
	if cat.Len() > MergeScanRoutes && len(c.cursor) > 0 {
		from = cat.Lookup(c.cursor).Start
	}
	c.cursor = nil
	var (
		cands []mergeCandidate
		prev  *catalog.RouteDescriptor
		seen  int
	)
	step := func(r *catalog.RouteDescriptor) bool {
		if prev != nil {
			if cd, ok := o.mergeCandidate(c, prev, r, busy); ok {
				cands = append(cands, cd)
			}
		}
		prev = r
		seen++
		if seen == limit {
			if cat.Len() > limit {
				c.cursor = bytes.Clone(r.Start)
			}
			return false
		}
		return true
	}
	cat.AscendFrom(from, step)
	if seen < limit {
		prev = nil // the last route and the first are not neighbours
		cat.Ascend(step)
	}
	return cands
}

// mergeCandidate checks rules 1 and 2 for the neighbours a and b and
// measures the pair.
func (o *observation) mergeCandidate(c *coldState, a, b *catalog.RouteDescriptor, busy []uint64) (mergeCandidate, bool) {
	if b.OperatorStart || a.GroupID != b.GroupID || a.State != catalog.StateActive || b.State != catalog.StateActive {
		return mergeCandidate{}, false
	}
	if _, ok := slices.BinarySearch(busy, a.ID); ok {
		return mergeCandidate{}, false
	}
	if _, ok := slices.BinarySearch(busy, b.ID); ok {
		return mergeCandidate{}, false
	}
	ea, eb := c.entry(a.ID), c.entry(b.ID)
	createdA, createdB := o.createdAtMs(a), o.createdAtMs(b)
	cold := min(c.coldColumns(ea, createdA), c.coldColumns(eb, createdB))
	if cold < uint64(o.cfg.MergeWindows) {
		return mergeCandidate{}, false
	}
	cd := mergeCandidate{left: a, right: b, cold: cold, estimate: saturate.Add(ea.recentPeak(), eb.recentPeak())}
	for _, created := range []uint64{createdA, createdB} {
		if until := saturate.Add(created, o.cfg.MergeDelayMs); until > o.in.NowMs {
			cd.delayLeftMs = max(cd.delayLeftMs, until-o.in.NowMs)
		}
	}
	return cd, true
}

// createdAtMs is when r was created (Input.CreatedAtMs; 0 without it).
func (o *observation) createdAtMs(r *catalog.RouteDescriptor) uint64 {
	if o.in.CreatedAtMs == nil {
		return 0
	}
	return o.in.CreatedAtMs(r)
}

// mergeLimit is the most a merged estimate may be:
// threshold·(10000 − MergeMarginBP)/10000.
func mergeLimit(cfg Config) uint64 {
	return saturate.Mul64(cfg.Threshold, uint64(fullShareBP-min(cfg.MergeMarginBP, fullShareBP))).DivSat(fullShareBP)
}

// scoreOf is route id's score in this column (0 without a row).
func (o *observation) scoreOf(id uint64) uint64 {
	rows := o.col.Rows
	i, ok := slices.BinarySearchFunc(o.order, id, func(k int, id uint64) int { return cmp.Compare(rows[k].RouteID, id) })
	if !ok {
		return 0
	}
	r := &rows[o.order[i]]
	return Score(r.Reads, r.Writes, o.cfg, o.durMs)
}

// tracked returns the new entry of route id, if it has one.
func (o *observation) tracked(id uint64) (Tracked, bool) {
	if i, ok := findIn(o.out, id); ok {
		return o.out[i], true
	}
	return Tracked{}, false
}

// applyMergeNotes records each route's merge explanation: a planned one
// over a decline, else the first (coldest pair) — a route sits in two
// pairs. A route without a tracked entry gets one. The same reason with
// the same partner as in the directly preceding column continues that
// explanation (FirstAtMs stays, Repeats grows), as explain does.
func (o *observation) applyMergeNotes(notes []mergeNote) {
	if len(notes) == 0 {
		return
	}
	slices.SortStableFunc(notes, func(a, b mergeNote) int { return cmp.Compare(a.routeID, b.routeID) })
	var added []Tracked
	for i := 0; i < len(notes); {
		j, pick := i, i
		for ; j < len(notes) && notes[j].routeID == notes[i].routeID; j++ {
			if notes[j].x.Reason == ReasonMergePlanned && notes[pick].x.Reason != ReasonMergePlanned {
				pick = j
			}
		}
		n := notes[pick]
		i = j
		pos, ok := findIn(o.out, n.routeID)
		var t *Tracked
		if ok {
			t = &o.out[pos]
		} else {
			added = append(added, Tracked{RouteID: n.routeID, LastScore: n.x.Score})
			t = &added[len(added)-1]
		}
		x, last := n.x, t.Merge
		x.FirstAtMs = x.AtMs
		if !o.gap && o.prevAt != 0 && last.Reason == x.Reason && last.MergePartner == x.MergePartner && last.AtMs == o.prevAt {
			x.FirstAtMs = last.FirstAtMs
			x.Repeats = saturate.Inc32(last.Repeats)
		}
		t.Merge = x
	}
	if len(added) > 0 {
		out := make([]Tracked, 0, len(o.out)+len(added))
		i := 0
		for _, a := range added {
			for i < len(o.out) && o.out[i].RouteID < a.RouteID {
				out = append(out, o.out[i])
				i++
			}
			out = append(out, a)
		}
		o.out = append(out, o.out[i:]...)
	}
}
