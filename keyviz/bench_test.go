package keyviz

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"google.golang.org/protobuf/proto"
)

// The Observe benchmarks run beside a plain atomic.AddUint64 baseline in the
// same run: each group starts with a baseline-atomic-add sub-benchmark
// (serially, or with b.RunParallel on one shared word), and every other
// sub-benchmark of the group reports its CPU time per op (cpu-ns/op) and
// that as a multiple of the baseline's (x-atomic-add):
//
//	go test -run '^$' -bench 'Observe' -benchmem -count 5 ./keyviz/
//
// CPU time rather than wall time: on a shared, oversubscribed machine wall
// time per op mostly measures time slicing, CPU time does not. (On a quiet
// machine the two agree for the serial benchmarks.) "unsampled" uses
// SampleRate = MaxSampleRate, so the measured path is the one taken by all
// but one in a million observations (the sampling decision is still made on
// every call); "rate-16" is the default sample rate, with the sampled path's
// cost amortized in.

var sink atomic.Uint64

// cpuNanos is the CPU time (user + system) the process has used.
func cpuNanos() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// baseline measures atomic.AddUint64 on one shared word (from all
// GOMAXPROCS goroutines if parallel) as a sub-benchmark and stores its CPU
// ns/op in *base for the group's ratios.
func baseline(b *testing.B, parallel bool, base *float64) {
	b.Run("baseline-atomic-add", func(b *testing.B) {
		var x uint64
		cpu0 := cpuNanos()
		if parallel {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					atomic.AddUint64(&x, 1)
				}
			})
		} else {
			for b.Loop() {
				atomic.AddUint64(&x, 1)
			}
		}
		*base = float64(cpuNanos()-cpu0) / float64(b.N)
		b.ReportMetric(*base, "cpu-ns/op")
		sink.Store(x)
	})
}

// report adds cpu-ns/op and its ratio to the group's baseline.
func report(b *testing.B, cpu0 int64, base float64) {
	cpu := float64(cpuNanos()-cpu0) / float64(b.N)
	b.ReportMetric(cpu, "cpu-ns/op")
	if base > 0 {
		b.ReportMetric(cpu/base, "x-atomic-add")
	}
}

// benchSampler returns a sampler with a table of n routes [prefix/i, prefix/i+1) whose keys have
// a random 8-byte tail, so a route's keys spread over all its buckets.
func benchSampler(b *testing.B, buckets int, rate uint32, n int) (*Sampler, [][]byte) {
	b.Helper()
	s, err := NewSampler(SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: buckets, WriteWeight: 4, ReadWeight: 1}, SampleRate: rate})
	if err != nil {
		b.Fatal(err)
	}
	routes := make([]*catalog.RouteDescriptor, n)
	for i := range routes {
		routes[i] = &catalog.RouteDescriptor{
			ID:    uint64(i + 1),
			Start: fmt.Appendf(nil, "user/%05d/", i),
			End:   fmt.Appendf(nil, "user/%05d0", i), // '0' = '/'+1: one byte of span
		}
	}
	if err := s.SetRoutes(routes, 1); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user/%05d/%016x", n/2, rng.Uint64())
	}
	return s, keys
}

func BenchmarkObserve(b *testing.B) {
	var base float64
	baseline(b, false, &base)
	for _, tc := range []struct {
		name    string
		buckets int
		rate    uint32
	}{
		{"buckets-1/unsampled", 1, MaxSampleRate},
		{"buckets-16/unsampled", 16, MaxSampleRate},
		{"buckets-1/rate-16", 1, DefaultSampleRate},
		{"buckets-16/rate-16", 16, DefaultSampleRate},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, keys := benchSampler(b, tc.buckets, tc.rate, 1000)
			id := uint64(1000/2 + 1)
			i := 0
			cpu0 := cpuNanos()
			for b.Loop() {
				s.Observe(id, keys[i&1023], i&3 == 0)
				i++
			}
			report(b, cpu0, base)
		})
	}
}

