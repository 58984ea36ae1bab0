package heatmap

import (
	"errors"
	"slices"
	"testing"

	"github.com/hotsplit/hotsplit/hlc"
)

// addSteps adds n columns of stepMs each from startMs on, each with load
// reads on every route of cat.
func addSteps(t tb, h *History, n int, startMs, stepMs uint64, in ColumnInput) *History {
	t.Helper()
	ids := routeIDs(in.Catalog)
	for i := range n {
		in.WindowStartMs = startMs + uint64(i)*stepMs
		in.AtMs = in.WindowStartMs + stepMs
		in.Loads = in.Loads[:0]
		for _, id := range ids {
			in.Loads = append(in.Loads, RouteLoad{RouteID: id, Reads: 1, Writes: 2, ReadBytes: 3, WriteBytes: 4})
		}
		h = mustAdd(t, h, in)
	}
	return h
}

func levelSizes(h *History) []int {
	var s []int
	for _, l := range h.levels {
		s = append(s, len(l))
	}
	return s
}

func TestDownsamplingRule(t *testing.T) {
	cat := newCatalog(t, "m")
	tests := []struct {
		columns int
		want    []int
	}{
		{1, []int{1, 0, 0, 0}},
		{LevelColumns, []int{256, 0, 0, 0}},
		{LevelColumns + 1, []int{255, 1, 0, 0}},          // two oldest merged into level 1
		{LevelColumns + 2, []int{256, 1, 0, 0}},          // no overflow
		{LevelColumns + 3, []int{255, 2, 0, 0}},          // and again
		{3 * LevelColumns, []int{256, 256, 0, 0}},        // 256 + 2·256
		{3*LevelColumns + 1, []int{255, 255, 1, 0}},      // level 1 overflowed too
		{15 * LevelColumns, []int{256, 256, 256, 256}},   // full: 256·(1+2+4+8)
		{15*LevelColumns + 1, []int{255, 255, 255, 256}}, // the oldest level-3 column dropped
		// Once full, levels 0-2 hold 255 + the bits of a counter that
		// starts at 7 and counts columns: (7 + 100) mod 8 = 0b011.
		{15*LevelColumns + 100, []int{256, 256, 255, 256}},
	}
	for _, tc := range tests {
		h := addSteps(t, New(), tc.columns, 1_000_000, 1000, ColumnInput{Catalog: cat, Weights: unitWeights})
		if got := levelSizes(h); !slices.Equal(got, tc.want) {
			t.Errorf("%d columns: levels %v, want %v", tc.columns, got, tc.want)
		}
		if h.Columns() > MaxColumns {
			t.Errorf("%d columns kept", h.Columns())
		}
		// Every level-i column sums 2^i committed columns of 1000 ms, and
		// the columns tile time without overlap, newest last.
		var prevEnd uint64
		h.ascend(func(c *column, level int) {
			if c.coveredMs != 1000<<level || c.endMs-c.startMs != 1000<<level {
				t.Fatalf("%d columns: level %d column covers %d ms over %d", tc.columns, level, c.coveredMs, c.endMs-c.startMs)
			}
			if prevEnd != 0 && c.startMs != prevEnd {
				t.Fatalf("%d columns: column at %d after one ending %d", tc.columns, c.startMs, prevEnd)
			}
			prevEnd = c.endMs
			if got := c.values(MetricReads)[0]; got != 1<<level {
				t.Fatalf("%d columns: level %d column holds %d reads in band 0, want %d", tc.columns, level, got, 1<<level)
			}
		})
		if _, to, _ := h.Span(); to != 1_000_000+uint64(tc.columns)*1000 {
			t.Errorf("%d columns: span ends %d", tc.columns, to)
		}
	}
}

func TestStepChangeMidHistory(t *testing.T) {
	cat := newCatalog(t, "m")
	in := ColumnInput{Catalog: cat, Weights: unitWeights}
	h := addSteps(t, New(), LevelColumns-1, 0, 60_000, in)
	// The new step takes effect at a common multiple of both steps.
	at := uint64(LevelColumns-1) * 60_000
	h = addSteps(t, h, 4, at, 1000, in)
	if h.NewestStepMs() != 1000 {
		t.Fatalf("newest step %d", h.NewestStepMs())
	}
	// 259 columns: the two oldest 60 s columns merged, the rest as they were.
	if got := levelSizes(h); !slices.Equal(got, []int{255, 2, 0, 0}) {
		t.Fatalf("levels %v", got)
	}
	if c := h.levels[0][len(h.levels[0])-5]; c.endMs-c.startMs != 60_000 || c.endMs != at {
		t.Fatalf("last 60 s column spans [%d, %d)", c.startMs, c.endMs)
	}
	if tot := h.totals(); tot[MetricReads] != 2*(LevelColumns-1+4) {
		t.Fatalf("reads total %d", tot[MetricReads])
	}
	// A gap leaves the span wider than the covered time once merged.
	h2 := addSteps(t, New(), 1, 0, 1000, in)
	h2 = addSteps(t, h2, LevelColumns, 5000, 1000, in)
	c := h2.levels[1][0]
	if c.startMs != 0 || c.endMs != 6000 || c.coveredMs != 2000 {
		t.Fatalf("merged across a gap: [%d, %d) covering %d", c.startMs, c.endMs, c.coveredMs)
	}
}

