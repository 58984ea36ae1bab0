package heatmap

import (
	"fmt"
	"slices"
)

// History is the replicated heat history: columns of band totals at up to
// Levels resolutions, and the split and merge marks. It is an immutable
// value (the zero value and New are the empty history); every method is
// safe for concurrent use, and AddColumn and AddMark return a new History
// sharing structure with the receiver.
//
// Downsampling, exactly: every column enters level 0. When level i holds
// more than LevelColumns columns, its two oldest are merged into one
// column (spanning both, totals added, boundaries those common to both:
// see mergeColumns) that becomes the newest of level i+1; when the last
// level holds more than LevelColumns, its oldest column is dropped. So a
// column of level i sums 2^i committed columns, level i's columns are all
// older than level i-1's, and at most MaxColumns are kept: at a constant
// step s the history reaches back LevelColumns·(2^Levels − 1)·s (64 h at
// 60 s, 64 min at 1 s), the last LevelColumns·s at full resolution. A step
// change needs nothing: columns keep their own spans, and a merged column
// spans whatever its parts did.
type History struct {
	// levels[i] holds the columns of level i, oldest first. Each slice is
	// owned by this History (copied on change, never appended to in place).
	levels [Levels][]*column
	marks  markList
	// atoms caches the banding of the last catalog seen; not content (it
	// is not in the proto and never changes a result).
	atoms *atoms
}

// New returns the empty history.
func New() *History { return &History{} }

// AddColumn returns the history with one more committed column. The
// column must not start before the newest one ends (ErrStale); gaps are
// fine. Marks older than the oldest column kept afterwards are evicted.
func (h *History) AddColumn(in ColumnInput) (*History, error) {
	switch {
	case in.Catalog == nil:
		return nil, fmt.Errorf("%w: catalog: missing", ErrInvalidInput)
	case in.AtMs <= in.WindowStartMs:
		return nil, fmt.Errorf("%w: at_ms %d is not after window_start_ms %d", ErrInvalidInput, in.AtMs, in.WindowStartMs)
	}
	newest := h.newest()
	if newest != nil && in.WindowStartMs < newest.endMs {
		return nil, fmt.Errorf("%w: window_start_ms %d is before the newest column's end %d", ErrStale, in.WindowStartMs, newest.endMs)
	}
	loads, err := sortedLoads(in.Loads)
	if err != nil {
		return nil, err
	}
	a := deriveAtoms(in.Catalog, h.atoms)
	var prevLay *layout
	if newest != nil {
		prevLay = newest.lay
	}
	bounds, vals := deriveBands(a, loads, in.Weights, prevLay)
	lay := &layout{bounds: bounds}
	if newest != nil && newest.lay.equal(lay) {
		lay = newest.lay
	}
	c := &column{startMs: in.WindowStartMs, endMs: in.AtMs, coveredMs: in.AtMs - in.WindowStartMs, lay: lay, vals: vals}
	next := &History{levels: h.levels, marks: h.marks, atoms: a}
	next.push(c)
	if from, ok := next.oldestStartMs(); ok {
		next.marks = next.marks.evictBefore(from)
	}
	return next, nil
}

// push adds c as the newest column of level 0 and downsamples (see
// History).
func (h *History) push(c *column) {
	h.levels[0] = appendCopy(h.levels[0], c)
	for i := range Levels {
		l := h.levels[i]
		if len(l) <= LevelColumns {
			return
		}
		if i+1 < Levels {
			h.levels[i+1] = appendCopy(h.levels[i+1], mergeColumns(l[0], l[1]))
			h.levels[i] = slices.Clone(l[2:])
		} else {
			h.levels[i] = slices.Clone(l[1:])
		}
	}
}

// appendCopy returns a new slice holding s and c: s may be shared with
// older Histories and is never written.
func appendCopy(s []*column, c *column) []*column {
	out := make([]*column, len(s)+1)
	copy(out, s)
	out[len(s)] = c
	return out
}

// newest is the newest column, nil when there is none.
func (h *History) newest() *column {
	for i := range Levels {
		if l := h.levels[i]; len(l) > 0 {
			return l[len(l)-1]
		}
	}
	return nil
}

// oldestStartMs is the start of the oldest column.
func (h *History) oldestStartMs() (uint64, bool) {
	for i := Levels - 1; i >= 0; i-- {
		if l := h.levels[i]; len(l) > 0 {
			return l[0].startMs, true
		}
	}
	return 0, false
}

// ascend calls fn on every column, oldest first, with its level.
func (h *History) ascend(fn func(c *column, level int)) {
	for i := Levels - 1; i >= 0; i-- {
		for _, c := range h.levels[i] {
			fn(c, i)
		}
	}
}

// Columns is the number of columns kept.
func (h *History) Columns() int {
	n := 0
	for _, l := range h.levels {
		n += len(l)
	}
	return n
}

// Span is the time the columns cover, [fromMs, toMs): the start of the
// oldest and the end of the newest. ok is false for an empty history.
func (h *History) Span() (fromMs, toMs uint64, ok bool) {
	from, ok := h.oldestStartMs()
	if !ok {
		return 0, 0, false
	}
	return from, h.newest().endMs, true
}

// NewestStepMs is the length of the newest column: the step in force when
// it was committed (0 for an empty history).
func (h *History) NewestStepMs() uint64 {
	if c := h.newest(); c != nil {
		return c.endMs - c.startMs
	}
	return 0
}
