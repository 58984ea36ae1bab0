package hlc

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// fakeSource is a settable physical clock for deterministic tests.
type fakeSource struct{ ms atomic.Int64 }

func (f *fakeSource) now() int64 { return f.ms.Load() }

func TestLayout(t *testing.T) {
	ts := Make(1234, 7)
	if Physical(ts) != 1234 || Logical(ts) != 7 {
		t.Fatalf("Make(1234,7) = %d: physical %d logical %d", ts, Physical(ts), Logical(ts))
	}
	if got := Format(ts); got != "1234.7" {
		t.Fatalf("Format = %q", got)
	}
}

func TestNextConcurrentStrictlyIncreasingUnique(t *testing.T) {
	const goroutines, perG = 8, 100_000
	n := perG
	c := New(nil)
	results := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := make([]uint64, n)
			for i := range out {
				out[i] = c.Next()
			}
			results[g] = out
		}()
	}
	wg.Wait()
	seen := make(map[uint64]struct{}, goroutines*n)
	for g, out := range results {
		for i, v := range out {
			if i > 0 && v <= out[i-1] {
				t.Fatalf("goroutine %d: value %d at %d not above previous %d", g, v, i, out[i-1])
			}
			if _, dup := seen[v]; dup {
				t.Fatalf("duplicate timestamp %d", v)
			}
			seen[v] = struct{}{}
		}
	}
}

func TestLogicalOverflowCarriesIntoPhysical(t *testing.T) {
	var src fakeSource
	src.ms.Store(1000)
	c := New(src.now)
	var prev uint64
	for i := 0; i < 1<<LogicalBits+10; i++ {
		v := c.Next()
		if v <= prev {
			t.Fatalf("step %d: %s not above %s", i, Format(v), Format(prev))
		}
		prev = v
	}
	// 65536 values fit in ms 1000 (logical 0..65535); the rest carried into 1001.
	if Physical(prev) != 1001 || Logical(prev) != 9 {
		t.Fatalf("after overflow got %s, want 1001.9", Format(prev))
	}
	// The wall clock catching up does not repeat values.
	src.ms.Store(1001)
	if v := c.Next(); v != prev+1 {
		t.Fatalf("after catch-up got %s, want %s", Format(v), Format(prev+1))
	}
}

func TestNextFencedRespectsCeilingThroughOverflow(t *testing.T) {
	var src fakeSource
	src.ms.Store(500)
	c := New(src.now)
	if _, err := c.NextFenced(); !errors.Is(err, ErrCeilingExpired) {
		t.Fatalf("no ceiling: err = %v, want ErrCeilingExpired", err)
	}
	c.SetCeiling(501)
	issued := 0
	for {
		v, err := c.NextFenced()
		if errors.Is(err, ErrCeilingExpired) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if Physical(v) >= 501 {
			t.Fatalf("issued %s at or past ceiling 501", Format(v))
		}
		issued++
	}
	if issued != 1<<LogicalBits {
		t.Fatalf("issued %d values in ms 500, want %d", issued, 1<<LogicalBits)
	}
	// Next is not fenced and continues past the ceiling.
	if v := c.Next(); Physical(v) != 501 {
		t.Fatalf("Next after exhaustion = %s, want physical 501", Format(v))
	}
}

func TestBatch(t *testing.T) {
	var src fakeSource
	src.ms.Store(10)
	c := New(src.now)
	c.SetCeiling(12)
	first, err := c.NextFencedBatch(100)
	if err != nil {
		t.Fatal(err)
	}
	if next := c.Next(); next != first+100 {
		t.Fatalf("after batch [%d,+100) Next = %d, want %d", first, next, first+100)
	}
	// A batch that would straddle the ceiling is refused whole.
	src.ms.Store(11)
	if _, err := c.NextFencedBatch(MaxBatch); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NextFencedBatch(1); !errors.Is(err, ErrCeilingExpired) {
		t.Fatalf("straddling batch: err = %v", err)
	}
	for _, n := range []uint64{0, MaxBatch + 1} {
		if _, err := c.NextFencedBatch(n); !errors.Is(err, ErrBatchSize) {
			t.Fatalf("batch %d: err = %v, want ErrBatchSize", n, err)
		}
	}
}

