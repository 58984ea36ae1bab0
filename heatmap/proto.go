package heatmap

import (
	"fmt"
	"slices"
	"sort"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// ToProto returns the canonical form of h (see api.HeatmapHistory): equal
// histories give equal messages, whatever structure they share. The
// message shares the band totals with h: do not modify it. Its cost is
// dominated by sorting the boundaries of the distinct layouts.
func (h *History) ToProto() *api.HeatmapHistory {
	p := &api.HeatmapHistory{FormatVersion: FormatVersion}
	dict := h.boundaries()
	p.Boundaries = make([][]byte, len(dict))
	for i, b := range dict {
		p.Boundaries[i] = []byte(b)
	}
	top := -1
	for i := range Levels {
		if len(h.levels[i]) > 0 {
			top = i
		}
	}
	for i := 0; i <= top; i++ {
		lv := &api.HeatmapLevel{Columns: make([]*api.HeatmapColumn, len(h.levels[i]))}
		var prev *column
		for j, c := range h.levels[i] {
			pc := &api.HeatmapColumn{StartMs: c.startMs, EndMs: c.endMs, CoveredMs: c.coveredMs,
				Weighted: c.values(MetricWeighted), Reads: c.values(MetricReads),
				Writes: c.values(MetricWrites), Bytes: c.values(MetricBytes)}
			if prev != nil && prev.lay.equal(c.lay) {
				pc.SameBoundaries = true
			} else if len(c.lay.bounds) > 0 {
				pc.BoundaryDeltas = make([]uint32, len(c.lay.bounds))
				last := 0
				for k, b := range c.lay.bounds {
					idx := sort.SearchStrings(dict, b)
					pc.BoundaryDeltas[k] = uint32(idx - last)
					last = idx
				}
			}
			lv.Columns[j] = pc
			prev = c
		}
		p.Levels = append(p.Levels, lv)
	}
	h.marks.ascend(func(m Mark) {
		p.Marks = append(p.Marks, &api.HeatmapMark{AtHlc: m.AtHLC, Kind: m.Kind, SplitOrigin: m.SplitOrigin,
			MergeOrigin: m.MergeOrigin, Keys: m.Keys, KeyLengths: m.KeyLens, RouteId: m.RouteID, OpId: m.OpID})
	})
	return p
}

// boundaries returns every boundary some column uses, ascending, unique:
// the union of the distinct layouts, merged one at a time (consecutive
// layouts share most boundaries, so each merge is linear and cheap).
func (h *History) boundaries() []string {
	var cur, next []string
	seen := make(map[*layout]bool) // lookups only: the output is sorted
	h.ascend(func(c *column, _ int) {
		if seen[c.lay] {
			return
		}
		seen[c.lay] = true
		next = unionSorted(next[:0], cur, c.lay.bounds)
		cur, next = next, cur
	})
	return slices.Clone(cur)
}

// unionSorted appends the union of a and b (both ascending, unique) to
// dst.
func unionSorted(dst, a, b []string) []string {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			dst = append(dst, a[i])
			i++
		case a[i] > b[j]:
			dst = append(dst, b[j])
			j++
		default:
			dst = append(dst, a[i])
			i++
			j++
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...)
}

