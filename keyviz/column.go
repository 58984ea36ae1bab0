package keyviz

import (
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Window describes the open column: the start of its window and its step.
// started is false until the first CloseColumn, before which the column has
// no window yet (CloseColumn gives it one).
func (s *Sampler) Window() (startMs, stepMs uint64, started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.col.start, s.col.cfg.StepMs, s.col.started
}

// NextBoundary is the time at which the open column should be closed: the
// end of its window, or for a column not yet started the first step boundary
// after nowMs.
func (s *Sampler) NextBoundary(nowMs uint64) uint64 {
	start, step, started := s.Window()
	if started {
		return start + step
	}
	return (nowMs/step + 1) * step
}

// CloseColumn closes the open column at nowMs (at or after its boundary)
// and returns it with its non-empty rows, sorted by route id. The next column
// opens at once, with the staged config if there is one.
//
// Windows: a column is labelled with the start of its window. The first
// column, which has no start yet, is labelled with the step window just
// before the one holding nowMs (so a close right at a boundary b labels it
// b-step). The next column starts at the step boundary at or before nowMs —
// if the closer was late, the windows it slept through get no column and
// their observations are in the column just closed. A new step is aligned
// to itself: if the new step's boundary at or before nowMs would not come
// after the closed column's label, the next column starts at the first
// boundary after the label instead (and so also holds the observations made
// before that boundary). Labels therefore strictly increase. A scheduled
// step change (LoadConfig.NextStepAtMs) takes effect with the first column
// that would open at or after its boundary.
//
// The swap, and observations racing with it: each route's counters for the
// open column hang behind an atomic pointer in the route's table entry (the
// route table itself is behind another, replaced when the bucket count
// changes). The close swaps every route's counter block out and drains it
// by swapping each word with a seal bit. An Observe that loaded the old
// block before the swap adds to it either before its word is sealed — and
// is in the drained value, so in this column — or after, in which case the
// add returns the seal bit and the observation is repeated in the route's
// next block — so in the next column. Either way it is counted exactly once;
// the close never waits for observers, and observers never lock. A striped
// block's stripes are sealed and drained with it, its stripe pointer first
// so that it cannot be striped behind the close, and the samples its
// stripes buffered go to the closing column's sketch (stripes.go). Routes that
// left the table (or whose layout changed) get permanently sealed
// sentinels, so a straggler holding one looks its route up again; a route
// that is gone by then drops the observation as unknown, like one arriving
// after the change. The sketch feed of a sampled observation may land in the
// column after its count; a feed racing with a close is discarded if its
// route left the table or has no count in the column it lands in.
func (s *Sampler) CloseColumn(nowMs uint64) *api.ReportColumn {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.col
	label := cur.start
	if !cur.started {
		label = nowMs / cur.cfg.StepMs * cur.cfg.StepMs
		label -= min(label, cur.cfg.StepMs)
	}
	next := cur.cfg
	if s.pending != nil {
		next, s.pending = *s.pending, nil
	}

	old := s.table.Load()
	// Every entry of the table and every entry that left it in this column
	// is drained; those that will not be in the next column's table die:
	// sealed sentinels go in so that stragglers look their route up again.
	replaced := next.Buckets != cur.cfg.Buckets
	each := func(fn func(e *routeEntry, dead bool)) {
		for _, e := range old.routes {
			fn(e, replaced)
		}
		for _, e := range s.retired {
			fn(e, true)
		}
	}
	if replaced {
		s.table.Store(old.rebuild(next.Buckets))
	}

	// Sketches first, under boxMu, so that a sketch created from now on
	// gets the next column's weights. Only sampled routes have one.
	type taken struct {
		e  *routeEntry
		bx *sketchBox
	}
	var boxes []taken
	s.boxMu.Lock()
	s.boxWeights = [2]uint64{uint64(next.ReadWeight), uint64(next.WriteWeight)}
	each(func(e *routeEntry, dead bool) {
		var bx *sketchBox
		switch {
		case dead:
			bx = e.sk.Swap(sealedBox)
		case e.sk.Load() != nil:
			bx = e.sk.Swap(nil)
		}
		if bx != nil && bx != sealedBox {
			boxes = append(boxes, taken{e, bx})
		}
	})
	s.boxMu.Unlock()

	nt := s.table.Load()
	s.arena.Store(s.arena.Load().next(nt.words, len(nt.routes), s.colSeeds.next()))

	col := &api.ReportColumn{
		WindowStartMs: label,
		StepMs:        cur.cfg.StepMs,
		Buckets:       uint32(cur.cfg.Buckets),
		WriteWeight:   cur.cfg.WriteWeight,
		ReadWeight:    cur.cfg.ReadWeight,
	}
	nextBox := 0 // boxes are in the order each visits entries
	each(func(e *routeEntry, dead bool) {
		var b *block
		switch {
		case dead:
			b = e.blk.Swap(sealedBlock)
		case e.blk.Load() != nil:
			b = e.blk.Swap(nil)
		}
		var bx *sketchBox
		if nextBox < len(boxes) && boxes[nextBox].e == e {
			bx = boxes[nextBox].bx
			nextBox++
		}
		var counts []uint64
		if b != nil && b != sealedBlock {
			var st *stripeSet
			counts, st = b.drain(s.scratch)
			if st != nil {
				// The samples its stripes buffered are this column's.
				bx = s.takeSamples(st, bx, uint64(cur.cfg.WriteWeight), uint64(cur.cfg.ReadWeight))
			}
		}
		if bx != nil {
			// Sealing after the block drained keeps every feed that raced
			// in before the seal: the sketch is evidence for this column.
			bx.mu.Lock()
			bx.sealed = true
			bx.mu.Unlock()
		}
		if counts == nil {
			return
		}
		if row := s.row(e, counts, bx, cur.cfg); row != nil {
			col.Rows = append(col.Rows, row)
		}
	})
	slices.SortFunc(col.Rows, func(a, b *api.ReportRow) int {
		switch {
		case a.RouteId < b.RouteId:
			return -1
		case a.RouteId > b.RouteId:
			return 1
		}
		return 0
	})

	s.retired = nil
	start := nextStart(nowMs, label, next.StepMs)
	if adv := next.at(start); adv != next {
		// A scheduled step change is due: the next column is the first of
		// the new step, from the first boundary of that step.
		next = adv
		start = nextStart(nowMs, label, next.StepMs)
	}
	s.col = openColumn{start: start, started: true, cfg: next}
	return col
}

// nextStart is the start of the column after the one labelled label, closed
// at nowMs: the step boundary at or before nowMs, or the first one after
// label if that would not come after it.
func nextStart(nowMs, label, step uint64) uint64 {
	start := nowMs / step * step
	if start <= label {
		start = (label/step + 1) * step
	}
	return start
}

// row builds a report row from a drained block (and sketch), or nil when the
// route saw no observation.
func (s *Sampler) row(e *routeEntry, c []uint64, bx *sketchBox, cfg LoadConfig) *api.ReportRow {
	r := &api.ReportRow{
		RouteId:    e.id,
		ReadBytes:  c[0],
		WriteBytes: c[1],
		Buckets:    make([]uint64, e.k),
		SampleRate: s.sampleRate,
	}
	wr, ww := uint64(cfg.ReadWeight), uint64(cfg.WriteWeight)
	for i := range e.k {
		reads, writes := c[2+2*i], c[3+2*i]
		r.Reads = saturate.Add(r.Reads, reads)
		r.Writes = saturate.Add(r.Writes, writes)
		r.Buckets[i] = saturate.Add(saturate.Mul(reads, wr), saturate.Mul(writes, ww))
	}
	// Bytes alone make a row: they can trail their count into the next
	// column when the request raced with the close.
	if r.Reads == 0 && r.Writes == 0 && r.ReadBytes == 0 && r.WriteBytes == 0 {
		return nil
	}
	if bx != nil {
		// Sealed: no one else touches ss any more.
		r.TopKeys = bx.ss.top()
		r.TopKDegraded = bx.ss.degraded()
		r.Samples = bx.res.samples()
		r.SampledReads, r.SampledWrites = bx.reads, bx.writes
	}
	return r
}
