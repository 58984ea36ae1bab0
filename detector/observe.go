package detector

import (
	"cmp"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Observe applies one committed column to s and returns the new state and
// the ops to plan (docs/design.md#the-detector). It is pure: s, in and col (including the rows'
// slices) are not modified, and the outcome depends on the inputs only, not
// on the order of col.Rows or in.LiveOps.
//
// The work is proportional to the column's rows and the tracked entries,
// never to the catalog: a live route that is neither tracked nor in the
// column stays untouched, which is exactly what scoring it 0 would do.
//
// A column that Column.Validate rejects, or that does not end after the last
// observed one, changes nothing: Observe returns s and no plans.
//
// Plans come in plan order (highest score first, ties by route id), with
// ids in.NextOpID, in.NextOpID+1, …; under RuleMerge the column's merge
// plans follow its split plans (coldest pair first, merge.go), with the
// next ids. Plan.Keys are in step order; for a
// compound isolation, step 1 splits at H and step 2 splits its right child
// [H, end) at H·0x00. Plan keys and explanations share their byte slices
// with the returned State: neither may be modified.
func Observe(in Input, s *State, col Column) (*State, []Plan) {
	if s == nil {
		s = &State{}
	}
	order, err := col.rowOrder()
	if err != nil || col.AtMs <= s.lastColumnAtMs {
		return s, nil
	}
	o := newObservation(in, s, col, order)
	o.walk(order)
	plans := o.decide()
	if mergesOn(in) {
		o.coldOut = o.observeCold(order)
		plans = append(plans, o.decideMerges(plans)...)
	}
	return fromBase(o.prune(), col.AtMs, o.coldOut), plans
}

// observation is the working set of one Observe call.
type observation struct {
	in     Input
	cfg    Config
	col    Column
	prevAt uint64 // the previous column's AtMs (0: none)
	durMs  uint64
	// gap: this column does not start where the last one ended, so no
	// counter can prove consecutive hot columns across it.
	gap       bool
	smoothing int
	liveOpIDs []uint64 // sorted routes of live ops
	remaining uint64   // route delta live ops will still add

	old   []Tracked
	out   []Tracked // new entries, route-id order, before pruning
	pool  []uint64  // backing store of every new RecentScores
	cands []candidate
	order []int // the column's rows in route-id order

	// RuleMerge: the cold state before and after this column (cold.go).
	prevCold, coldOut *coldState
}

// candidate is an eligible route waiting for its split key and guardrails.
type candidate struct {
	pos   int // index in out
	score uint64
	route *catalog.RouteDescriptor
	row   *Row
	pool  []PooledKey // RulePooledEvidence: the earlier columns' keys
}

func newObservation(in Input, s *State, col Column, order []int) *observation {
	o := &observation{
		in:     in,
		cfg:    in.Config,
		col:    col,
		prevAt: s.lastColumnAtMs,
		durMs:  col.AtMs - col.WindowStartMs,
		gap:    s.lastColumnAtMs != 0 && col.WindowStartMs != s.lastColumnAtMs,
		// Clamped so that an unvalidated config cannot blow up the state.
		smoothing: int(min(in.Config.SmoothingWindows, maxSmoothingWindows)),
		old:       s.entries(),
		order:     order,
		prevCold:  s.cold,
	}
	n := entriesBound(o.old, col.Rows, order, func(r *Row) bool { return Score(r.Reads, r.Writes, o.cfg, o.durMs) >= o.cfg.Threshold })
	o.out = make([]Tracked, 0, n)
	o.pool = make([]uint64, 0, n*o.smoothing)
	for _, op := range in.LiveOps {
		o.liveOpIDs = append(o.liveOpIDs, op.RouteIDs...)
		if op.RemainingDelta > 0 {
			o.remaining = saturate.Add(o.remaining, uint64(op.RemainingDelta))
		}
	}
	slices.Sort(o.liveOpIDs)
	return o
}

// entriesBound counts the route ids that may have an entry after this
// column: tracked ones, and rows hot enough to start one (visit adds no
// entry for a cold untracked route). It bounds the new entries, so that the
// entry slice (large structs) is allocated once and tight even when a
// column lists thousands of cold routes (cluster version 3's route loads).
func entriesBound(tracked []Tracked, rows []Row, order []int, hot func(*Row) bool) int {
	n, i := 0, 0
	for _, k := range order {
		id := rows[k].RouteID
		for i < len(tracked) && tracked[i].RouteID < id {
			i, n = i+1, n+1
		}
		if i < len(tracked) && tracked[i].RouteID == id {
			i, n = i+1, n+1
			continue
		}
		if hot(&rows[k]) {
			n++
		}
	}
	return n + len(tracked) - i
}

// walk merges the tracked entries with the column's rows (both in route-id
// order) and counts every route that either holds.
func (o *observation) walk(order []int) {
	rows := o.col.Rows
	i, j := 0, 0
	for i < len(o.old) || j < len(order) {
		switch {
		case j == len(order) || (i < len(o.old) && o.old[i].RouteID < rows[order[j]].RouteID):
			o.visit(o.old[i].RouteID, &o.old[i], nil)
			i++
		case i == len(o.old) || rows[order[j]].RouteID < o.old[i].RouteID:
			o.visit(rows[order[j]].RouteID, nil, &rows[order[j]])
			j++
		default:
			o.visit(o.old[i].RouteID, &o.old[i], &rows[order[j]])
			i++
			j++
		}
	}
}

// visit applies the column to one route: its score (0 when absent), its
// counter (docs/design.md#hysteresis) and, when it is hot, the explanation of why it is
// or is not a candidate. Under RuleHoldBand a column in the hold band holds
// the counter; under RuleColumnExplanations a tracked route that is not hot
// is explained too (hold_band, or below_threshold once when it cools), so
// that the explanation's score, counter and reason always come from one
// column.
func (o *observation) visit(id uint64, prev *Tracked, row *Row) {
	var score uint64
	if row != nil {
		score = Score(row.Reads, row.Writes, o.cfg, o.durMs)
	}
	// An absent route has no load and no evidence: never hot, even under a
	// zero threshold (which Config.Validate refuses).
	hot := row != nil && score >= o.cfg.Threshold
	band := !hot && row != nil && o.in.Rules.Has(RuleHoldBand) && o.inHoldBand(score)
	if prev == nil && !hot {
		return // cold (or in the band with nothing to hold) and untracked
	}
	route := o.route(id)
	if route == nil {
		return // split or never existed: its entry and row are moot
	}
	e := Tracked{RouteID: id}
	if prev != nil {
		e = *prev
	}
	counter := e.ConsecutiveOver
	recent := e.RecentScores
	if o.gap {
		counter, recent = 0, nil
	}
	prevScore := e.LastScore
	e.LastScore = score
	e.RecentScores = o.recentScores(recent, score)
	active := route.State == catalog.StateActive
	switch {
	case active && hot:
		e.ConsecutiveOver = saturate.Inc32(counter)
	case active && band:
		e.ConsecutiveOver = counter
	default:
		e.ConsecutiveOver = 0
	}
	var cooldownLeft uint64
	if e.CooldownUntilMs > o.in.NowMs {
		cooldownLeft = e.CooldownUntilMs - o.in.NowMs
	}
	var pool []PooledKey // the earlier columns' evidence, for this column's cut
	if o.in.Rules.Has(RulePooledEvidence) {
		if !o.gap && row != nil && sameLoad(prevScore, score, row, o.cfg, o.durMs) {
			pool = e.Pool
		}
		e.Pool = nil
		if active && row != nil && e.ConsecutiveOver > 0 {
			e.Pool = nextPool(columnPoints(route, row), pool)
		}
	}
	pos := len(o.out)
	o.out = append(o.out, e)
	x := o.explanation(score, e.ConsecutiveOver, cooldownLeft)
	if !hot {
		if o.in.Rules.Has(RuleColumnExplanations) {
			// Only a counter worth holding makes hold_band: a route in the
			// band with nothing counted yet is simply below the threshold.
			o.explainCold(pos, x, band && active && e.ConsecutiveOver > 0)
		}
		return
	}
	switch {
	case !active:
		o.explain(pos, x, ReasonNonActive)
	case e.ConsecutiveOver < o.cfg.CandidateWindows:
		o.explain(pos, x, ReasonCounting)
	case o.inLiveOp(id):
		o.explain(pos, x, ReasonInLiveOp)
	case cooldownLeft > 0:
		o.explain(pos, x, ReasonCooldown)
	default:
		o.cands = append(o.cands, candidate{pos: pos, score: score, route: route, row: row, pool: pool})
	}
}

// inHoldBand reports whether score (below the threshold) is at least
// HoldBandBP of it: score·10000 >= threshold·HoldBandBP, in 128 bits.
func (o *observation) inHoldBand(score uint64) bool {
	return o.cfg.HoldBandBP > 0 && saturate.Mul64(score, fullShareBP).Cmp(saturate.Mul64(o.cfg.Threshold, uint64(o.cfg.HoldBandBP))) >= 0
}

// explanation starts the explanation of this column for a route: its
// score and counter and, under RuleColumnExplanations, the settings they
// are judged by.
func (o *observation) explanation(score uint64, counter uint32, cooldownLeft uint64) Explanation {
	x := Explanation{AtMs: o.col.AtMs, Score: score, ConsecutiveOver: counter, CooldownLeftMs: cooldownLeft}
	if o.in.Rules.Has(RuleColumnExplanations) {
		x.Threshold = o.cfg.Threshold
		x.CandidateWindows = o.cfg.CandidateWindows
		x.HoldBandBP = o.cfg.HoldBandBP
		x.Floor = o.cfg.TopKeyAbsoluteFloor
	}
	return x
}

// explainCold explains a tracked route that is not hot in this column
// (RuleColumnExplanations): hold_band while the band holds its counter; below_threshold
// once, when it leaves a hot or held explanation behind. A route that
// stays cold keeps that one below_threshold explanation (it is not
// refreshed), so its entry ages out like any other.
func (o *observation) explainCold(pos int, x Explanation, held bool) {
	last := o.out[pos].Explanation.Reason
	switch {
	case held:
		o.explain(pos, x, ReasonHoldBand)
	case last != ReasonUnspecified && last != ReasonBelowThreshold:
		o.explain(pos, x, ReasonBelowThreshold)
	}
}

func (o *observation) route(id uint64) *catalog.RouteDescriptor {
	if o.in.Catalog == nil {
		return nil
	}
	r, _ := o.in.Catalog.Route(id)
	return r
}

func (o *observation) inLiveOp(id uint64) bool {
	_, ok := slices.BinarySearch(o.liveOpIDs, id)
	return ok
}

// recentScores returns the last smoothing scores of prev·score, carved
// from the pool so that a column costs one allocation for all of them.
func (o *observation) recentScores(prev []uint64, score uint64) []uint64 {
	if o.smoothing == 0 {
		return nil
	}
	if len(prev) > o.smoothing-1 {
		prev = prev[len(prev)-(o.smoothing-1):]
	}
	start := len(o.pool)
	o.pool = append(o.pool, prev...)
	o.pool = append(o.pool, score)
	return o.pool[start:len(o.pool):len(o.pool)]
}

// explain records x with reason as out[pos]'s explanation. The same reason
// as in the directly preceding column continues that explanation (FirstAtMs
// stays, Repeats grows) instead of starting a new one: no flood of
// identical decisions.
func (o *observation) explain(pos int, x Explanation, reason Reason) {
	last := &o.out[pos].Explanation
	x.Reason = reason
	x.FirstAtMs = x.AtMs
	if !o.gap && o.prevAt != 0 && last.Reason == reason && last.AtMs == o.prevAt {
		x.FirstAtMs = last.FirstAtMs
		x.Repeats = saturate.Inc32(last.Repeats)
	}
	*last = x
}

// decide takes the candidates highest score first (ties by route id),
// chooses their split keys and applies the switch, the budget and the
// route cap (docs/design.md#guardrails). A decline costs neither budget nor routes.
func (o *observation) decide() []Plan {
	slices.SortFunc(o.cands, func(a, b candidate) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(o.out[a.pos].RouteID, o.out[b.pos].RouteID)
	})
	var live uint64
	if o.in.Catalog != nil {
		live = uint64(o.in.Catalog.Len())
	}
	var plans []Plan
	var reserved uint64
	for _, cd := range o.cands {
		e := &o.out[cd.pos]
		x := o.explanation(cd.score, e.ConsecutiveOver, 0)
		var ch splitChoice
		if o.in.Rules.Has(RuleBalanceSplit) {
			ch = chooseBalancedSplit(o.cfg, cd.route, cd.row, cd.pool, o.durMs, o.in.Rules)
			ch.explainBalance(&x, o.in.Rules)
		} else {
			ch = chooseSplit(o.cfg, cd.route, cd.row, o.durMs, o.in.Rules)
		}
		x.Origin = ch.origin
		x.IsolationReason = ch.isolation
		x.SplitKeys = ch.keys
		x.HotKey = ch.hotKey
		x.HotKeyLowerPerMin = ch.hotLowerPerMin
		x.HotKeyUpperPerMin = ch.hotUpperPerMin
		x.HotKeyShareBP = ch.hotShareBP
		x.MedianBucket = ch.medianBucket
		var reason Reason
		switch {
		case !o.in.Enabled:
			reason = ReasonSuppressedDisable
		case ch.decline != ReasonUnspecified:
			reason = ch.decline
		case uint64(len(plans)) >= uint64(o.cfg.MaxSplitsPerCycle):
			reason = ReasonBudgetExhausted
		default:
			// Saturating: absurd live-op deltas must not wrap below the cap.
			x.ProjectedRoutes = saturate.Add(saturate.Add(live, o.remaining), reserved+uint64(ch.delta))
			if x.ProjectedRoutes > uint64(o.cfg.MaxAutoRoutes) {
				reason = ReasonRouteCap
				break
			}
			reason = ReasonPlanned
			reserved += uint64(ch.delta)
			x.OpID = o.in.NextOpID + uint64(len(plans))
		}
		o.explain(cd.pos, x, reason)
		if reason == ReasonPlanned {
			plans = append(plans, Plan{
				OpID:        x.OpID,
				RouteID:     e.RouteID,
				Origin:      ch.origin,
				Keys:        ch.keys,
				RouteDelta:  ch.delta,
				Score:       cd.score,
				Explanation: e.Explanation,
			})
		}
	}
	return plans
}

// prune drops the entries that no longer carry anything: no counter, no
// cooldown still running, no recent explanation, split or merge (see
// State).
func (o *observation) prune() []Tracked {
	retention := max(o.cfg.CooldownMs, saturate.Mul(recentColumns, o.durMs))
	// An explanation of this very column is recent whatever the
	// retention: at the end of time (a saturated column end) the sum
	// below cannot exceed the column's end, and a merge planned now would
	// lose its explanation.
	recent := func(x *Explanation) bool {
		return x.Reason != ReasonUnspecified && (x.AtMs >= o.col.AtMs || saturate.Add(x.AtMs, retention) > o.col.AtMs)
	}
	kept := o.out[:0]
	for _, e := range o.out {
		if e.ConsecutiveOver > 0 || e.CooldownUntilMs > o.in.NowMs || recent(&e.Explanation) || recent(&e.Merge) {
			kept = append(kept, e)
		}
	}
	return kept
}

// recentColumns is how many columns an explanation stays recent at least.
const recentColumns = 10