// FromProto rebuilds a history from its canonical form, validating
// everything: the message is outside bytes (a snapshot file, a peer's
// InstallSnapshot). Errors wrap ErrInvalidHistory and name the field.
// FromProto(h.ToProto()) equals h, and every message it accepts is the
// canonical form of the history it returns.
func FromProto(p *api.HeatmapHistory) (*History, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidHistory}, args...)...)
	}
	if v := p.GetFormatVersion(); v != FormatVersion {
		return nil, bad("format_version: %d, this build reads %d", v, FormatVersion)
	}
	dict := make([]string, len(p.GetBoundaries()))
	for i, b := range p.GetBoundaries() {
		switch {
		case len(b) == 0:
			return nil, bad("boundaries[%d]: empty", i)
		case len(b) > MaxBoundaryLen:
			return nil, bad("boundaries[%d]: %d bytes above %d", i, len(b), MaxBoundaryLen)
		case i > 0 && string(b) <= dict[i-1]:
			return nil, bad("boundaries[%d]: not above boundaries[%d]", i, i-1)
		}
		dict[i] = string(b)
	}
	levels := p.GetLevels()
	if len(levels) > Levels {
		return nil, bad("levels: %d above %d", len(levels), Levels)
	}
	if n := len(levels); n > 0 && len(levels[n-1].GetColumns()) == 0 {
		return nil, bad("levels[%d]: empty last level", n-1)
	}
	h := &History{}
	used := make([]bool, len(dict))
	var prevEnd uint64
	first := true
	for i := len(levels) - 1; i >= 0; i-- {
		cols := levels[i].GetColumns()
		if len(cols) > LevelColumns {
			return nil, bad("levels[%d].columns: %d above %d", i, len(cols), LevelColumns)
		}
		h.levels[i] = make([]*column, len(cols))
		var prev *layout
		for j, pc := range cols {
			at := fmt.Sprintf("levels[%d].columns[%d]", i, j)
			switch {
			case pc.GetStartMs() >= pc.GetEndMs():
				return nil, bad("%s: start_ms %d is not before end_ms %d", at, pc.GetStartMs(), pc.GetEndMs())
			case pc.GetCoveredMs() == 0 || pc.GetCoveredMs() > pc.GetEndMs()-pc.GetStartMs():
				return nil, bad("%s.covered_ms: %d not in [1, %d]", at, pc.GetCoveredMs(), pc.GetEndMs()-pc.GetStartMs())
			case !first && pc.GetStartMs() < prevEnd:
				return nil, bad("%s: start_ms %d is before the end %d of the column before it", at, pc.GetStartMs(), prevEnd)
			}
			first, prevEnd = false, pc.GetEndMs()
			lay, err := decodeLayout(pc, prev, dict, used)
			if err != nil {
				return nil, bad("%s.%v", at, err)
			}
			c := &column{startMs: pc.GetStartMs(), endMs: pc.GetEndMs(), coveredMs: pc.GetCoveredMs(), lay: lay,
				vals: make([]uint64, 0, metrics*lay.bands())}
			for m, vs := range [metrics][]uint64{pc.GetWeighted(), pc.GetReads(), pc.GetWrites(), pc.GetBytes()} {
				if len(vs) != lay.bands() {
					return nil, bad("%s.%s: %d values for %d bands", at, protoMetricField[m], len(vs), lay.bands())
				}
				c.vals = append(c.vals, vs...)
			}
			h.levels[i][j] = c
			prev = lay
		}
	}
	for i, u := range used {
		if !u {
			return nil, bad("boundaries[%d]: used by no column", i)
		}
	}
	oldest, hasColumns := h.oldestStartMs()
	if len(p.GetMarks()) > MaxMarks {
		return nil, bad("marks: %d above %d", len(p.GetMarks()), MaxMarks)
	}
	for i, pm := range p.GetMarks() {
		m := Mark{AtHLC: pm.GetAtHlc(), Kind: pm.GetKind(), SplitOrigin: pm.GetSplitOrigin(), MergeOrigin: pm.GetMergeOrigin(),
			Keys: make([][]byte, len(pm.GetKeys())), KeyLens: slices.Clone(pm.GetKeyLengths()), RouteID: pm.GetRouteId(), OpID: pm.GetOpId()}
		for k, key := range pm.GetKeys() {
			m.Keys[k] = slices.Clone(key)
		}
		if err := checkMark(m, true); err != nil {
			return nil, bad("marks[%d].%v", i, err)
		}
		if last, ok := h.marks.last(); ok && m.AtHLC < last.AtHLC {
			return nil, bad("marks[%d].at_hlc: %d is before the mark before it (%d)", i, m.AtHLC, last.AtHLC)
		}
		if hasColumns && m.AtMs() < oldest {
			return nil, bad("marks[%d].at_hlc: %d ms is before the oldest column (%d ms)", i, m.AtMs(), oldest)
		}
		h.marks = h.marks.append(m)
	}
	h.atoms = &atoms{bounds: dict} // interning aid for the next catalog
	return h, nil
}

var protoMetricField = [metrics]string{"weighted", "reads", "writes", "bytes"}

// decodeLayout reads a column's boundaries, marking the dictionary
// entries it uses.
func decodeLayout(pc *api.HeatmapColumn, prev *layout, dict []string, used []bool) (*layout, error) {
	deltas := pc.GetBoundaryDeltas()
	if pc.GetSameBoundaries() {
		switch {
		case prev == nil:
			return nil, fmt.Errorf("same_boundaries: set on the first column of its level")
		case len(deltas) > 0:
			return nil, fmt.Errorf("boundary_deltas: %d deltas with same_boundaries set", len(deltas))
		}
		return prev, nil
	}
	if len(deltas) > MaxBands-1 {
		return nil, fmt.Errorf("boundary_deltas: %d boundaries above %d", len(deltas), MaxBands-1)
	}
	lay := &layout{bounds: make([]string, len(deltas))}
	idx := uint64(0)
	for k, d := range deltas {
		if k > 0 && d == 0 {
			return nil, fmt.Errorf("boundary_deltas[%d]: 0 (boundaries must ascend)", k)
		}
		idx += uint64(d)
		if idx >= uint64(len(dict)) {
			return nil, fmt.Errorf("boundary_deltas[%d]: index %d beyond the %d boundaries", k, idx, len(dict))
		}
		lay.bounds[k] = dict[idx]
		used[idx] = true
	}
	if prev != nil && prev.equal(lay) {
		return nil, fmt.Errorf("boundary_deltas: the boundaries of the column before it (must be same_boundaries)")
	}
	return lay, nil
}
