package heatmap

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// history3 is three 1 s columns over routes [, b) [b, d) [d, +inf) with
// reads 1, 2, 3 in the first, ×10 in the second, ×100 in the third.
func history3(t *testing.T) *History {
	cat := newCatalog(t, "b", "d")
	ids := routeIDs(cat)
	h := New()
	for i, f := range []uint64{1, 10, 100} {
		var loads []RouteLoad
		for j, id := range ids {
			loads = append(loads, RouteLoad{RouteID: id, Reads: f * uint64(j+1)})
		}
		h = mustAdd(t, h, ColumnInput{WindowStartMs: uint64(i) * 1000, AtMs: uint64(i+1) * 1000, Catalog: cat, Weights: unitWeights, Loads: loads})
	}
	return h
}

func keysOf(m Matrix) []string {
	var s []string
	for _, k := range m.Keys {
		s = append(s, string(k))
	}
	return s
}

func TestQueryTable(t *testing.T) {
	h := history3(t)
	tests := []struct {
		name   string
		q      Query
		keys   []string
		cells  []uint64 // start ms of each cell
		rows   [][]uint32
		values [][]uint64
	}{
		{"everything", Query{ToMs: 10_000, Metric: MetricReads}, []string{"", "b", "d"}, []uint64{0, 1000, 2000},
			[][]uint32{{0, 1, 2}, {0, 1, 2}, {0, 1, 2}}, [][]uint64{{1, 2, 3}, {10, 20, 30}, {100, 200, 300}}},
		{"time range, ends included", Query{FromMs: 1000, ToMs: 2000, Metric: MetricReads}, []string{"", "b", "d"}, []uint64{1000, 2000},
			[][]uint32{{0, 1, 2}, {0, 1, 2}}, [][]uint64{{10, 20, 30}, {100, 200, 300}}},
		{"a key range cuts bands at its edges", Query{ToMs: 10_000, Start: []byte("a"), End: []byte("c"), Metric: MetricReads},
			[]string{"a", "b"}, []uint64{0, 1000, 2000},
			[][]uint32{{0, 1}, {0, 1}, {0, 1}}, [][]uint64{{1, 2}, {10, 20}, {100, 200}}},
		{"a range inside one band", Query{ToMs: 10_000, Start: []byte("b1"), End: []byte("b2"), Metric: MetricReads},
			[]string{"b1"}, []uint64{0, 1000, 2000},
			[][]uint32{{0}, {0}, {0}}, [][]uint64{{2}, {20}, {200}}},
		{"a range starting at a boundary", Query{ToMs: 10_000, Start: []byte("d"), Metric: MetricReads},
			[]string{"d"}, []uint64{0, 1000, 2000},
			[][]uint32{{0}, {0}, {0}}, [][]uint64{{3}, {30}, {300}}},
		{"cells merged beyond MaxCells", Query{ToMs: 10_000, Metric: MetricReads, MaxCells: 2}, []string{"", "b", "d"}, []uint64{0, 2000},
			[][]uint32{{0, 1, 2}, {0, 1, 2}}, [][]uint64{{11, 22, 33}, {100, 200, 300}}},
		{"no column in range", Query{FromMs: 5000, ToMs: 6000}, []string{""}, nil, nil, nil},
	}
	for _, tc := range tests {
		m, err := h.Query(tc.q)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(keysOf(m), tc.keys) {
			t.Errorf("%s: keys %q, want %q", tc.name, keysOf(m), tc.keys)
		}
		var starts []uint64
		var rows [][]uint32
		var values [][]uint64
		for _, c := range m.Cells {
			starts, rows, values = append(starts, c.StartMs), append(rows, c.Rows), append(values, c.Values)
		}
		if !slices.Equal(starts, tc.cells) || fmt.Sprint(rows) != fmt.Sprint(tc.rows) || fmt.Sprint(values) != fmt.Sprint(tc.values) {
			t.Errorf("%s: cells %v rows %v values %v, want %v %v %v", tc.name, starts, rows, values, tc.cells, tc.rows, tc.values)
		}
	}
}

func TestQueryRefusals(t *testing.T) {
	h := history3(t)
	for _, q := range []Query{
		{FromMs: 2, ToMs: 1},
		{Start: []byte("b"), End: []byte("b")},
		{Start: []byte("c"), End: []byte("b")},
		{Metric: 4},
		{MaxCells: MaxCells + 1},
		{MaxCells: -1},
	} {
		if _, err := h.Query(q); !errors.Is(err, ErrInvalidInput) {
			t.Errorf("%+v: %v, want ErrInvalidInput", q, err)
		}
	}
}

// When the cells' boundaries differ so much that their union passes
// MaxBands, the rows keep the boundaries most cells use and the bands of
// the others are added to the band below.
func TestQueryRowsBounded(t *testing.T) {
	shared := make([]string, 0, 600)
	for i := range 600 {
		shared = append(shared, fmt.Sprintf("s%04d", i))
	}
	own := func(c int) []string {
		b := slices.Clone(shared)
		for i := range 600 {
			b = append(b, fmt.Sprintf("o%d-%04d", c, i))
		}
		slices.Sort(b)
		return b
	}
	h := New()
	for c := range 3 {
		lay := &layout{bounds: own(c)}
		vals := make([]uint64, metrics*lay.bands())
		for j := range lay.bands() {
			vals[int(MetricReads)*lay.bands()+j] = 1
		}
		h.push(&column{startMs: uint64(c) * 10, endMs: uint64(c+1) * 10, coveredMs: 10, lay: lay, vals: vals})
	}
	m, err := h.Query(Query{ToMs: 100, Metric: MetricReads})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Keys) != MaxBands {
		t.Fatalf("%d rows, want %d", len(m.Keys), MaxBands)
	}
	// Every shared boundary (3 cells each) survives; the rest of the rows
	// go to the lowest own boundaries (1 cell each, ties by key).
	for _, s := range shared {
		if _, ok := slices.BinarySearchFunc(m.Keys, s, func(k []byte, s string) int { return strings.Compare(string(k), s) }); !ok {
			t.Fatalf("shared boundary %q dropped", s)
		}
	}
	for i, c := range m.Cells {
		var sum uint64
		for _, v := range c.Values {
			sum += v
		}
		if sum != 1201 {
			t.Fatalf("cell %d sums %d, want its 1201 bands", i, sum)
		}
	}
}
