package heatmap

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hotsplit/hotsplit/hlc"
)

func TestBandBoundariesAreCutRouteBoundaries(t *testing.T) {
	long := strings.Repeat("p", 70)
	tests := []struct {
		name   string
		splits []string
		want   []string
	}{
		{"one route", nil, nil},
		{"cut to shortest separators", []string{"user:0049", "user:0050", "user:0050\x00"},
			[]string{"u", "user:005", "user:0050\x00"}},
		{"a boundary extending the previous start stays whole", []string{"a", "a\x00", "b"},
			[]string{"a", "a\x00", "b"}},
		{"a separator of MaxBoundaryLen bytes is kept", []string{long[:MaxBoundaryLen-1] + "1", long[:MaxBoundaryLen-1] + "2"},
			[]string{"p", long[:MaxBoundaryLen-1] + "2"}},
		{"routes not separable within MaxBoundaryLen bytes share a band", []string{long + "1", long + "2", long + "3", "q"},
			[]string{"p", "q"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := deriveAtoms(newCatalog(t, tc.splits...), nil)
			if !slices.Equal(a.bounds, tc.want) {
				t.Fatalf("bounds = %q, want %q", a.bounds, tc.want)
			}
			var routes uint32
			for _, n := range a.routes {
				routes += n
			}
			if int(routes) != len(tc.splits)+1 || len(a.routes) != len(a.bounds)+1 {
				t.Fatalf("atoms hold %d routes in %d atoms for %d bounds, want %d routes", routes, len(a.routes), len(a.bounds), len(tc.splits)+1)
			}
		})
	}
}

func TestBandTotalsPerRoute(t *testing.T) {
	cat := newCatalog(t, "b", "d")
	ids := routeIDs(cat)
	a := deriveAtoms(cat, nil)
	loads := []RouteLoad{
		{RouteID: ids[0], Reads: 10, Writes: 1, ReadBytes: 100, WriteBytes: 7},
		{RouteID: ids[2], Reads: 0, Writes: 5, WriteBytes: 50},
		{RouteID: 999, Reads: 1 << 40}, // not a live route: ignored
	}
	bounds, vals := deriveBands(a, loads, Weights{Read: 1, Write: 3}, nil)
	if !slices.Equal(bounds, []string{"b", "d"}) {
		t.Fatalf("bounds = %q", bounds)
	}
	want := []uint64{
		13, 0, 15, // weighted: 3·1 + 1·10, 0, 3·5
		10, 0, 0, // reads
		1, 0, 5, // writes
		107, 0, 50, // bytes
	}
	if !slices.Equal(vals, want) {
		t.Fatalf("vals = %v, want %v", vals, want)
	}
}

func TestWeightedSaturates(t *testing.T) {
	if got := weighted(1<<63, 1<<63, Weights{Read: 2, Write: 2}); got != ^uint64(0) {
		t.Fatalf("weighted = %d, want saturation", got)
	}
	if got := weighted(3, 4, Weights{Read: 5, Write: 7}); got != 43 {
		t.Fatalf("weighted = %d, want 43", got)
	}
}

// manySplits returns n-1 split keys giving n routes.
func manySplits(n int) []string {
	s := make([]string, n-1)
	for i := range s {
		s[i] = fmt.Sprintf("k%06d", i+1)
	}
	return s
}

