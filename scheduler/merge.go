package scheduler

import (
	"bytes"
	"cmp"
	"math"
	"math/bits"
	"slices"
	"strings"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/detector"
)

// Merge bounds (SPEC §8).
const (
	// mergedTopKeys is how many top-K estimates of one row go into a
	// committed column: the highest upper bounds. The detector isolates on
	// the strongest lower bound, which is among them unless the evidence is
	// too flat to isolate anyway.
	mergedTopKeys = 32
	// maxMergeKeys bounds the distinct keys one row tracks while its column
	// is open. Reporters send at most 256 keys each; past this many the
	// merged sketch is marked degraded (the detector then does not isolate)
	// and further keys are ignored, which keeps the bounds of the keys
	// already tracked exact.
	maxMergeKeys = 1024
	msPerMinute  = 60_000
)

// columnSum accumulates every accepted report of one window. It is mutated
// only while its column is open and under the Aggregator's mutex; once the
// column is sealed it is read-only, so the committer may read it unlocked.
type columnSum struct {
	windowStartMs uint64
	stepMs        uint64
	reporters     map[string]struct{}
	rows          map[uint64]*rowSum
	// deadRows counts reporter rows dropped on admission because their route
	// was no longer live.
	deadRows uint64
}

// rowSum is one route's merged load. Sums saturate at 2^64-1: validation
// rejects a single report that overflows, but many valid reports may still
// add up past it, and a saturated count keeps the detector's verdict
// ("hotter than any threshold") right.
type rowSum struct {
	reads, writes         uint64
	readBytes, writeBytes uint64
	// buckets is nil when no input had buckets or two inputs disagreed on
	// the bucket count (a config change between their reports): no bucket
	// evidence is better than a sum of two layouts.
	buckets      []uint64
	bucketsMixed bool
	keys         map[string]*keySum
	// absentUpper is Σ over full sketches of their smallest scaled count:
	// what a key absent from every one of them could at most have had.
	absentUpper uint64
	degraded    bool
	// inputs is the number of reporter rows merged, for dropped-row counts.
	inputs uint64
}

// keySum is one key's merged estimate. ownAbsent is the part of
// rowSum.absentUpper contributed by full sketches that do hold the key: it
// must not be added again for them.
type keySum struct {
	lower, upper, ownAbsent uint64
}

func newColumnSum(windowStartMs, stepMs uint64) *columnSum {
	return &columnSum{
		windowStartMs: windowStartMs,
		stepMs:        stepMs,
		reporters:     make(map[string]struct{}),
		rows:          make(map[uint64]*rowSum),
	}
}

func (c *columnSum) has(reporter string) bool {
	_, ok := c.reporters[reporter]
	return ok
}

// add merges one reporter's validated column. Rows of routes that are not
// live in cat are dropped; add returns how many.
func (c *columnSum) add(reporter string, col *api.ReportColumn, cat *catalog.Catalog) (dead uint64) {
	c.reporters[reporter] = struct{}{}
	for _, row := range col.GetRows() {
		if _, live := cat.Route(row.GetRouteId()); !live {
			dead++
			continue
		}
		r := c.rows[row.GetRouteId()]
		if r == nil {
			r = &rowSum{}
			c.rows[row.GetRouteId()] = r
		}
		r.add(row)
	}
	c.deadRows += dead
	return dead
}