// A logical overflow waits for the next physical millisecond instead of
// carrying into it.
func TestBatchNeverRunsAheadOfTheClock(t *testing.T) {
	var src fakeSource
	src.ms.Store(10)
	c := New(src.now)
	c.SetCeiling(1000)
	if first, err := c.NextFencedBatch(MaxBatch); err != nil || first != Make(10, 0) {
		t.Fatalf("full millisecond: first %s, err %v", Format(first), err)
	}
	if _, err := c.NextFencedBatch(1); !errors.Is(err, ErrAheadOfClock) {
		t.Fatalf("overflow into ms 11 while the clock reads 10: err = %v, want ErrAheadOfClock", err)
	}
	if c.Last() != Make(10, MaxBatch-1) {
		t.Fatalf("refused batch moved the clock to %s", Format(c.Last()))
	}
	src.ms.Store(11)
	if first, err := c.NextFencedBatch(1); err != nil || first != Make(11, 0) {
		t.Fatalf("after the tick: first %s, err %v", Format(first), err)
	}
	// A batch that does not fit the rest of the millisecond waits too.
	c.Observe(Make(11, MaxBatch-10))
	if _, err := c.NextFencedBatch(100); !errors.Is(err, ErrAheadOfClock) {
		t.Fatalf("batch straddling ms 11/12 while the clock reads 11: err = %v", err)
	}
	src.ms.Store(12)
	if first, err := c.NextFencedBatch(100); err != nil || first != Make(12, 0) {
		t.Fatalf("after the tick: first %s, err %v", Format(first), err)
	}
}

// An observed timestamp ahead of the clock may be used up to the end of its
// millisecond, never beyond; waiting gives up at once when the clock is
// further behind than the wait allows.
func TestObservedAheadIsNotExtended(t *testing.T) {
	var src fakeSource
	var reads atomic.Int64
	src.ms.Store(10)
	c := New(func() int64 { reads.Add(1); return src.now() })
	c.SetCeiling(1000)
	c.Observe(Make(500, 0))
	if _, err := c.NextFencedBatch(MaxBatch - 1); err != nil {
		t.Fatal(err)
	}
	if got := c.AheadMs(c.Last()); got != 490 {
		t.Fatalf("AheadMs = %d, want 490", got)
	}
	// The clock is 490 ms behind and the wait is 5 ms: it gives up without
	// polling the clock (a poll reads it every 200 µs).
	reads.Store(0)
	if _, err := c.NextFencedBatchWait(1, 5*time.Millisecond); !errors.Is(err, ErrAheadOfClock) {
		t.Fatalf("err = %v, want ErrAheadOfClock", err)
	}
	if n := reads.Load(); n > 3 {
		t.Fatalf("read the clock %d times: it waited for a clock 490 ms behind", n)
	}
	src.ms.Store(600)
	if got := c.AheadMs(c.Last()); got != 0 {
		t.Fatalf("AheadMs once the clock passed = %d, want 0", got)
	}
}