func TestMergingKeepsHotRoutesApart(t *testing.T) {
	const n = 3000
	cat := newCatalog(t, manySplits(n)...)
	ids := routeIDs(cat)
	a := deriveAtoms(cat, nil)
	// Every route a little load, three hot ones (one at each edge).
	hot := []int{0, 1234, n - 1}
	var loads []RouteLoad
	for i, id := range ids {
		l := RouteLoad{RouteID: id, Reads: uint64(1 + i%3)}
		if slices.Contains(hot, i) {
			l.Reads = 1 << 30
		}
		loads = append(loads, l)
	}
	bounds, vals := deriveBands(a, loads, unitWeights, nil)
	if len(bounds)+1 != MaxBands {
		t.Fatalf("%d bands, want %d", len(bounds)+1, MaxBands)
	}
	lay := &layout{bounds: bounds}
	c := &column{lay: lay, vals: vals}
	var sum uint64
	for _, v := range c.values(MetricReads) {
		sum += v
	}
	var want uint64
	for _, l := range loads {
		want += l.Reads
	}
	if sum != want {
		t.Fatalf("band reads sum to %d, want %d", sum, want)
	}
	for _, i := range hot {
		// The band holding route i must hold it alone: its value is the
		// hot load exactly.
		band := 0
		if i > 0 {
			band, _ = slices.BinarySearch(bounds, a.bounds[i-1])
			band++
			if bounds[band-1] != a.bounds[i-1] {
				t.Fatalf("hot route %d does not start a band", i)
			}
		}
		if got := c.values(MetricReads)[band]; got != 1<<30 {
			t.Fatalf("hot route %d's band holds %d reads, want it alone (%d)", i, got, 1<<30)
		}
		if i+1 < n && (band == len(bounds) || bounds[band] != a.bounds[i]) {
			t.Fatalf("hot route %d does not end its band", i)
		}
	}
}

func TestMergingIdleCatalogGivesEqualRouteCounts(t *testing.T) {
	for _, n := range []int{1025, 1500, 4096, 10000} {
		cat := newCatalog(t, manySplits(n)...)
		a := deriveAtoms(cat, nil)
		av := make([][metrics]uint64, len(a.routes))
		heads := mergeColdest(av, a.routes, make([]bool, len(a.routes)), MaxBands)
		if len(heads) != MaxBands {
			t.Fatalf("n=%d: %d bands", n, len(heads))
		}
		lo, hi := n, 0
		for j, h := range heads {
			end := int32(n)
			if j+1 < len(heads) {
				end = heads[j+1]
			}
			lo, hi = min(lo, int(end-h)), max(hi, int(end-h))
		}
		// Greedy pairing of the fewest routes cannot balance better than
		// a factor of two between bands.
		if hi > 2*lo {
			t.Fatalf("n=%d: bands of %d to %d routes, want within a factor of 2", n, lo, hi)
		}
	}
}

func TestAtomsShareBoundaryStringsAcrossCatalogs(t *testing.T) {
	c1 := newCatalog(t, "b", "d")
	a1 := deriveAtoms(c1, nil)
	if again := deriveAtoms(c1, a1); again != a1 {
		t.Fatal("the same catalog was derived again")
	}
	c2, _, err := c1.Split(routeIDs(c1)[1], []byte("c"), hlc.Make(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	a2 := deriveAtoms(c2, a1)
	if !slices.Equal(a2.bounds, []string{"b", "c", "d"}) {
		t.Fatalf("bounds = %q", a2.bounds)
	}
	if !sameString(a2.bounds[0], a1.bounds[0]) || !sameString(a2.bounds[2], a1.bounds[1]) {
		t.Fatal("boundaries of the old catalog were copied, not shared")
	}
}

// Loads that wobble by ±30% must not make the bands flicker: consecutive
// columns keep nearly all their boundaries (without the hysteresis for
// what was merged before, about half).
func TestLayoutStableUnderNoise(t *testing.T) {
	w := newWorkload(t, 3000, 5)
	h := w.build(t, New(), 0, 60_000, 80*60_000)
	l := h.levels[0]
	var common, total int
	for i := 1; i < len(l); i++ {
		common += len(intersect(l[i-1].lay, l[i].lay).bounds)
		total += len(l[i].lay.bounds)
	}
	if share := float64(common) / float64(total); share < 0.9 {
		t.Fatalf("consecutive columns share %.0f%% of their boundaries, want at least 90%%", 100*share)
	}
}