// add merges one reporter's row (SPEC §8): plain sums of counts, bytes and
// buckets; per key, lower += (count-error)·rate and upper += count·rate,
// plus, for every full sketch that lacks the key, that sketch's smallest
// count·rate (Space-Saving: an absent key's count is at most the minimum).
//
// "Full" is read off the sketch itself, since a report does not carry the
// sketch capacity: a Space-Saving summary that has replaced an entry always
// holds an entry with error > 0 (each replacement inserts one), and one
// that never replaced an entry holds every key it was fed, so a key absent
// from it had a sampled count of zero.
func (r *rowSum) add(row *api.ReportRow) {
	r.inputs++
	r.reads = satAdd(r.reads, row.GetReads())
	r.writes = satAdd(r.writes, row.GetWrites())
	r.readBytes = satAdd(r.readBytes, row.GetReadBytes())
	r.writeBytes = satAdd(r.writeBytes, row.GetWriteBytes())
	r.degraded = r.degraded || row.GetTopKDegraded()
	r.addBuckets(row.GetBuckets())

	top := row.GetTopKeys()
	if len(top) == 0 {
		return
	}
	rate := uint64(row.GetSampleRate())
	full := row.GetTopKDegraded()
	minScaled := uint64(math.MaxUint64)
	for _, k := range top {
		full = full || k.GetError() > 0
		minScaled = min(minScaled, k.GetCount()*rate) // validated: no overflow
	}
	if full {
		r.absentUpper = satAdd(r.absentUpper, minScaled)
	}
	if r.keys == nil {
		r.keys = make(map[string]*keySum, len(top))
	}
	for _, k := range top {
		e := r.keys[string(k.GetKey())]
		if e == nil {
			if len(r.keys) >= maxMergeKeys {
				r.degraded = true
				continue
			}
			e = &keySum{}
			r.keys[string(k.GetKey())] = e
		}
		e.lower = satAdd(e.lower, (k.GetCount()-k.GetError())*rate)
		e.upper = satAdd(e.upper, k.GetCount()*rate)
		if full {
			e.ownAbsent = satAdd(e.ownAbsent, minScaled)
		}
	}
}

func (r *rowSum) addBuckets(b []uint64) {
	switch {
	case r.bucketsMixed:
	case r.inputs == 1: // the first row merged (add counts it first)
		r.buckets = slices.Clone(b)
	case len(r.buckets) != len(b):
		r.buckets, r.bucketsMixed = nil, true
	default:
		for i, v := range b {
			r.buckets[i] = satAdd(r.buckets[i], v)
		}
	}
}

// estimates returns the merged key estimates, highest upper bound first
// (ties: higher lower bound, then key), at most limit of them.
func (r *rowSum) estimates(limit int) []*api.KeyEstimate {
	if len(r.keys) == 0 {
		return nil
	}
	out := make([]*api.KeyEstimate, 0, len(r.keys))
	for k, e := range r.keys {
		absent := uint64(math.MaxUint64)
		if r.absentUpper != math.MaxUint64 {
			absent = r.absentUpper - e.ownAbsent // ownAbsent sums a subset of absentUpper's terms
		}
		out = append(out, &api.KeyEstimate{Key: []byte(k), Lower: e.lower, Upper: satAdd(e.upper, absent)})
	}
	slices.SortFunc(out, func(a, b *api.KeyEstimate) int {
		if c := cmp.Compare(b.Upper, a.Upper); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Lower, a.Lower); c != 0 {
			return c
		}
		return bytes.Compare(a.Key, b.Key)
	})
	if len(out) > limit {
		out = out[:limit:limit]
	}
	return out
}

// entryStats describes an assembled entry for metrics and logs.
type entryStats struct {
	// deadRows are reporter rows dropped on admission or while assembling
	// because their route was no longer live.
	deadRows uint64
	// inputs are the reporter rows the sum holds (for rows refused with
	// their column).
	inputs uint64
}

