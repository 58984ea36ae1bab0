package heatmap

import (
	"cmp"
	"math/bits"
	"slices"
	"weak"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Band derivation.
//
// Boundaries. Every route but the first (which starts at the empty key)
// contributes the boundary s = catalog.ShortestSeparator(previous route's
// start, its start): the shortest key above the previous route's start and
// at most its own, a prefix of its start (route [user:0050, user:0050\x00)
// after [user:0049, user:0050) gives "user:0050\x00" and "user:005"). s is
// longer than MaxBoundaryLen only when the two starts share a prefix that
// long, and then no capped key separates them: the boundary is dropped and
// the two routes share a band. So every boundary separates its routes
// exactly, and the runs of routes between boundaries — the atoms of the
// catalog — depend on the catalog only and are computed once per catalog.
//
// Merging. When a catalog has more than MaxBands atoms, adjacent bands are
// merged greedily, one pair at a time, cheapest pair first, until MaxBands
// remain. A pair's cost is, in order: the bit length of its combined
// weighted load (a power-of-two class), the number of routes it would
// hold, its position in key order; a pair the newest column already had
// in one band (its boundary is not in that column's layout) counts one
// class lower. Why this rule: a hot route is never
// merged while a colder pair exists, so hotspots keep their own band (the
// point of the picture), while cold key space coalesces; equal classes
// fall back to the fewest routes, so an idle cluster gets bands of equal
// route counts rather than one giant band; and comparing power-of-two
// classes, with a class of hysteresis for what was merged before, keeps
// the layout still while loads wobble: a merged pair splits again only
// when its load doubles against the others. Without the hysteresis,
// consecutive columns of 10,000 routes with ±30% noise shared 55% of their
// boundaries; with it, 98% (bands do not flicker, and downsampling, which
// keeps only boundaries common to the merged columns, loses little). A
// fresh split's boundary is new to the layout and so counts as merged
// before; a hot split still keeps its bands by class. Equal-load quantiles were
// the alternative: they move every cut on any load change, and a route
// hotter than a quantile still needs the special case this rule has for
// free.

// atoms is the finest banding of one catalog. It is immutable.
type atoms struct {
	// cat is the catalog the atoms were derived from, held weakly: the
	// cache must not keep an old catalog alive. A cache miss only costs a
	// recomputation; the result never depends on it.
	cat weak.Pointer[catalog.Catalog]
	// bounds[i-1] is where atom i starts (atom 0 starts at the empty
	// key); ascending. The strings are shared with earlier derivations and
	// with the columns that use them.
	bounds []string
	// ids maps route ids to atoms, sorted by route id.
	ids []routeAtom
	// routes counts the routes of each atom.
	routes []uint32
}

type routeAtom struct {
	id   uint64
	atom int32
}

// deriveAtoms returns the atoms of cat, reusing prev when it was derived
// from the same catalog and sharing prev's boundary strings otherwise (so
// a boundary stays one allocation for as long as it exists).
func deriveAtoms(cat *catalog.Catalog, prev *atoms) *atoms {
	if prev != nil && prev.cat.Value() == cat {
		return prev
	}
	var old []string
	if prev != nil {
		old = prev.bounds
	}
	a := &atoms{cat: weak.Make(cat), ids: make([]routeAtom, 0, cat.Len())}
	var prevStart []byte
	j := 0
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		if len(a.routes) == 0 {
			a.routes = append(a.routes, 1)
			a.ids = append(a.ids, routeAtom{r.ID, 0})
			prevStart = r.Start
			return true
		}
		s := catalog.ShortestSeparator(prevStart, r.Start)
		prevStart = r.Start
		if len(s) > MaxBoundaryLen {
			last := len(a.routes) - 1
			a.routes[last]++
			a.ids = append(a.ids, routeAtom{r.ID, int32(last)})
			return true
		}
		for j < len(old) && old[j] < string(s) {
			j++
		}
		var b string
		if j < len(old) && old[j] == string(s) {
			b = old[j]
		} else {
			b = string(s)
		}
		a.bounds = append(a.bounds, b)
		a.routes = append(a.routes, 1)
		a.ids = append(a.ids, routeAtom{r.ID, int32(len(a.routes) - 1)})
		return true
	})
	slices.SortFunc(a.ids, func(x, y routeAtom) int { return cmp.Compare(x.id, y.id) })
	return a
}

// deriveBands sums loads (sorted by route id) per atom and merges atoms
// down to at most MaxBands bands, preferring the merges of prev (the
// newest column's layout, nil for none). It returns the interior
// boundaries and the band totals, metric-major (vals[m*bands+j]).
func deriveBands(a *atoms, loads []RouteLoad, w Weights, prev *layout) ([]string, []uint64) {
	n := len(a.routes)
	av := make([][metrics]uint64, n)
	i := 0
	for _, l := range loads {
		for i < len(a.ids) && a.ids[i].id < l.RouteID {
			i++
		}
		if i == len(a.ids) {
			break
		}
		if a.ids[i].id != l.RouteID {
			continue // not a live route: nowhere to draw it
		}
		v := l.values(w)
		t := &av[a.ids[i].atom]
		for m := range metrics {
			t[m] = saturate.Add(t[m], v[m])
		}
	}
	if n <= MaxBands {
		return a.bounds, transpose(av, nil)
	}
	heads := mergeColdest(av, a.routes, mergedBefore(a, prev), MaxBands)
	bounds := make([]string, len(heads)-1)
	for k, h := range heads[1:] {
		bounds[k] = a.bounds[h-1]
	}
	return bounds, transpose(av, heads)
}