// BenchmarkObserveParallel: every goroutine observes the same route (one
// hot route: the counters are contended, like the baseline's one word) or
// its own route ("spread").
func BenchmarkObserveParallel(b *testing.B) {
	var base float64
	baseline(b, true, &base)
	for _, tc := range []struct {
		name    string
		buckets int
		spread  bool
	}{
		{"buckets-1/same-route", 1, false},
		{"buckets-16/same-route", 16, false},
		{"buckets-1/spread", 1, true},
		{"buckets-16/spread", 16, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, keys := benchSampler(b, tc.buckets, MaxSampleRate, 1000)
			var g atomic.Uint64
			cpu0 := cpuNanos()
			b.RunParallel(func(pb *testing.PB) {
				id := uint64(1000/2 + 1)
				if tc.spread {
					id = g.Add(97)%1000 + 1
				}
				i := 0
				for pb.Next() {
					s.Observe(id, keys[i&1023], i&3 == 0)
					i++
				}
			})
			report(b, cpu0, base)
		})
	}
}

// BenchmarkSpaceSaving feeds a 32-entry sketch from 1024 keys, uniformly
// (nearly every update evicts) or Zipf-skewed (s = 1.1).
//
//	go test -run '^$' -bench 'SpaceSaving' -benchmem ./keyviz/
func BenchmarkSpaceSaving(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	keys := make([][]byte, 1024)
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "user/%05d/%016x", i, rng.Uint64())
	}
	zipf := rand.NewZipf(rand.New(rand.NewPCG(5, 6)), 1.1, 1, uint64(len(keys)-1))
	order := map[string][]int{"uniform": make([]int, 4096), "zipf": make([]int, 4096)}
	for i := range 4096 {
		order["uniform"][i] = rng.IntN(len(keys))
		order["zipf"][i] = int(zipf.Uint64())
	}
	for _, name := range []string{"uniform", "zipf"} {
		b.Run(name, func(b *testing.B) {
			s := newSpaceSaving(DefaultTopK)
			o := order[name]
			i := 0
			cpu0 := cpuNanos()
			for b.Loop() {
				s.add(keys[o[i&4095]], 4, true)
				i++
			}
			b.ReportMetric(float64(cpuNanos()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// bigCatalog is a catalog of n routes with 16-byte random boundaries.
func bigCatalog(b *testing.B, n int) *catalog.Catalog {
	b.Helper()
	rng := rand.New(rand.NewPCG(7, 8))
	keys := make([][]byte, 0, n-1)
	for range n - 1 {
		keys = append(keys, fmt.Appendf(nil, "%016x", rng.Uint64()))
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal)
	c, err := catalog.New(keys, 1)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkSetRoutes is the cost of following one split of a large catalog
// (the whole table is rebuilt; entries of unchanged routes are shared), and
// the table's heap per route (bytes/route, descriptors excluded).
//
//	go test -run '^$' -bench 'SetRoutes' -benchmem ./keyviz/
func BenchmarkSetRoutes(b *testing.B) {
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := bigCatalog(b, n)
			routes := routesOf(c)
			s, err := NewSampler(SamplerConfig{})
			if err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			var m0, m1 runtime.MemStats
			runtime.ReadMemStats(&m0)
			if err := s.SetRoutes(routes, 1); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			runtime.ReadMemStats(&m1)
			perRoute := float64(m1.HeapAlloc-m0.HeapAlloc) / float64(len(routes))
			r := routes[len(routes)/2]
			c2, _, err := c.Split(r.ID, append(slices.Clone(r.Start), 0x80), 1)
			if err != nil {
				b.Fatal(err)
			}
			split := routesOf(c2)
			v := uint64(2)
			for b.Loop() {
				// Alternate between the two versions, split and unsplit.
				if v%2 == 0 {
					err = s.SetRoutes(split, v)
				} else {
					err = s.SetRoutes(routes, v)
				}
				if err != nil {
					b.Fatal(err)
				}
				v++
			}
			b.ReportMetric(perRoute, "bytes/route")
		})
	}
}

// BenchmarkCloseColumn closes a column in which every route of the table
// was observed (the worst case: every block drained, every row built).
//
//	go test -run '^$' -bench 'CloseColumn' -benchmem ./keyviz/
func BenchmarkCloseColumn(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		for _, buckets := range []int{1, 16} {
			b.Run(fmt.Sprintf("routes-%d/buckets-%d", n, buckets), func(b *testing.B) {
				s, keys := benchSampler(b, buckets, DefaultSampleRate, n)
				now := uint64(1_735_689_600_000)
				for b.Loop() {
					b.StopTimer()
					for id := range uint64(n) {
						for j := range 4 {
							s.Observe(id+1, keys[(int(id)*4+j)&1023], j == 0)
						}
					}
					b.StartTimer()
					s.CloseColumn(now)
					now += 1000
				}
			})
		}
	}
}

// BenchmarkCloseColumnSparse closes columns of a table of a million routes
// of which only a thousand were observed: the cost of following a large
// catalog while serving a small part of it.
//
//	go test -run '^$' -bench 'CloseColumnSparse' -benchmem ./keyviz/
func BenchmarkCloseColumnSparse(b *testing.B) {
	c := bigCatalog(b, 1_000_000)
	routes := routesOf(c)
	s, err := NewSampler(SamplerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	if err := s.SetRoutes(routes, 1); err != nil {
		b.Fatal(err)
	}
	now := uint64(1_735_689_600_000)
	for b.Loop() {
		b.StopTimer()
		for i := range 1000 {
			r := routes[i*997%len(routes)]
			s.Observe(r.ID, r.Start, true)
		}
		b.StartTimer()
		s.CloseColumn(now)
		now += 60_000
	}
}

// BenchmarkObserveSize is ObserveSize on one hot route at the default
// 1-in-16 sampling, serially and with b.RunParallel (GOMAXPROCS goroutines on
// the same route), for one hot key (every observation hits the same count
// word) and for keys spread over the route's buckets. Two cores must scale:
// the parallel ns/op (wall time over all goroutines' operations) is reported
// beside the serial one of the same run as x-serial.
//
//	go test -run '^$' -bench 'ObserveSize' -benchmem -count 6 ./keyviz/
func BenchmarkObserveSize(b *testing.B) {
	for _, shape := range []string{"hot-key", "spread-keys"} {
		for _, buckets := range []int{16, 64} {
			var serial float64
			name := fmt.Sprintf("%s/buckets-%d", shape, buckets)
			b.Run(name+"/serial", func(b *testing.B) {
				s, keys, id := observeSizeSampler(b, buckets, shape)
				i := 0
				cpu0 := cpuNanos()
				for b.Loop() {
					s.ObserveSize(id, keys[i&1023], i&3 == 0, uint64(64+i&255))
					i++
				}
				serial = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
				report(b, cpu0, 0)
			})
			b.Run(name+"/parallel", func(b *testing.B) {
				s, keys, id := observeSizeSampler(b, buckets, shape)
				var g atomic.Uint64
				cpu0 := cpuNanos()
				b.RunParallel(func(pb *testing.PB) {
					i := int(g.Add(1) * 509) // each goroutine its own walk over the keys
					for pb.Next() {
						s.ObserveSize(id, keys[i&1023], i&3 == 0, uint64(64+i&255))
						i++
					}
				})
				report(b, cpu0, 0)
				b.ReportMetric(float64(s.Stats().StripedRoutes), "striped")
				if serial > 0 {
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/serial, "x-serial")
				}
			})
		}
	}
}

// BenchmarkObserveSizeStriped is BenchmarkObserveSize's serial run on a
// route striped from its first observation: the striped path's own cost on
// one core. Against it, the parallel runs of BenchmarkObserveSize show what
// the two goroutines still share (their CPU per observation beyond this),
// and against the unstriped serial run, what the striped path itself adds.
//
//	go test -run '^$' -bench 'ObserveSize' -benchmem -count 6 ./keyviz/
func BenchmarkObserveSizeStriped(b *testing.B) {
	for _, shape := range []string{"hot-key", "spread-keys"} {
		for _, buckets := range []int{16, 64} {
			b.Run(fmt.Sprintf("%s/buckets-%d/serial", shape, buckets), func(b *testing.B) {
				s, keys, id := observeSizeSampler(b, buckets, shape)
				s.stripeAll = true
				i := 0
				cpu0 := cpuNanos()
				for b.Loop() {
					s.ObserveSize(id, keys[i&1023], i&3 == 0, uint64(64+i&255))
					i++
				}
				report(b, cpu0, 0)
				b.ReportMetric(float64(s.Stats().StripedRoutes), "striped")
			})
		}
	}
}

// observeSizeSampler returns a default-rate sampler, the keys to observe and
// the hot route's id: the same key 1024 times for "hot-key", keys spread
// over all the route's buckets otherwise.
func observeSizeSampler(b *testing.B, buckets int, shape string) (*Sampler, [][]byte, uint64) {
	s, keys := benchSampler(b, buckets, DefaultSampleRate, 1000)
	id := uint64(1000/2 + 1)
	if e := s.table.Load().lookup(id); e.k != buckets {
		b.Fatalf("hot route has %d buckets, want %d", e.k, buckets)
	}
	if shape == "hot-key" {
		for i := range keys {
			keys[i] = keys[0]
		}
	}
	return s, keys, id
}

// BenchmarkStripeHint compares ways to pick a stripe for a counter add
// without a per-call random number, serially and from all cores at once:
// the sampler's hash of a stack variable's address and a salt moved when a
// probe finds two goroutines on one stripe ("stack-address"), a hint per P
// held in a sync.Pool and moved on a failed compare-and-swap ("pool-hint"),
// and a round-robin ticket from
// one shared padded atomic ("round-robin", itself a contended word);
// "one-word" is the unstriped add they replace.
//
//	go test -run '^$' -bench 'StripeHint' -count 6 ./keyviz/
func BenchmarkStripeHint(b *testing.B) {
	const n = 16
	var ticket struct {
		_ [64]byte
		atomic.Uint64
		_ [56]byte
	}
	hints := sync.Pool{New: func() any { h := int(ticket.Add(1) & 0xff); return &h }}
	cas := func(p *atomic.Uint64) bool {
		v := p.Load()
		return p.CompareAndSwap(v, v+1)
	}
	pick := map[string]func(st *stripeSet){
		"one-word": func(st *stripeSet) { st.c[0].Add(1) },
		"stack-address": func(st *stripeSet) {
			p := &st.c[int(st.pick())*st.words]
			if v := p.Add(1); v%probeEvery == 0 && busy(p, v, probeSpins) {
				st.salt.Add(golden)
			}
		},
		"pool-hint": func(st *stripeSet) {
			h, _ := hints.Get().(*int)
			for !cas(&st.c[(*h&(n-1))*st.words]) {
				*h = (*h + 1) & 0xff
			}
			hints.Put(h)
		},
		"round-robin": func(st *stripeSet) {
			st.c[int(ticket.Add(1)&(n-1))*st.words].Add(1)
		},
	}
	for _, name := range []string{"one-word", "stack-address", "pool-hint", "round-robin"} {
		for _, parallel := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/parallel-%v", name, parallel), func(b *testing.B) {
				st := newStripeSet(n, 1, 0)
				f := pick[name]
				if !parallel {
					for b.Loop() {
						f(st)
					}
					return
				}
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						f(st)
					}
				})
			})
		}
	}
}

