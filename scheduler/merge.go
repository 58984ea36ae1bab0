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
	// committed column: the highest upper bounds. A key the detector could
	// isolate carries most of the route's load in its lower bound, so it
	// is among them unless 32 other keys' error bounds exceed it.
	mergedTopKeys = 32
	// maxMergeKeys bounds the distinct keys one hot row merges. Reporters
	// send at most 256 keys each; past this many the merged sketch is
	// marked degraded (the detector then does not isolate) and further
	// keys are ignored, which keeps the bounds of the keys already tracked
	// sound.
	maxMergeKeys = 1024
	msPerMinute  = 60_000
)

// columnSum holds every accepted contribution to one window. Adding one is
// O(1): the reporter's column is kept as it came, and the merge happens
// once, when the column is assembled, with evidence (buckets, top-K) merged
// only for rows at or above the threshold, the only ones whose evidence
// the entry keeps. Memory is the contributions themselves: one column per
// reporter, each within a 4 MiB report.
//
// It is mutated only while its column is open and under the Aggregator's
// mutex; once the column is sealed it is read-only, so the committer may
// read it unlocked. The kept columns must not be modified by anyone.
type columnSum struct {
	windowStartMs uint64
	stepMs        uint64
	reporters     map[string]struct{}
	parts         []*api.ReportColumn
}

// rowCounts is one route's summed counts. Sums saturate at 2^64-1:
// validation rejects a single report that overflows, but many valid
// reports may still add up past it, and a saturated count keeps the
// detector's verdict ("hotter than any threshold") right.
type rowCounts struct {
	id                    uint64
	reads, writes         uint64
	readBytes, writeBytes uint64
	inputs                uint64 // reporter rows summed
}

// evidence is one hot route's merged buckets and top-K.
type evidence struct {
	inputs int
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
}

// keySum is one key's merged estimate. ownAbsent is the part of
// evidence.absentUpper contributed by full sketches that do hold the key:
// it must not be added again for them.
type keySum struct {
	lower, upper, ownAbsent uint64
}

func newColumnSum(windowStartMs, stepMs uint64) *columnSum {
	return &columnSum{windowStartMs: windowStartMs, stepMs: stepMs, reporters: make(map[string]struct{})}
}

func (c *columnSum) has(reporter string) bool {
	_, ok := c.reporters[reporter]
	return ok
}

// add records one reporter's validated column.
func (c *columnSum) add(reporter string, col *api.ReportColumn) {
	c.reporters[reporter] = struct{}{}
	c.parts = append(c.parts, col)
}

// add merges one reporter's row evidence (SPEC §8): bucket sums; per key,
// lower += (count-error)·rate and upper += count·rate, plus, for every full
// sketch that lacks the key, that sketch's smallest count·rate
// (Space-Saving: an absent key's count is at most the minimum); degraded
// if any input is.
//
// "Full" is read off the sketch itself, since a report does not carry the
// sketch capacity: a Space-Saving summary that has replaced an entry always
// holds an entry with error > 0 (each replacement inserts one), and one
// that never replaced an entry holds every key it was fed, so a key absent
// from it had a sampled count of zero.
func (e *evidence) add(row *api.ReportRow) {
	e.inputs++
	e.degraded = e.degraded || row.GetTopKDegraded()
	e.addBuckets(row.GetBuckets())

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
		e.absentUpper = satAdd(e.absentUpper, minScaled)
	}
	if e.keys == nil {
		e.keys = make(map[string]*keySum, len(top))
	}
	for _, k := range top {
		s := e.keys[string(k.GetKey())]
		if s == nil {
			if len(e.keys) >= maxMergeKeys {
				e.degraded = true
				continue
			}
			s = &keySum{}
			e.keys[string(k.GetKey())] = s
		}
		s.lower = satAdd(s.lower, (k.GetCount()-k.GetError())*rate)
		s.upper = satAdd(s.upper, k.GetCount()*rate)
		if full {
			s.ownAbsent = satAdd(s.ownAbsent, minScaled)
		}
	}
}

func (e *evidence) addBuckets(b []uint64) {
	switch {
	case e.bucketsMixed:
	case e.inputs == 1: // the first row merged (add counts it first)
		e.buckets = slices.Clone(b)
	case len(e.buckets) != len(b):
		e.buckets, e.bucketsMixed = nil, true
	default:
		for i, v := range b {
			e.buckets[i] = satAdd(e.buckets[i], v)
		}
	}
}