// transpose lays per-band totals out metric-major; with heads, only the
// listed bands (merged totals sit at each band's head).
func transpose(av [][metrics]uint64, heads []int32) []uint64 {
	nb := len(av)
	if heads != nil {
		nb = len(heads)
	}
	vals := make([]uint64, metrics*nb)
	for j := range nb {
		src := j
		if heads != nil {
			src = int(heads[j])
		}
		for m := range metrics {
			vals[m*nb+j] = av[src][m]
		}
	}
	return vals
}

// mergedBefore reports, per atom i > 0, whether its boundary is missing
// from prev: the newest column had atoms i-1 and i in one band.
func mergedBefore(a *atoms, prev *layout) []bool {
	merged := make([]bool, len(a.routes))
	if prev == nil {
		return merged
	}
	j := 0
	for i, b := range a.bounds {
		for j < len(prev.bounds) && prev.bounds[j] < b {
			j++
		}
		merged[i+1] = j == len(prev.bounds) || prev.bounds[j] != b
	}
	return merged
}

// mergeColdest merges adjacent bands of av (totals, updated in place at
// each surviving head) until want remain, by the rule in the comment at
// the top of this file, and returns the heads of the surviving bands in
// key order. routes holds the route count of each band, merged whether
// the boundary before each atom was merged away before (neither is
// modified).
func mergeColdest(av [][metrics]uint64, routes []uint32, merged []bool, want int) []int32 {
	n := len(av)
	next := make([]int32, n)
	prev := make([]int32, n)
	cnt := make([]uint64, n)
	ver := make([]uint32, n)
	for i := range n {
		next[i], prev[i] = int32(i+1), int32(i-1)
		cnt[i] = uint64(routes[i])
	}
	next[n-1] = -1
	h := pairHeap{s: make([]pair, 0, 2*n)}
	push := func(l int32) {
		if l < 0 || next[l] < 0 {
			return
		}
		r := next[l]
		class := bits.Len64(saturate.Add(av[l][MetricWeighted], av[r][MetricWeighted]))
		if merged[r] && class > 0 {
			class-- // hysteresis: keep what was merged before
		}
		h.push(pair{key: pairKey(class, cnt[l]+cnt[r]), left: l, right: r, vl: ver[l], vr: ver[r]})
	}
	for i := range n - 1 {
		push(int32(i))
	}
	for left := n; left > want; {
		p := h.pop()
		if next[p.left] != p.right || ver[p.left] != p.vl || ver[p.right] != p.vr {
			continue // stale: a side changed since it was pushed
		}
		l, r := p.left, p.right
		for m := range metrics {
			av[l][m] = saturate.Add(av[l][m], av[r][m])
		}
		cnt[l] += cnt[r]
		ver[l]++
		ver[r]++ // r is gone: every pair naming it is stale
		next[l] = next[r]
		if next[r] >= 0 {
			prev[next[r]] = l
		}
		left--
		push(prev[l])
		push(l)
	}
	heads := make([]int32, 0, want)
	for i := int32(0); i >= 0; i = next[i] {
		heads = append(heads, i)
	}
	return heads
}

// pair is a merge candidate: bands left and right (adjacent, left first)
// as they were at versions vl and vr. key packs the cost: the class in the
// top 8 bits, the route count (below 2^56) under it.
type pair struct {
	key         uint64
	left, right int32
	vl, vr      uint32
}

func pairKey(class int, routes uint64) uint64 { return uint64(class)<<56 | min(routes, 1<<56-1) }

func (a *pair) less(b *pair) bool {
	return a.key < b.key || a.key == b.key && a.left < b.left
}

// pairHeap is a binary min-heap of merge candidates.
type pairHeap struct{ s []pair }

func (h *pairHeap) push(p pair) {
	h.s = append(h.s, p)
	i := len(h.s) - 1
	for i > 0 {
		up := (i - 1) / 2
		if !h.s[i].less(&h.s[up]) {
			break
		}
		h.s[i], h.s[up] = h.s[up], h.s[i]
		i = up
	}
}

func (h *pairHeap) pop() pair {
	s := h.s
	top := s[0]
	last := len(s) - 1
	x := s[last]
	s = s[:last]
	h.s = s
	if last == 0 {
		return top
	}
	// Sift the last element down from the root, moving children up
	// instead of swapping.
	i := 0
	for {
		c := 2*i + 1
		if c >= last {
			break
		}
		if r := c + 1; r < last && s[r].less(&s[c]) {
			c = r
		}
		if !s[c].less(&x) {
			break
		}
		s[i] = s[c]
		i = c
	}
	s[i] = x
	return top
}
