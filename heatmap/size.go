package heatmap

// Size is the memory h retains, in bytes, as the Go allocator would give
// it (each allocation rounded up to a conservative size class): columns
// and their totals, layouts, boundary strings (each distinct boundary
// once), the level and mark indexes, marks and the atom cache. Memory
// shared with older Histories is counted as if h held it alone. It costs
// O(boundaries referenced): for tests, benchmarks and an occasional gauge,
// not for every entry.
func (h *History) Size() int64 {
	const (
		ptr         = 8
		sliceHeader = 24
		strHeader   = 16
		historySize = Levels*sliceHeader + 3*ptr + sliceHeader + 2*8
		columnSize  = 3*8 + ptr + sliceHeader
		layoutSize  = sliceHeader
		markSize    = 8 + 4 + 4 + 4 + 2*sliceHeader + 2*8
	)
	n := alloc(historySize)
	layouts := make(map[*layout]bool)
	keys := make(map[string]bool)
	countKeys := func(bounds []string) {
		for _, b := range bounds {
			if !keys[b] {
				keys[b] = true
				n += alloc(len(b))
			}
		}
	}
	for _, l := range h.levels {
		n += alloc(ptr * len(l))
		for _, c := range l {
			n += alloc(columnSize) + alloc(8*len(c.vals))
			if !layouts[c.lay] {
				layouts[c.lay] = true
				n += alloc(layoutSize) + alloc(strHeader*len(c.lay.bounds))
				countKeys(c.lay.bounds)
			}
		}
	}
	if a := h.atoms; a != nil {
		n += alloc(ptr+3*sliceHeader) + alloc(strHeader*len(a.bounds)) + alloc(16*len(a.ids)) + alloc(4*len(a.routes))
		countKeys(a.bounds)
	}
	n += alloc(sliceHeader * len(h.marks.chunks))
	for _, ch := range h.marks.chunks {
		n += alloc(markSize * len(ch))
		for _, m := range ch {
			n += alloc(sliceHeader*len(m.Keys)) + alloc(4*len(m.KeyLens))
			for _, k := range m.Keys {
				n += alloc(len(k))
			}
		}
	}
	return n
}

// alloc rounds an allocation of n bytes up to at least the size class the
// Go allocator uses: 16-byte steps to 256, powers of two to 32 KiB, 8 KiB
// pages above (the real classes are finer, so this errs high).
func alloc(n int) int64 {
	switch {
	case n == 0:
		return 0
	case n <= 256:
		return int64((n + 15) &^ 15)
	case n <= 32<<10:
		p := 512
		for p < n {
			p <<= 1
		}
		return int64(p)
	default:
		return int64((n + 8<<10 - 1) &^ (8<<10 - 1))
	}
}