// estimates returns the merged key estimates, highest upper bound first
// (ties: higher lower bound, then key), at most limit of them.
func (e *evidence) estimates(limit int) []*api.KeyEstimate {
	if len(e.keys) == 0 {
		return nil
	}
	out := make([]*api.KeyEstimate, 0, len(e.keys))
	for k, s := range e.keys {
		absent := uint64(math.MaxUint64)
		if e.absentUpper != math.MaxUint64 {
			absent = e.absentUpper - s.ownAbsent // ownAbsent sums a subset of absentUpper's terms
		}
		out = append(out, &api.KeyEstimate{Key: []byte(k), Lower: s.lower, Upper: satAdd(s.upper, absent)})
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
	// deadRows are reporter rows dropped because their route is no longer
	// live.
	deadRows uint64
	// inputs are all the reporter rows the column holds.
	inputs uint64
}

// entry assembles the ObserveColumn of a sealed sum against the current
// catalog and detector config (SPEC §8): rows scoring at or above the
// threshold with their evidence, the belowRows highest rows under it
// without evidence (display only), per-group totals over every live row,
// and the count of rows dropped because their route is gone. The output
// does not depend on the order the contributions arrived in (unless a hot
// row exceeds maxMergeKeys, which marks it degraded): rows by route id,
// groups by group id, reporters sorted.
func (c *columnSum) entry(cat *catalog.Catalog, dc detector.Config, belowRows int) (*api.ObserveColumn, entryStats) {
	counts := c.counts()
	var stats entryStats
	type scored struct {
		counts *rowCounts
		score  uint64
	}
	var hot, below []scored
	groups := map[uint64]*api.GroupLoad{}
	for i := range counts {
		rc := &counts[i]
		stats.inputs += rc.inputs
		route, live := cat.Route(rc.id)
		if !live {
			stats.deadRows += rc.inputs
			continue
		}
		g := groups[route.GroupID]
		if g == nil {
			g = &api.GroupLoad{GroupId: route.GroupID}
			groups[route.GroupID] = g
		}
		g.Reads = satAdd(g.Reads, rc.reads)
		g.Writes = satAdd(g.Writes, rc.writes)
		g.ReadBytes = satAdd(g.ReadBytes, rc.readBytes)
		g.WriteBytes = satAdd(g.WriteBytes, rc.writeBytes)
		s := scored{rc, rowScore(rc.reads, rc.writes, dc.WriteWeight, dc.ReadWeight, c.stepMs)}
		if s.score >= dc.Threshold {
			hot = append(hot, s)
		} else {
			below = append(below, s)
		}
	}
	slices.SortFunc(below, func(a, b scored) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.counts.id, b.counts.id)
	})
	below = below[:min(len(below), belowRows)]

	hotIDs := make([]uint64, len(hot))
	for i, s := range hot {
		hotIDs[i] = s.counts.id
	}
	ev := c.evidence(hotIDs)
	rows := make([]*api.ColumnRow, 0, len(hot)+len(below))
	for _, s := range hot {
		row := s.counts.row()
		e := ev[s.counts.id]
		row.Buckets, row.TopKeys, row.TopKDegraded = e.buckets, e.estimates(mergedTopKeys), e.degraded
		rows = append(rows, row)
	}
	for _, s := range below {
		rows = append(rows, s.counts.row())
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

// counts sums every route's counts over all contributions, in route-id
// order.
func (c *columnSum) counts() []rowCounts {
	hint := 0
	for _, p := range c.parts {
		hint = max(hint, len(p.GetRows()))
	}
	index := make(map[uint64]int, hint)
	out := make([]rowCounts, 0, hint)
	for _, p := range c.parts {
		for _, r := range p.GetRows() {
			i, ok := index[r.GetRouteId()]
			if !ok {
				i = len(out)
				index[r.GetRouteId()] = i
				out = append(out, rowCounts{id: r.GetRouteId()})
			}
			rc := &out[i]
			rc.reads = satAdd(rc.reads, r.GetReads())
			rc.writes = satAdd(rc.writes, r.GetWrites())
			rc.readBytes = satAdd(rc.readBytes, r.GetReadBytes())
			rc.writeBytes = satAdd(rc.writeBytes, r.GetWriteBytes())
			rc.inputs++
		}
	}
	slices.SortFunc(out, func(a, b rowCounts) int { return cmp.Compare(a.id, b.id) })
	return out
}

// evidence merges the evidence of the given routes over all contributions.
func (c *columnSum) evidence(ids []uint64) map[uint64]*evidence {
	ev := make(map[uint64]*evidence, len(ids))
	for _, id := range ids {
		ev[id] = &evidence{}
	}
	if len(ids) == 0 {
		return ev
	}
	for _, p := range c.parts {
		for _, r := range p.GetRows() {
			if e := ev[r.GetRouteId()]; e != nil {
				e.add(r)
			}
		}
	}
	return ev
}

func (rc *rowCounts) row() *api.ColumnRow {
	return &api.ColumnRow{RouteId: rc.id, Reads: rc.reads, Writes: rc.writes, ReadBytes: rc.readBytes, WriteBytes: rc.writeBytes}
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