// entry assembles the ObserveColumn of a sealed sum against the current
// catalog and detector config (SPEC §8): rows scoring at or above the
// threshold with their evidence, the belowRows highest rows under it
// without evidence (display only), per-group totals over every live row,
// and the rows dropped because their route is gone. The output is
// deterministic: rows by route id, groups by group id, reporters sorted.
func (c *columnSum) entry(cat *catalog.Catalog, dc detector.Config, belowRows int) (*api.ObserveColumn, entryStats) {
	stats := entryStats{deadRows: c.deadRows}
	ids := make([]uint64, 0, len(c.rows))
	for id, r := range c.rows {
		ids = append(ids, id)
		stats.inputs += r.inputs
	}
	slices.Sort(ids)

	type scored struct {
		row   *api.ColumnRow
		score uint64
	}
	var hot, below []scored
	groups := map[uint64]*api.GroupLoad{}
	for _, id := range ids {
		r := c.rows[id]
		route, live := cat.Route(id)
		if !live {
			stats.deadRows += r.inputs
			continue
		}
		g := groups[route.GroupID]
		if g == nil {
			g = &api.GroupLoad{GroupId: route.GroupID}
			groups[route.GroupID] = g
		}
		g.Reads = satAdd(g.Reads, r.reads)
		g.Writes = satAdd(g.Writes, r.writes)
		g.ReadBytes = satAdd(g.ReadBytes, r.readBytes)
		g.WriteBytes = satAdd(g.WriteBytes, r.writeBytes)

		row := &api.ColumnRow{RouteId: id, Reads: r.reads, Writes: r.writes, ReadBytes: r.readBytes, WriteBytes: r.writeBytes}
		score := rowScore(r.reads, r.writes, dc.WriteWeight, dc.ReadWeight, c.stepMs)
		if score >= dc.Threshold {
			row.Buckets = r.buckets
			row.TopKeys = r.estimates(mergedTopKeys)
			row.TopKDegraded = r.degraded
			hot = append(hot, scored{row, score})
		} else {
			below = append(below, scored{row, score})
		}
	}
	slices.SortFunc(below, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.row.RouteId, b.row.RouteId)
	})
	below = below[:min(len(below), belowRows)]

	rows := make([]*api.ColumnRow, 0, len(hot)+len(below))
	for _, s := range hot {
		rows = append(rows, s.row)
	}
	for _, s := range below {
		rows = append(rows, s.row)
	}
	slices.SortFunc(rows, func(a, b *api.ColumnRow) int { return cmp.Compare(a.RouteId, b.RouteId) })

	totals := make([]*api.GroupLoad, 0, len(groups))
	for _, g := range groups {
		totals = append(totals, g)
	}
	slices.SortFunc(totals, func(a, b *api.GroupLoad) int { return cmp.Compare(a.GroupId, b.GroupId) })

	return &api.ObserveColumn{
		WindowStartMs: c.windowStartMs,
		AtMs:          c.windowStartMs + c.stepMs,
		StepMs:        c.stepMs,
		Rows:          rows,
		GroupTotals:   totals,
		Reporters:     c.sortedReporters(),
		DroppedRows:   stats.deadRows,
	}, stats
}

func (c *columnSum) sortedReporters() []string {
	out := make([]string, 0, len(c.reporters))
	for r := range c.reporters {
		out = append(out, r)
	}
	slices.SortFunc(out, strings.Compare)
	return out
}

// rowScore is the detector's per-column score (SPEC §6.1):
// (writes·ww + reads·wr)·60000/durMs, floored, saturating at 2^64-1.
// The detector package does not export its scoring, so this computes it
// identically: the product is carried in 128 bits (a weighted count needs
// 97, times 60000 another 16) and only the quotient saturates. durMs > 0.
func rowScore(reads, writes uint64, ww, wr uint32, durMs uint64) uint64 {
	wHi, wLo := bits.Mul64(writes, uint64(ww))
	rHi, rLo := bits.Mul64(reads, uint64(wr))
	lo, carry := bits.Add64(wLo, rLo, 0)
	hi := wHi + rHi + carry // < 2^33
	mHi, mLo := bits.Mul64(lo, msPerMinute)
	hi = hi*msPerMinute + mHi // < 2^49
	if hi >= durMs {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, mLo, durMs)
	return q
}

func satAdd(a, b uint64) uint64 {
	s, c := bits.Add64(a, b, 0)
	if c != 0 {
		return math.MaxUint64
	}
	return s
}
