package keyviz

import (
	"bytes"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// TestStripedExactlyOnceConcurrent: goroutines observe one hot route with
// sizes — one key, or keys over all its buckets — while a closer keeps
// closing columns (and changing the bucket count, so that striped entries
// die under their observers): the reads, writes and bytes summed over the
// columns are exactly those observed. "forced" stripes every block when it
// is created, so every column races stripes with its close whatever the
// machine's load; "adaptive" stripes as contention is found.
func TestStripedExactlyOnceConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stripeAll bool
		oneKey    bool
	}{
		{"forced/one-key", true, true},
		{"forced/spread-keys", true, false},
		{"adaptive/one-key", false, true},
		{"adaptive/spread-keys", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat := mustCatalog(t, "m")
			s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 16}, SampleRate: 4, TopK: 8})
			s.stripeAll = tc.stripeAll
			setCatalog(t, s, cat)
			hot := cat.Lookup([]byte("a")).ID
			const workers, perWorker = 4, 20_000
			var wg sync.WaitGroup
			var progress atomic.Uint64 // observations made, in 100s
			done := make(chan struct{})
			for w := range workers {
				wg.Go(func() {
					for i := range perWorker {
						key := []byte("a")
						if !tc.oneKey {
							key = []byte{'a' + byte(i*7+w)%12, byte(i)}
						}
						s.ObserveSize(hot, key, i%3 == 0, uint64(i%5))
						if i%100 == 99 {
							progress.Add(1)
							runtime.Gosched() // let the closer in
						}
					}
				})
			}
			var cols []*api.ReportColumn
			closer := make(chan struct{})
			go func() {
				defer close(closer)
				now := uint64(t0)
				var last uint64
				for i := 0; ; i++ {
					select {
					case <-done:
						cols = append(cols, s.CloseColumn(now))
						return
					default:
					}
					// A column every 1000 observations or so, however the
					// goroutines are scheduled.
					if p := progress.Load(); p < last+10 {
						runtime.Gosched()
						continue
					} else {
						last = p
					}
					if i%4 == 0 {
						if err := s.SetConfig(LoadConfig{StepMs: 1000, Buckets: []int{16, 64}[i%8/4], WriteWeight: 4, ReadWeight: 1}); err != nil {
							panic(err)
						}
					}
					cols = append(cols, s.CloseColumn(now))
					now += 1000
				}
			}()
			wg.Wait()
			close(done)
			<-closer
			var reads, writes, bytes uint64
			for _, col := range cols {
				checkColumn(t, col)
				for _, r := range col.Rows {
					if r.RouteId != hot {
						t.Fatalf("route %d counted, only %d observed", r.RouteId, hot)
					}
					reads += r.Reads
					writes += r.Writes
					bytes += r.ReadBytes + r.WriteBytes
				}
			}
			var wantReads, wantWrites, wantBytes uint64
			for range workers {
				for i := range perWorker {
					if i%3 == 0 {
						wantWrites++
					} else {
						wantReads++
					}
					wantBytes += uint64(i % 5)
				}
			}
			if reads != wantReads || writes != wantWrites || bytes != wantBytes {
				t.Fatalf("counted %d reads, %d writes, %d bytes over %d columns; observed %d, %d, %d",
					reads, writes, bytes, len(cols), wantReads, wantWrites, wantBytes)
			}
			st := s.Stats()
			if st.UnknownRoute != 0 {
				t.Fatalf("stats %+v", st)
			}
			if tc.stripeAll && st.StripedRoutes == 0 {
				t.Fatal("no block was striped")
			}
			nonEmpty := 0
			for _, c := range cols {
				if len(c.Rows) > 0 {
					nonEmpty++
				}
			}
			t.Logf("%d columns (%d with rows), %d striped", len(cols), nonEmpty, st.StripedRoutes)
		})
	}
}