// With the real clock, back-to-back full batches wait for the next
// millisecond and never end ahead of it.
func TestBatchWaitFollowsTheWallClock(t *testing.T) {
	c := New(nil)
	c.SetCeiling(uint64(WallSource()) + 60_000)
	prev := uint64(0)
	for range 20 {
		first, err := c.NextFencedBatchWait(MaxBatch, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		last := first + MaxBatch - 1
		if first <= prev {
			t.Fatalf("batch %s not above %s", Format(first), Format(prev))
		}
		if now := c.PhysicalNow(); Physical(last) > now {
			t.Fatalf("batch ends at %s, ahead of the clock %d", Format(last), now)
		}
		prev = last
	}
}

func TestSetCeilingOnlyRaisesAndRevoke(t *testing.T) {
	c := New(nil)
	c.SetCeiling(100)
	c.SetCeiling(50)
	if c.Ceiling() != 100 {
		t.Fatalf("ceiling = %d, want 100", c.Ceiling())
	}
	c.Revoke()
	if c.Ceiling() != 0 {
		t.Fatalf("after Revoke ceiling = %d", c.Ceiling())
	}
}

func TestObserveAndNegativeSource(t *testing.T) {
	c := New(func() int64 { return -5 })
	c.Observe(Make(9000, 3))
	if v := c.Next(); v != Make(9000, 4) {
		t.Fatalf("Next after Observe = %s, want 9000.4", Format(v))
	}
	c.Observe(Make(1, 0)) // older: ignored
	if v := c.Next(); v != Make(9000, 5) {
		t.Fatalf("Next = %s, want 9000.5", Format(v))
	}
}

// TestFenceProperty drives random interleavings of every operation, including
// time going backwards, against a model of what was issued.
func TestFenceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var src fakeSource
		src.ms.Store(rapid.Int64Range(0, 1<<40).Draw(t, "start"))
		c := New(src.now)
		var highest uint64 // highest value issued or observed
		ops := rapid.IntRange(1, 300).Draw(t, "ops")
		for range ops {
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0:
				v := c.Next()
				if v <= highest {
					t.Fatalf("Next %s not above %s", Format(v), Format(highest))
				}
				highest = v
			case 1, 2:
				n := rapid.Uint64Range(1, MaxBatch).Draw(t, "batch")
				ceiling, now := c.Ceiling(), c.PhysicalNow()
				// The only batch that may be issued, and where it may end:
				// within the clock's millisecond or the last timestamp's.
				wantFirst := max(highest+1, now<<LogicalBits)
				limit := max(now, Physical(highest))
				first, err := c.NextFencedBatch(n)
				if err != nil {
					switch {
					case errors.Is(err, ErrCeilingExpired):
						if Physical(wantFirst+n-1) < ceiling {
							t.Fatalf("batch refused below the ceiling: %v", err)
						}
					case errors.Is(err, ErrAheadOfClock):
						if Physical(wantFirst+n-1) <= limit {
							t.Fatalf("batch refused though it fits the clock: %v", err)
						}
					default:
						t.Fatalf("unexpected error %v", err)
					}
					if c.Last() != highest {
						t.Fatalf("refused batch moved the clock")
					}
					continue
				}
				last := first + n - 1
				if first != wantFirst {
					t.Fatalf("batch first %s, want %s", Format(first), Format(wantFirst))
				}
				if last >= ceiling<<LogicalBits {
					t.Fatalf("batch end %s at or past ceiling %d<<16", Format(last), ceiling)
				}
				if Physical(last) > limit {
					t.Fatalf("batch end %s ran ahead of the clock (%d ms) and of the last timestamp %s", Format(last), now, Format(highest))
				}
				highest = last
			case 3:
				ts := rapid.Uint64Range(0, uint64(1<<40)<<LogicalBits).Draw(t, "observe")
				c.Observe(ts)
				highest = max(highest, ts)
			case 4:
				c.SetCeiling(rapid.Uint64Range(0, 1<<41).Draw(t, "ceiling"))
			case 5:
				src.ms.Add(rapid.Int64Range(-5000, 5000).Draw(t, "dt"))
			}
			if c.Last() != highest {
				t.Fatalf("Last %s, model %s", Format(c.Last()), Format(highest))
			}
		}
	})
}

// TestFenceConcurrent checks the fence under real interleavings: goroutines
// issue while another raises the ceiling and moves time, both ways.
func TestFenceConcurrent(t *testing.T) {
	var src fakeSource
	src.ms.Store(1_000_000)
	c := New(src.now)
	c.SetCeiling(1_000_005)
	var maxCeiling atomic.Uint64
	maxCeiling.Store(1_000_005)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 2000 {
			c.SetCeiling(1_000_005 + uint64(i/10))
			maxCeiling.Store(c.Ceiling())
			if i%3 == 0 {
				src.ms.Add(-1)
			} else {
				src.ms.Add(1)
			}
		}
		close(stop)
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var prev uint64
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, err := c.NextFenced()
				if err != nil {
					continue
				}
				if v <= prev {
					t.Errorf("non-increasing %s after %s", Format(v), Format(prev))
					return
				}
				// The ceiling only rises, so the final one bounds every issue.
				if Physical(v) >= 1_000_005+200 {
					t.Errorf("issued %s past every ceiling", Format(v))
					return
				}
				prev = v
			}
		}()
	}
	wg.Wait()
}

func BenchmarkNext(b *testing.B) {
	c := New(nil)
	b.ReportAllocs()
	for b.Loop() {
		c.Next()
	}
}

func BenchmarkNextFenced(b *testing.B) {
	c := New(nil)
	c.SetCeiling(1 << 47)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.NextFenced(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchFlood takes full batches back to back from several
// goroutines: throughput is bounded by one batch (65,536 timestamps) per
// physical millisecond. A batch that waited 5 ms in vain counts as
// refused (the server's Unavailable).
func BenchmarkBatchFlood(b *testing.B) {
	c := New(nil)
	c.SetCeiling(1 << 47)
	var refused atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.NextFencedBatchWait(MaxBatch, 5*time.Millisecond); errors.Is(err, ErrAheadOfClock) {
				refused.Add(1)
			} else if err != nil {
				b.Error(err)
				return
			}
		}
	})
	issued := float64(int64(b.N)-refused.Load()) * MaxBatch
	b.ReportMetric(issued/b.Elapsed().Seconds(), "timestamps/s")
	b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op")
	if ahead := c.AheadMs(c.Last()); ahead > 0 {
		b.Fatalf("HLC ran %d ms ahead of the clock", ahead)
	}
}

func BenchmarkNextParallel(b *testing.B) {
	c := New(nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Next()
		}
	})
}
