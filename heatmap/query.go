package heatmap

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Query asks for the load of a time and key range.
type Query struct {
	// Columns overlapping [FromMs, ToMs] (milliseconds since the epoch,
	// both included) are answered.
	FromMs, ToMs uint64
	// The key range [Start, End); an empty End is +inf.
	Start, End []byte
	Metric     Metric
	// MaxCells bounds the time cells of the answer (0: MaxCells, which is
	// also the most allowed). More columns than that are merged into
	// cells of equally many consecutive columns.
	MaxCells int
}

// Matrix is a query's answer: time cells × key rows. The rows are the
// distinct band boundaries of the cells inside the key range (at most
// MaxBands, see Query), in key order; every cell divides the rows into its
// own bands. Values are totals over each cell's covered time: a rate is
// value / CoveredMs.
type Matrix struct {
	// Keys[i] is where row i starts (Keys[0] is the query's Start); row i
	// ends where row i+1 starts, the last one at End.
	Keys [][]byte
	End  []byte
	// Cells, oldest first.
	Cells []Cell
}

// Cell is the load of one span of time per band.
type Cell struct {
	StartMs, EndMs, CoveredMs uint64
	// Columns is the number of committed columns summed in the cell.
	Columns uint64
	// Band j covers rows [Rows[j], Rows[j+1]) (the last one up to the
	// last row); Rows[0] is 0. A band that reaches beyond the key range
	// is cut at its edge, its total is the whole band's. Cells of one
	// layout share their Rows slice: read it, never change it.
	Rows   []uint32
	Values []uint64
}

// Row returns the row holding key, or false when key lies outside
// [Keys[0], End). Band boundaries are cut route boundaries (a prefix of
// them), so a route boundary or a split key falls in the row that starts
// at its cut form.
func (m *Matrix) Row(key []byte) (int, bool) {
	if len(m.Keys) == 0 || bytes.Compare(key, m.Keys[0]) < 0 || len(m.End) > 0 && bytes.Compare(key, m.End) >= 0 {
		return 0, false
	}
	i := sort.Search(len(m.Keys), func(i int) bool { return bytes.Compare(m.Keys[i], key) > 0 })
	return i - 1, true
}

// queryColumn is a column selected for an answer with the number of
// committed columns it sums.
type queryColumn struct {
	c     *column
	count uint64
}

// Query answers q from the history; the answer is bounded by MaxCells ×
// MaxBands values.
func (h *History) Query(q Query) (Matrix, error) {
	maxCells := q.MaxCells
	switch {
	case q.FromMs > q.ToMs:
		return Matrix{}, fmt.Errorf("%w: from %d is after to %d", ErrInvalidInput, q.FromMs, q.ToMs)
	case len(q.End) > 0 && bytes.Compare(q.Start, q.End) >= 0:
		return Matrix{}, fmt.Errorf("%w: start is not below end", ErrInvalidInput)
	case int(q.Metric) >= metrics:
		return Matrix{}, fmt.Errorf("%w: metric %d", ErrInvalidInput, q.Metric)
	case maxCells < 0 || maxCells > MaxCells:
		return Matrix{}, fmt.Errorf("%w: max cells %d not in [0, %d]", ErrInvalidInput, maxCells, MaxCells)
	case maxCells == 0:
		maxCells = MaxCells
	}
	var sel []queryColumn
	h.ascend(func(c *column, level int) {
		if c.startMs <= q.ToMs && c.endMs > q.FromMs {
			sel = append(sel, queryColumn{c, 1 << level})
		}
	})
	sel = groupColumns(sel, maxCells)
	start, end := string(q.Start), string(q.End)
	axis := queryAxis(sel, start, end)
	m := Matrix{Keys: make([][]byte, len(axis)), End: bytes.Clone(q.End), Cells: make([]Cell, len(sel))}
	for i, k := range axis {
		m.Keys[i] = []byte(k)
	}
	var sh cellShape
	for i, s := range sel {
		if sh.lay != s.c.lay {
			sh = shapeOf(s.c.lay, axis, start, end, sh.into)
		}
		m.Cells[i] = queryCell(s, &sh, q.Metric)
	}
	return m, nil
}

// groupColumns merges consecutive columns into groups of equal size
// (the last may be smaller) when there are more than maxCells.
func groupColumns(sel []queryColumn, maxCells int) []queryColumn {
	if len(sel) <= maxCells {
		return sel
	}
	g := (len(sel) + maxCells - 1) / maxCells
	out := make([]queryColumn, 0, maxCells)
	for i := 0; i < len(sel); i += g {
		acc := sel[i]
		for _, s := range sel[i+1 : min(i+g, len(sel))] {
			acc = queryColumn{mergeColumns(acc.c, s.c), acc.count + s.count}
		}
		out = append(out, acc)
	}
	return out
}