// TestStripedRowsMatchUnstriped: the same observations give the same row
// whether the route's block is striped or not, with stripe hints that
// collide (more goroutines than stripes) or not: the counts, and the sketch,
// whose samples went through the stripes' buffers (and, for a key longer
// than a buffer, around them) and were taken at the close.
func TestStripedRowsMatchUnstriped(t *testing.T) {
	cat := mustCatalog(t, "m")
	run := func(stripeAll bool, workers int) *api.ReportRow {
		s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 8, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1, TopK: 64})
		s.stripeAll = stripeAll
		setCatalog(t, s, cat)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := w; i < 4000; i += workers {
					key := fmt.Appendf(nil, "%c%d", 'a'+i%12, i%5)
					if i%50 == 0 { // longer than a stripe's sample buffer
						key = bytes.Repeat([]byte("L"), sampleBufBytes+1)
					}
					s.ObserveSize(1, key, i%3 == 0, uint64(i%7))
				}
			})
		}
		wg.Wait()
		col := s.CloseColumn(t0)
		checkColumn(t, col)
		if len(col.Rows) != 1 {
			t.Fatalf("rows %v", col.Rows)
		}
		return col.Rows[0]
	}
	want := run(false, 1)
	for _, workers := range []int{1, 2, 8} {
		got := run(true, workers)
		if got.Reads != want.Reads || got.Writes != want.Writes || got.ReadBytes != want.ReadBytes ||
			got.WriteBytes != want.WriteBytes || fmt.Sprint(got.Buckets) != fmt.Sprint(want.Buckets) ||
			got.SampledReads != want.SampledReads || got.SampledWrites != want.SampledWrites {
			t.Fatalf("%d workers, striped: %v\nunstriped: %v", workers, got, want)
		}
		// Rate 1 and fewer keys than the capacity: the sketches are exact
		// and so equal.
		if fmt.Sprint(got.TopKeys) != fmt.Sprint(want.TopKeys) {
			t.Fatalf("%d workers: top keys %v, want %v", workers, got.TopKeys, want.TopKeys)
		}
	}
}

// TestStripeCap: at most maxStripedRoutes blocks are striped per column,
// and the cap is per column.
func TestStripeCap(t *testing.T) {
	splits := make([]string, 2*maxStripedRoutes-1)
	for i := range splits {
		splits[i] = fmt.Sprintf("k%04d", i)
	}
	cat := mustCatalog(t, splits...)
	s := newTestSampler(t, SamplerConfig{})
	s.stripeAll = true
	setCatalog(t, s, cat)
	rs := routesOf(cat)
	for col := range 2 {
		for _, r := range rs {
			s.Observe(r.ID, r.Start, true)
		}
		striped := 0
		for _, r := range rs {
			if st := s.table.Load().lookup(r.ID).blk.Load().hot.Load(); st != nil {
				striped++
				if n := int(st.mask) + 1; n != stripeCount() || len(st.c) != n*st.words || st.words%stripeAlign != 0 {
					t.Fatalf("%d stripes of %d words in %d", n, st.words, len(st.c))
				}
			}
		}
		if striped != maxStripedRoutes {
			t.Fatalf("column %d: %d of %d routes striped, want the cap %d", col, striped, len(rs), maxStripedRoutes)
		}
		if c := s.CloseColumn(t0 + uint64(col)*60_000); len(c.Rows) != len(rs) {
			t.Fatalf("%d rows, want %d", len(c.Rows), len(rs))
		}
	}
	if st := s.Stats(); st.StripedRoutes != 2*maxStripedRoutes {
		t.Fatalf("stats %+v, want %d striped", st, 2*maxStripedRoutes)
	}
}

