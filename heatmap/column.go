package heatmap

import (
	"slices"

	"github.com/hotsplit/hotsplit/internal/saturate"
)

// layout is the band boundaries of one or more columns: interior
// boundaries, ascending (the first band starts at the empty key, the last
// ends at +inf). It is immutable and shared by every column with the same
// boundaries in a row, and its strings are shared with the atoms of the
// catalogs they came from.
type layout struct {
	bounds []string
}

func (l *layout) bands() int { return len(l.bounds) + 1 }

func (l *layout) equal(o *layout) bool { return l == o || slices.Equal(l.bounds, o.bounds) }

// column is the load of a span of time per band. It is immutable.
type column struct {
	// [startMs, endMs) is the span; coveredMs the part of it that committed
	// columns covered (less when columns are missing inside a merged one).
	startMs, endMs, coveredMs uint64
	lay                       *layout
	// vals holds the band totals metric-major: vals[m*bands+j].
	vals []uint64
}

// values returns the totals of one metric, one per band (shared).
func (c *column) values(m Metric) []uint64 {
	nb := c.lay.bands()
	return c.vals[int(m)*nb : (int(m)+1)*nb : (int(m)+1)*nb]
}

// mergeColumns merges consecutive columns (a before b) into one spanning
// both. Its boundaries are those common to both, so every band of a and
// of b lies inside one merged band and the totals add up exactly; a
// boundary only one of them had (a split in between, or a layout that
// moved) is dropped: older history is coarser in keys as well as in time.
func mergeColumns(a, b *column) *column {
	lay := a.lay
	if !a.lay.equal(b.lay) {
		lay = intersect(a.lay, b.lay)
	}
	m := &column{startMs: a.startMs, endMs: b.endMs, coveredMs: a.coveredMs + b.coveredMs, lay: lay,
		vals: make([]uint64, metrics*lay.bands())}
	addInto(m, a)
	addInto(m, b)
	return m
}

// intersect returns the layout of the boundaries both a and b have,
// reusing a or b when it is that already.
func intersect(a, b *layout) *layout {
	var common []string
	i, j := 0, 0
	for i < len(a.bounds) && j < len(b.bounds) {
		switch x, y := a.bounds[i], b.bounds[j]; {
		case x < y:
			i++
		case x > y:
			j++
		default:
			common = append(common, x)
			i++
			j++
		}
	}
	switch len(common) {
	case len(a.bounds):
		return a
	case len(b.bounds):
		return b
	}
	return &layout{bounds: common}
}

// addInto adds the totals of src to dst, whose boundaries are a subset of
// src's: each band of src lies inside one band of dst.
func addInto(dst, src *column) {
	db, sb := dst.lay.bands(), src.lay.bands()
	k := 0
	for j := range sb {
		if j > 0 && k < len(dst.lay.bounds) && src.lay.bounds[j-1] == dst.lay.bounds[k] {
			k++
		}
		for m := range metrics {
			dst.vals[m*db+k] = saturate.Add(dst.vals[m*db+k], src.vals[m*sb+j])
		}
	}
}
