package catalog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
)

// randomKeys returns n uniformly random keys of 16–32 bytes.
func randomKeys(rng *rand.Rand, n int) [][]byte {
	keys := make([][]byte, n)
	for i := range keys {
		k := make([]byte, 16+rng.IntN(17))
		for j := range k {
			k[j] = byte(rng.Uint32())
		}
		keys[i] = k
	}
	return keys
}

var (
	bigOnce    sync.Once
	bigCatalog *Catalog
)

// millionRoutes builds (once per process) a catalog of 1,000,000 routes whose
// boundaries are random 16–32-byte keys.
func millionRoutes(b *testing.B) *Catalog {
	bigOnce.Do(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		keys := randomKeys(rng, 999_999)
		slices.SortFunc(keys, bytes.Compare)
		keys = slices.CompactFunc(keys, bytes.Equal)
		c, err := New(keys, 1)
		if err != nil {
			b.Fatal(err)
		}
		bigCatalog = c
	})
	return bigCatalog
}

// contiguousKeys is randomKeys with all key bytes in one buffer, as a
// request batch would hold them.
func contiguousKeys(rng *rand.Rand, n int) [][]byte {
	buf := make([]byte, 0, n*32)
	keys := make([][]byte, n)
	for i := range keys {
		l := 16 + rng.IntN(17)
		start := len(buf)
		for range l {
			buf = append(buf, byte(rng.Uint32()))
		}
		keys[i] = buf[start:len(buf):len(buf)]
	}
	return keys
}

func BenchmarkLookup1M(b *testing.B) {
	c := millionRoutes(b)
	probes := contiguousKeys(rand.New(rand.NewPCG(3, 4)), 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if c.Lookup(probes[i&(len(probes)-1)]) == nil {
			b.Fatal("no route")
		}
		i++
	}
}

func BenchmarkSplit1M(b *testing.B) {
	c := millionRoutes(b)
	probes := randomKeys(rand.New(rand.NewPCG(5, 6)), 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		// Each split starts from the same 1M-route version, as the FSM
		// does for every entry; the result is dropped.
		k := probes[i&(len(probes)-1)]
		if _, _, err := c.Split(c.Lookup(k).ID, k, 1); err != nil && !bytes.Equal(k, c.Lookup(k).Start) {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkSplitChain1M applies splits one after another, each on the
// previous result, as a long-running FSM does.
func BenchmarkSplitChain1M(b *testing.B) {
	c := millionRoutes(b)
	probes := randomKeys(rand.New(rand.NewPCG(7, 8)), 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := probes[i&(len(probes)-1)]
		if next, _, err := c.Split(c.Lookup(k).ID, k, 1); err == nil {
			c = next
		}
		i++
	}
}

// BenchmarkMerge1M merges a random route with its right neighbour, each
// merge from the same 1M-route version (the start index's delete, its
// rebalancing and the id index's two clears included).
func BenchmarkMerge1M(b *testing.B) {
	c := millionRoutes(b)
	probes := randomKeys(rand.New(rand.NewPCG(11, 12)), 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		l := c.Lookup(probes[i&(len(probes)-1)])
		if l.Unbounded() {
			l = c.Lookup(nil)
		}
		if _, _, err := c.Merge(l.ID, c.Lookup(l.End).ID, 1); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkMergeChain1M applies merges one after another, each on the
// previous result: the tree shrinks as it goes.
func BenchmarkMergeChain1M(b *testing.B) {
	c := millionRoutes(b)
	probes := randomKeys(rand.New(rand.NewPCG(13, 14)), 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		l := c.Lookup(probes[i&(len(probes)-1)])
		if l.Unbounded() {
			l = c.Lookup(nil)
		}
		next, _, err := c.Merge(l.ID, c.Lookup(l.End).ID, 1)
		if err != nil {
			b.Fatal(err)
		}
		c = next
		i++
	}
}

// TestMemoryPerRoute reports heap bytes per route of a 1M-route catalog (run
// with -run MemoryPerRoute -v; skipped with -short).
func TestMemoryPerRoute(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 1M-route catalog")
	}
	const n = 1_000_000
	rng := rand.New(rand.NewPCG(9, 10))
	keys := randomKeys(rng, n-1)
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	keyBytes := 0
	for _, k := range keys {
		keyBytes += len(k)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	c, err := New(keys, 1)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perRoute := float64(after.HeapAlloc-before.HeapAlloc) / float64(c.Len())
	t.Logf("heap per route: %.0f bytes (of which boundary key bytes, shared by neighbours and already allocated: %.1f avg)", perRoute, float64(keyBytes)/float64(len(keys)))
	runtime.KeepAlive(keys)
	runtime.KeepAlive(c)
}

// BenchmarkLookupSizes shows how lookup cost grows with the catalog: flat
// while the index fits in cache, then one memory access per lookup.
func BenchmarkLookupSizes(b *testing.B) {
	for _, n := range []int{1000, 10_000, 100_000, 1_000_000} {
		rng := rand.New(rand.NewPCG(1, 2))
		keys := randomKeys(rng, n-1)
		slices.SortFunc(keys, bytes.Compare)
		keys = slices.CompactFunc(keys, bytes.Equal)
		c, err := New(keys, 1)
		if err != nil {
			b.Fatal(err)
		}
		probes := contiguousKeys(rand.New(rand.NewPCG(3, 4)), 1<<16)
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			i := 0
			for b.Loop() {
				c.Lookup(probes[i&(len(probes)-1)])
				i++
			}
		})
	}
}