func TestAddColumnRefusals(t *testing.T) {
	cat := newCatalog(t, "m")
	h := addSteps(t, New(), 2, 10_000, 1000, ColumnInput{Catalog: cat, Weights: unitWeights})
	tests := []struct {
		name string
		in   ColumnInput
		err  error
	}{
		{"no catalog", ColumnInput{WindowStartMs: 12_000, AtMs: 13_000}, ErrInvalidInput},
		{"empty window", ColumnInput{Catalog: cat, WindowStartMs: 13_000, AtMs: 13_000}, ErrInvalidInput},
		{"overlaps the newest", ColumnInput{Catalog: cat, WindowStartMs: 11_500, AtMs: 12_500}, ErrStale},
		{"duplicate route", ColumnInput{Catalog: cat, WindowStartMs: 12_000, AtMs: 13_000,
			Loads: []RouteLoad{{RouteID: 1}, {RouteID: 1}}}, ErrInvalidInput},
	}
	for _, tc := range tests {
		if _, err := h.AddColumn(tc.in); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if h.Columns() != 2 {
		t.Fatal("a refused column changed the history")
	}
}

func TestLayoutSharedWhileBoundariesHold(t *testing.T) {
	cat := newCatalog(t, "b", "d")
	h := addSteps(t, New(), 3, 0, 1000, ColumnInput{Catalog: cat, Weights: unitWeights})
	l := h.levels[0]
	if l[0].lay != l[1].lay || l[1].lay != l[2].lay {
		t.Fatal("columns of one catalog do not share their layout")
	}
	split, _, err := cat.Split(routeIDs(cat)[1], []byte("c"), hlc.Make(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	h = addSteps(t, h, 1, 3000, 1000, ColumnInput{Catalog: split, Weights: unitWeights})
	last := h.levels[0][3]
	if !slices.Equal(last.lay.bounds, []string{"b", "c", "d"}) {
		t.Fatalf("after the split: %q", last.lay.bounds)
	}
	if !sameString(last.lay.bounds[0], l[0].lay.bounds[0]) {
		t.Fatal("a boundary that survived the split was copied")
	}
}

func TestMergedColumnKeepsCommonBoundaries(t *testing.T) {
	a := &column{startMs: 0, endMs: 10, coveredMs: 10, lay: &layout{bounds: []string{"b", "d"}},
		vals: []uint64{1, 2, 3, 10, 20, 30, 100, 200, 300, 7, 8, 9}}
	b := &column{startMs: 10, endMs: 20, coveredMs: 10, lay: &layout{bounds: []string{"b", "c", "d"}},
		vals: []uint64{1, 1, 1, 1, 0, 0, 0, 0, 5, 5, 5, 5, 0, 0, 0, 1}}
	m := mergeColumns(a, b)
	if m.lay != a.lay {
		t.Fatalf("merged layout %q, want a's own (a subset of b's)", m.lay.bounds)
	}
	want := []uint64{2, 4, 4, 10, 20, 30, 105, 210, 305, 7, 8, 10}
	if !slices.Equal(m.vals, want) || m.startMs != 0 || m.endMs != 20 || m.coveredMs != 20 {
		t.Fatalf("merged %v [%d,%d) %d, want %v", m.vals, m.startMs, m.endMs, m.coveredMs, want)
	}
	c := &column{startMs: 20, endMs: 30, coveredMs: 10, lay: &layout{bounds: []string{"a", "c"}},
		vals: make([]uint64, 12)}
	if got := mergeColumns(b, c).lay.bounds; !slices.Equal(got, []string{"c"}) {
		t.Fatalf("intersection %q, want [c]", got)
	}
}

func TestOldVersionsUnchanged(t *testing.T) {
	cat := newCatalog(t, "m")
	in := ColumnInput{Catalog: cat, Weights: unitWeights}
	h := addSteps(t, New(), LevelColumns, 0, 1000, in)
	before := h.ToProto()
	h2 := addSteps(t, h, 3, uint64(LevelColumns)*1000, 1000, in)
	h2, err := h2.AddMark(Mark{AtHLC: hlc.Make(300_000, 0), Kind: splitKind, Keys: [][]byte{[]byte("x")}})
	if err != nil {
		t.Fatal(err)
	}
	if !protoEqual(h.ToProto(), before) {
		t.Fatal("adding to a history changed the old version")
	}
	if h2.Columns() != LevelColumns+1 || h2.MarkCount() != 1 {
		t.Fatalf("new version: %d columns, %d marks", h2.Columns(), h2.MarkCount())
	}
}
