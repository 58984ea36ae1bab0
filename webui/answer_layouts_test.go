package webui

import (
	"slices"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/heatmap"
)

// Cells name their layout instead of repeating their rows: each run of
// cells dividing the rows alike sends its rows once, and every cell's
// rows and values read back exactly as the history's query answers them
// (nothing the page draws is lost). Routes split midway, so the answer
// has two layouts; a merge back makes a third (the first one again: only
// runs are shared).
func TestHeatmapCellsShareLayouts(t *testing.T) {
	cats := make([]*catalog.Catalog, 3)
	for i, splits := range [][]string{{"m"}, {"g", "m"}, {"m"}} {
		var ks [][]byte
		for _, s := range splits {
			ks = append(ks, []byte(s))
		}
		c, err := catalog.New(ks, 1)
		if err != nil {
			t.Fatal(err)
		}
		cats[i] = c
	}
	const now = 1_700_000_000_000
	h := heatmap.New()
	for i := range uint64(15) {
		cat := cats[i/5]
		var loads []heatmap.RouteLoad
		cat.Ascend(func(r *catalog.RouteDescriptor) bool {
			loads = append(loads, heatmap.RouteLoad{RouteID: r.ID, Reads: 100*r.ID + i, Writes: i})
			return true
		})
		var err error
		start := now - (15-i)*1000
		if h, err = h.AddColumn(heatmap.ColumnInput{WindowStartMs: start, AtMs: start + 1000, Weights: heatmap.Weights{Read: 1, Write: 1},
			Catalog: cat, Loads: loads}); err != nil {
			t.Fatal(err)
		}
	}
	src := &fakeSource{snap: &Snapshot{Read: &api.ReadInfo{ServedBy: "n1"}, NowMs: now, History: h, Catalog: cats[2],
		Config: &api.Config{StepMs: 1000}, Switch: &api.AutoSplitSwitch{}}}
	var a HeatmapAnswer
	getJSON(t, src, "/api/v1/heatmap", &a)
	m, err := h.Query(heatmap.Query{FromMs: a.FromMs, ToMs: a.ToMs})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Cells) != 15 || len(m.Cells) != 15 || len(a.Layouts) != 3 {
		t.Fatalf("%d cells (query: %d), %d layouts %v; want 15 cells in 3 layouts", len(a.Cells), len(m.Cells), len(a.Layouts), a.Layouts)
	}
	for i, c := range m.Cells {
		if !slices.Equal(a.Rows(i), c.Rows) || !slices.Equal(a.Cells[i].Values, c.Values) || a.Cells[i].Layout != i/5 {
			t.Fatalf("cell %d: layout %d rows %v values %v; the query has rows %v values %v", i, a.Cells[i].Layout, a.Rows(i),
				a.Cells[i].Values, c.Rows, c.Values)
		}
	}
	if a.Rows(-1) != nil || a.Rows(15) != nil {
		t.Fatal("Rows of a cell the answer does not have")
	}
}
