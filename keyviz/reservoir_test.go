package keyviz

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Every sketch entry's raw sampled reads and writes are exactly what its
// lower estimate weighs: count - error = ww·writes + wr·reads, and never
// more events than the key was fed.
func TestSketchRawCounts(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := rapid.IntRange(1, 8).Draw(t, "capacity")
		const ww, wr = 4, 1
		s := newSpaceSaving(capacity)
		fed := map[string][2]uint64{}
		for i := range rapid.IntRange(0, 300).Draw(t, "updates") {
			k := fmt.Sprintf("k%d", rapid.IntRange(0, 20).Draw(t, fmt.Sprint("k", i)))
			write := rapid.Bool().Draw(t, fmt.Sprint("w", i))
			w := uint64(wr)
			if write {
				w = ww
			}
			s.add([]byte(k), w, write)
			f := fed[k]
			if write {
				f[1]++
			} else {
				f[0]++
			}
			fed[k] = f
		}
		for _, e := range s.top() {
			if e.Count-e.Error != ww*e.SampledWrites+wr*e.SampledReads {
				t.Fatalf("key %s: count %d - error %d != 4·%d + %d", e.Key, e.Count, e.Error, e.SampledWrites, e.SampledReads)
			}
			if f := fed[string(e.Key)]; e.SampledReads > f[0] || e.SampledWrites > f[1] {
				t.Fatalf("key %s: %d/%d sampled events, fed %v", e.Key, e.SampledReads, e.SampledWrites, f)
			}
		}
	})
}

// The operation sample is uniform: over many columns, each of 100 keys
// fed equally often lands in a 32-slot reservoir about 32% of the time
// (chi-square over the keys, fixed seed).
func TestReservoirUniform(t *testing.T) {
	const keys = 100
	columns := 2000
	if testing.Short() {
		columns = 500
	}
	in := make([]int, keys)
	r := newReservoir(7)
	for c := range columns {
		*r = reservoir{rng: uint64(c)*0x9e3779b97f4a7c15 | 1, buf: r.buf[:0]}
		for round := range 5 {
			for k := range keys {
				r.add([]byte(fmt.Sprintf("key-%03d", (k+round*37)%keys)), k%2 == 0)
			}
		}
		for _, s := range r.samples() {
			var k int
			fmt.Sscanf(string(s.Key), "key-%03d", &k)
			in[k] += int(s.Reads + s.Writes)
		}
	}
	expect := float64(columns*ReservoirSize) / keys
	var chi2 float64
	for _, n := range in {
		chi2 += (float64(n) - expect) * (float64(n) - expect) / expect
	}
	// 99 degrees of freedom: mean 99, sd 14; allow mean + 5 sd.
	if chi2 > 99+5*math.Sqrt(2*99) {
		t.Fatalf("chi-square %.1f over %d keys: the sample is not uniform (counts %v)", chi2, keys, in)
	}
}

// A reservoir reports its keys sorted, each once, with the reads and
// writes it holds of them, at most ReservoirSize operations in all.
func TestReservoirSamples(t *testing.T) {
	r := newReservoir(1)
	for i := range 1000 {
		r.add([]byte(fmt.Sprintf("k%d", i%3)), i%4 == 0)
	}
	var n uint32
	ss := r.samples()
	for i, s := range ss {
		if i > 0 && string(ss[i-1].Key) >= string(s.Key) {
			t.Fatalf("samples not sorted and distinct: %v", ss)
		}
		n += s.Reads + s.Writes
	}
	if n != ReservoirSize || len(ss) != 3 {
		t.Fatalf("%d operations in %d keys: %v", n, len(ss), ss)
	}
	if newReservoir(1).samples() != nil {
		t.Fatal("an empty reservoir reports samples")
	}
}

// Rows carry the operation sample and the raw counts; the same seed and
// the same observations give the same columns.
func TestSamplerSeedReproducible(t *testing.T) {
	run := func(seed uint64) []*api.ReportColumn {
		c := mustCatalog(t, "m")
		s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 16, WriteWeight: 4, ReadWeight: 1}, Seed: seed})
		setCatalog(t, s, c)
		var out []*api.ReportColumn
		for col := range 3 {
			for i := range 5000 {
				s.Observe(1, []byte(fmt.Sprintf("a%04d", (i*7919)%1000)), i%3 == 0)
			}
			out = append(out, s.CloseColumn(t0+uint64(col)*1000))
		}
		return out
	}
	a, b := run(42), run(42)
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			t.Fatalf("column %d differs between two runs of seed 42", i)
		}
	}
	r := rowOf(a[1], 1)
	if len(r.Samples) == 0 || len(r.TopKeys) == 0 {
		t.Fatalf("row without samples or top keys: %v", r)
	}
	var ops uint32
	for _, s := range r.Samples {
		ops += s.Reads + s.Writes
	}
	if ops != ReservoirSize {
		t.Fatalf("%d sampled operations, want %d", ops, ReservoirSize)
	}
	if c := run(43); proto.Equal(a[1], c[1]) {
		t.Fatal("another seed sampled the same")
	}
}

// A scheduled step change takes effect with the first column at or after
// its boundary: the column before it keeps the old step; windows stay
// aligned and increasing, even for a closer that is late.
func TestCloseColumnAdoptsScheduledStep(t *testing.T) {
	const at = t0 + 6000 // a multiple of 1000 and 3000
	for _, late := range []uint64{0, 1700} {
		c := mustCatalog(t)
		s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: 1000, Buckets: 1, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1})
		setCatalog(t, s, c)
		s.CloseColumn(t0) // opens [t0, t0+1000)
		if err := s.SetConfig(LoadConfig{StepMs: 1000, Buckets: 1, WriteWeight: 4, ReadWeight: 1, NextStepMs: 3000, NextStepAtMs: at}); err != nil {
			t.Fatal(err)
		}
		var labels, steps []uint64
		for now := uint64(t0 + 1000); now <= at+6000; {
			s.Observe(1, []byte("k"), true)
			col := s.CloseColumn(now + late)
			checkColumn(t, col)
			labels = append(labels, col.WindowStartMs)
			steps = append(steps, col.StepMs)
			start, step, _ := s.Window()
			now = start + step
		}
		for i := range labels {
			if i > 0 && labels[i] <= labels[i-1] {
				t.Fatalf("late %d: labels %v not increasing", late, labels)
			}
			if want := uint64(1000); labels[i] >= at {
				want = 3000
				if steps[i] != want {
					t.Fatalf("late %d: window %d has step %d, want %d (labels %v steps %v)", late, labels[i], steps[i], want, labels, steps)
				}
			} else if steps[i] != want {
				t.Fatalf("late %d: window %d before the boundary has step %d", late, labels[i], steps[i])
			}
		}
		if i := slices.Index(labels, at); late == 0 && (i < 0 || steps[i] != 3000) {
			t.Fatalf("the first column of the new step is not at the boundary: labels %v steps %v", labels, steps)
		}
	}
}
