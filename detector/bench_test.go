package detector

import (
	"bytes"
	"cmp"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
)

// The benchmark catalogs: 1,000,000 routes whose boundaries are uniformly
// random 16–32-byte keys, and 100,000 routes on every tenth of those keys.
// Built once per process.
var (
	benchOnce          sync.Once
	bench100k, bench1M *catalog.Catalog
)

func benchCatalogs(b *testing.B) (c100k, c1M *catalog.Catalog) {
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		keys := make([][]byte, 999_999)
		for i := range keys {
			k := make([]byte, 16+rng.IntN(17))
			for j := range k {
				k[j] = byte(rng.Uint32())
			}
			keys[i] = k
		}
		slices.SortFunc(keys, bytes.Compare)
		keys = slices.CompactFunc(keys, bytes.Equal)
		var err error
		if bench1M, err = catalog.New(keys, 1); err != nil {
			b.Fatal(err)
		}
		tenth := make([][]byte, 0, len(keys)/10)
		for i := 9; i < len(keys); i += 10 {
			tenth = append(tenth, keys[i])
		}
		if bench100k, err = catalog.New(tenth, 1); err != nil {
			b.Fatal(err)
		}
	})
	return bench100k, bench1M
}

// benchConfig is the default config with the route cap raised so that it
// never short-circuits the work.
func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.MaxAutoRoutes = 1 << 31
	return cfg
}

// hotColumn builds one 60 s column with n hot rows on distinct random
// routes of c: 16 buckets (the routes' layout) and 8 top-K entries each.
// Half the rows have one dominant key (isolation), half spread their load
// (top-K share too small, so the sub-bucket median). It also returns a
// state in which every one of those routes has been hot for
// CandidateWindows-1 columns, so the column makes all n eligible: the
// detector's worst case, a split key for every row.
func hotColumn(b *testing.B, c *catalog.Catalog, n int) (Column, *State) {
	rng := rand.New(rand.NewPCG(3, uint64(n)))
	cfg := benchConfig()
	ids := make(map[uint64]bool, n)
	for len(ids) < n {
		ids[1+rng.Uint64N(uint64(c.Len()))] = true
	}
	col := Column{WindowStartMs: t0, AtMs: t0 + minute}
	tracked := make([]Tracked, 0, n)
	for id := range ids {
		r, _ := c.Route(id)
		row := Row{RouteID: id, Writes: 15_000 + rng.Uint64N(10_000), Reads: rng.Uint64N(5_000)}
		total := row.Writes*4 + row.Reads
		if catalog.NewLayout(r.Start, r.End, 16).K() != 16 {
			b.Fatalf("route %v has a narrow layout", r)
		}
		row.Buckets = make([]uint64, 16)
		for i := range row.Buckets {
			row.Buckets[i] = rng.Uint64N(total / 8)
		}
		dominant := len(col.Rows)%2 == 0
		for i := range 8 {
			key := append(bytes.Clone(r.Start), byte(rng.Uint32()), byte(rng.Uint32()))
			lower := total/64 + rng.Uint64N(total/64)
			if dominant && i == 0 {
				lower = total * 9 / 10
			}
			row.TopKeys = append(row.TopKeys, KeyEstimate{Key: key, Lower: lower, Upper: lower + total/100})
		}
		col.Rows = append(col.Rows, row)
		tracked = append(tracked, Tracked{RouteID: id, ConsecutiveOver: cfg.CandidateWindows - 1})
	}
	slices.SortFunc(tracked, func(x, y Tracked) int { return cmp.Compare(x.RouteID, y.RouteID) })
	// Reporters send rows in no particular order.
	rng.Shuffle(len(col.Rows), func(i, j int) { col.Rows[i], col.Rows[j] = col.Rows[j], col.Rows[i] })
	s, err := NewState(tracked, t0)
	if err != nil {
		b.Fatal(err)
	}
	return col, s
}

var scanSink uint64

// scanRows is the baseline: one plain pass over the same rows, summing
// every count the detector reads.
func scanRows(col Column) uint64 {
	var sum uint64
	for i := range col.Rows {
		r := &col.Rows[i]
		sum += r.Reads + r.Writes
		for _, v := range r.Buckets {
			sum += v
		}
		for _, e := range r.TopKeys {
			sum += e.Lower + e.Upper + uint64(len(e.Key))
		}
	}
	return sum
}

func benchObserve(b *testing.B, c *catalog.Catalog, hotRows int) {
	col, s := hotColumn(b, c, hotRows)
	in := Input{Config: benchConfig(), Catalog: c, NowMs: col.AtMs, Enabled: true, NextOpID: 1}
	next, plans := Observe(in, s, col)
	if len(plans) != 1 || next.Len() != hotRows {
		b.Fatalf("%d plans, %d tracked; want 1 and %d", len(plans), next.Len(), hotRows)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Observe(in, s, col)
	}
}

func benchScan(b *testing.B, c *catalog.Catalog, hotRows int) {
	col, _ := hotColumn(b, c, hotRows)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		scanSink += scanRows(col)
	}
}

// BenchmarkObserve100k: one column over 100k live routes with 1k hot rows,
// all eligible (target <= 5 ms); BenchmarkScan100k is the plain scan of
// the same rows.
func BenchmarkObserve100k(b *testing.B) {
	c, _ := benchCatalogs(b)
	benchObserve(b, c, 1_000)
}

func BenchmarkScan100k(b *testing.B) {
	c, _ := benchCatalogs(b)
	benchScan(b, c, 1_000)
}

// BenchmarkObserve1M: one column over 1M live routes with 10k hot rows.
func BenchmarkObserve1M(b *testing.B) {
	_, c := benchCatalogs(b)
	benchObserve(b, c, 10_000)
}

func BenchmarkScan1M(b *testing.B) {
	_, c := benchCatalogs(b)
	benchScan(b, c, 10_000)
}

// BenchmarkObserve1MSameRowsAs100k: the 100k benchmark's row count over
// the 1M catalog, to show the cost follows the rows, not the catalog.
func BenchmarkObserve1MSameRowsAs100k(b *testing.B) {
	_, c := benchCatalogs(b)
	benchObserve(b, c, 1_000)
}
