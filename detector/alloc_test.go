package detector

import (
	"fmt"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
)

// spreadCatalog has n routes on keys "k000000"…, so route i+1 is
// [k(i-1), k(i)).
func spreadCatalog(t *testing.T, n int) *catalog.Catalog {
	t.Helper()
	splits := make([]string, n-1)
	for i := range splits {
		splits[i] = fmt.Sprintf("k%06d", i)
	}
	return newCatalog(t, splits...)
}

// observeAllocs counts the allocations of one column with hot rows on
// routes 2, 4, 6, … (counters at counter-1 before it).
func observeAllocs(t *testing.T, c *catalog.Catalog, rows int, counter uint32) float64 {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxAutoRoutes = 1 << 30
	col := Column{WindowStartMs: t0, AtMs: t0 + minute}
	var tracked []Tracked
	for i := range rows {
		id := uint64(2 + 2*i)
		col.Rows = append(col.Rows, writesRow(id, hotWrites))
		if counter > 1 {
			tracked = append(tracked, Tracked{RouteID: id, ConsecutiveOver: counter - 1})
		}
	}
	s, err := NewState(tracked, t0)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Config: cfg, Catalog: c, NowMs: col.AtMs, Enabled: true}
	return testing.AllocsPerRun(20, func() { Observe(in, s, col) })
}

// TestObserveAllocations: a column costs a fixed number of allocations
// for its bookkeeping, whatever the catalog size and however many routes
// only count, plus at most 3 per route that needs a split key.
func TestObserveAllocations(t *testing.T) {
	small, large := spreadCatalog(t, 1_000), spreadCatalog(t, 50_000)
	counting := observeAllocs(t, small, 100, 1)
	if got := observeAllocs(t, large, 100, 1); got != counting {
		t.Errorf("allocations depend on the catalog: %v with 1k routes, %v with 50k", counting, got)
	}
	if got := observeAllocs(t, small, 400, 1); got != counting {
		t.Errorf("counting rows allocate: %v for 100 rows, %v for 400", counting, got)
	}
	if counting > 8 {
		t.Errorf("%v allocations for a column of counting rows", counting)
	}
	for _, rows := range []int{100, 400} {
		eligible := observeAllocs(t, small, rows, 3)
		t.Logf("%d rows: %v allocations counting, %v eligible", rows, observeAllocs(t, small, rows, 1), eligible)
		if limit := counting + 3*float64(rows) + 2; eligible > limit {
			t.Errorf("%d eligible rows: %v allocations, more than %v", rows, eligible, limit)
		}
	}
}