// BenchmarkTrimColumn is a reporter's trim of a busy node's column: 10,000
// rows, each with 8 top keys and 32 sampled keys (7.9 MB), down to the
// evidence bound and a 4 MiB report — what every step costs a data node
// whose every route fills its reservoir.
func BenchmarkTrimColumn(b *testing.B) {
	col := &api.ReportColumn{WindowStartMs: 1 << 40, StepMs: 1000, Buckets: 16, WriteWeight: 4, ReadWeight: 1}
	for i := range 10_000 {
		r := &api.ReportRow{RouteId: uint64(i + 1), Writes: uint64(1 + i%50), Buckets: make([]uint64, 16), SampleRate: 16, SampledWrites: 40}
		for j := range 8 {
			r.TopKeys = append(r.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "r%05d-k%02d", i, j), Count: 20, SampledWrites: 5})
		}
		for j := range 32 {
			r.Samples = append(r.Samples, &api.SampledKey{Key: fmt.Appendf(nil, "r%05d-s0%02d", i, j), Writes: 1})
		}
		col.Rows = append(col.Rows, r)
	}
	budget := columnBudget("node-1", api.MaxReportBytes)
	for b.Loop() {
		b.StopTimer()
		c := proto.Clone(col).(*api.ReportColumn)
		b.StartTimer()
		TrimColumn(c, budget)
	}
}