// TestStripeOnBusyProbe: a goroutine alone never stripes its route, however
// hot; a probe that sees another core add to the word stripes the block,
// and the next column starts unstriped; a closed block is never striped.
// The probe here polls for as long as it takes the other goroutine to run
// (the default polls for about a microsecond), so that the test does not
// depend on the machine's load.
func TestStripeOnBusyProbe(t *testing.T) {
	s := newTestSampler(t, SamplerConfig{SampleRate: 1})
	setCatalog(t, s, mustCatalog(t))
	for range 10 * probeEvery {
		s.ObserveSize(1, []byte("k"), true, 10)
	}
	e := s.table.Load().lookup(1)
	b := e.blk.Load()
	if b.hot.Load() != nil || s.Stats().StripedRoutes != 0 {
		t.Fatal("one goroutine striped its route")
	}

	// The observation whose add brings the word to a multiple of
	// probeEvery polls it while another goroutine, waiting for that
	// multiple, adds to it once.
	s.probeSpins = math.MaxInt
	p := &b.c[e.word([]byte("k"), true)]
	want := uint64(10 * probeEvery)
	for p.Load()%probeEvery != probeEvery-1 {
		s.ObserveSize(1, []byte("k"), true, 10)
		want++
	}
	other := make(chan struct{})
	go func() {
		defer close(other)
		for p.Load()%probeEvery != 0 {
			runtime.Gosched()
		}
		p.Add(1) // an observation of another core, without bytes
	}()
	s.ObserveSize(1, []byte("k"), true, 10)
	want++
	<-other
	if b.hot.Load() == nil || s.Stats().StripedRoutes != 1 {
		t.Fatal("a busy probe did not stripe the block")
	}
	s.ObserveSize(1, []byte("k"), true, 10) // into a stripe
	want++
	if r := s.CloseColumn(t0).Rows[0]; r.Writes != want+1 || r.WriteBytes != 10*want {
		t.Fatalf("row %v, want %d writes and %d bytes", r, want+1, 10*want)
	}
	s.Observe(1, []byte("k"), true)
	if s.table.Load().lookup(1).blk.Load().hot.Load() != nil {
		t.Fatal("the next column's block starts striped")
	}
	s.stripe(e, b)
	if b.hot.Load() != sealedStripes {
		t.Fatal("a closed block was striped")
	}
}

// busy sees a word change that another goroutine makes, and never one that
// nobody makes.
func TestBusyProbe(t *testing.T) {
	var w atomic.Uint64
	if busy(&w, 0, probeSpins) {
		t.Fatal("busy on a word nobody touches")
	}
	v := w.Load()
	go w.Add(1)
	if !busy(&w, v, math.MaxInt) {
		t.Fatal("a probe never saw the word change")
	}
}

// TestObserveDoesNotAllocate: once a column's block and sketch exist, no
// observation allocates — unsampled, sampled or striped, with sizes or not.
func TestObserveDoesNotAllocate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		rate    uint32
		striped bool
	}{
		{"unsampled", MaxSampleRate, false},
		{"every-one-sampled", 1, false},
		{"striped/unsampled", MaxSampleRate, true},
		{"striped/every-one-sampled", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 16}, SampleRate: tc.rate})
			s.stripeAll = tc.striped
			setCatalog(t, s, mustCatalog(t))
			keys := [][]byte{[]byte("alpha"), []byte("beta"), []byte("gamma"), []byte("delta")}
			for i := range 1000 { // warm up: block, sketch and reservoir
				s.ObserveSize(1, keys[i%4], i%2 == 0, 8)
			}
			if got := s.table.Load().lookup(1).blk.Load().hot.Load() != nil; got != tc.striped {
				t.Fatalf("striped %v", got)
			}
			i := 0
			if n := testing.AllocsPerRun(1000, func() {
				s.ObserveSize(1, keys[i%4], i%2 == 0, 8)
				s.Observe(1, keys[(i+1)%4], i%3 == 0)
				i++
			}); n != 0 {
				t.Fatalf("%v allocations per observation pair", n)
			}
		})
	}
}

// A stripe pick is always a stripe of the set, whatever the salt (a set of
// one stripe, like the sealed sentinel, always picks stripe 0).
func TestStripePick(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := 1 << rapid.IntRange(1, 4).Draw(t, "log2 stripes")
		st := newStripeSet(n, blockWords(16), rapid.Uint64().Draw(t, "salt"))
		if i := st.pick(); i >= uint64(n) {
			t.Fatalf("stripe %d of %d", i, n)
		}
		if i := newStripeSet(1, maxBlockWords, rapid.Uint64().Draw(t, "salt of one")).pick(); i != 0 || sealedStripes.pick() != 0 {
			t.Fatalf("a set of one stripe: stripe %d", i)
		}
	})
}

// Stripes and their sample buffers are padded to 128-byte line pairs.
func TestStripeLayout(t *testing.T) {
	if n := unsafe.Sizeof(sampleBuf{}); n%128 != 0 {
		t.Fatalf("sampleBuf is %d bytes", n)
	}
	for _, k := range []int{1, 16, 64, maxBuckets} {
		st := newStripeSet(4, blockWords(k), 0)
		if st.words%stripeAlign != 0 || st.words < blockWords(k) || uintptr(unsafe.Pointer(&st.c[0]))%128 != 0 {
			t.Fatalf("%d buckets: stripes of %d words at %p", k, st.words, &st.c[0])
		}
	}
}