// interior returns the boundaries of lay strictly inside (start, end) and
// the index of the band holding start.
func interior(lay *layout, start, end string) ([]string, int) {
	first := sort.SearchStrings(lay.bounds, start)
	if first < len(lay.bounds) && lay.bounds[first] == start {
		first++ // a band starting exactly at start: not interior
	}
	last := len(lay.bounds)
	if end != "" {
		last = sort.SearchStrings(lay.bounds, end)
	}
	if last < first {
		last = first
	}
	return lay.bounds[first:last], first
}

// queryAxis returns the rows of an answer: start, then the interior
// boundaries of the cells. When there are more than MaxBands, the
// boundaries used by the most cells are kept (ties: the lower key); the
// bands of a dropped boundary are added to the band below it.
func queryAxis(sel []queryColumn, start, end string) []string {
	// Merge the interior boundaries of each run of cells sharing a layout
	// into one sorted list of (key, cells using it): consecutive layouts
	// share most strings, so this is linear in the answer.
	var cur, next []keyUse
	for i := 0; i < len(sel); {
		lay := sel[i].c.lay
		j := i + 1
		for j < len(sel) && sel[j].c.lay == lay {
			j++
		}
		in, _ := interior(lay, start, end)
		next = mergeUses(next[:0], cur, in, j-i)
		cur, next = next, cur
		i = j
	}
	if len(cur) > MaxBands-1 {
		slices.SortStableFunc(cur, func(a, b keyUse) int { return cmp.Compare(b.cells, a.cells) })
		cur = cur[:MaxBands-1]
		slices.SortFunc(cur, func(a, b keyUse) int { return cmp.Compare(a.key, b.key) })
	}
	axis := make([]string, 1, len(cur)+1)
	axis[0] = start
	for _, u := range cur {
		axis = append(axis, u.key)
	}
	return axis
}

// keyUse is a boundary and the number of cells that use it.
type keyUse struct {
	key   string
	cells int
}

// mergeUses appends to dst the union of uses and keys (both ascending),
// counting cells more uses for each of keys.
func mergeUses(dst, uses []keyUse, keys []string, cells int) []keyUse {
	i, j := 0, 0
	for i < len(uses) || j < len(keys) {
		switch {
		case j == len(keys) || i < len(uses) && uses[i].key < keys[j]:
			dst = append(dst, uses[i])
			i++
		case i == len(uses) || keys[j] < uses[i].key:
			dst = append(dst, keyUse{keys[j], cells})
			j++
		default:
			dst = append(dst, keyUse{uses[i].key, uses[i].cells + cells})
			i++
			j++
		}
	}
	return dst
}

// cellShape maps the bands of one layout onto an answer's rows. Runs of
// consecutive cells share a layout (it changes when routes split or merge
// or the merged bands change), so a shape is worked out once per run and
// its cells share one Rows slice.
type cellShape struct {
	lay *layout
	// first is the layout's band holding the query's start.
	first int
	// rows are where the cell's bands start; into[j] is the cell band
	// that the layout's band first+1+j (after interior boundary j) adds to.
	rows []uint32
	into []uint32
}

// shapeOf works out lay's shape; into is reused for the shape's into (a
// shape is used until the next one is worked out, the rows stay).
func shapeOf(lay *layout, axis []string, start, end string, into []uint32) cellShape {
	in, first := interior(lay, start, end)
	sh := cellShape{lay: lay, first: first, rows: make([]uint32, 1, len(in)+1), into: slices.Grow(into[:0], len(in))[:len(in)]}
	k := 1
	for j, b := range in {
		for k < len(axis) && axis[k] < b {
			k++
		}
		if k < len(axis) && axis[k] == b {
			sh.rows = append(sh.rows, uint32(k))
		}
		// A boundary not on the axis (there were more than MaxBands):
		// its band adds to the band below it.
		sh.into[j] = uint32(len(sh.rows) - 1)
	}
	return sh
}

// queryCell projects one (possibly merged) column onto the axis through
// its layout's shape.
func queryCell(s queryColumn, sh *cellShape, m Metric) Cell {
	c := s.c
	vals := c.values(m)
	out := make([]uint64, len(sh.rows))
	out[0] = vals[sh.first]
	for j, into := range sh.into {
		out[into] = saturate.Add(out[into], vals[sh.first+1+j])
	}
	return Cell{StartMs: c.startMs, EndMs: c.endMs, CoveredMs: c.coveredMs, Columns: s.count, Rows: sh.rows, Values: out}
}
