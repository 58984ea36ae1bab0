package columns

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// sampledRow is a hot route-2 row whose reporter sampled keys[i] with
// writes[i] writes each, its load the sum of the sampled weights (so every
// key's weight is exactly 4·writes).
func sampledRow(keys []string, writes []uint32) *api.ReportRow {
	var load uint64
	row := &api.ReportRow{RouteId: 2, Writes: 100_000, SampleRate: 16}
	for i, k := range keys {
		row.Samples = append(row.Samples, &api.SampledKey{Key: []byte(k), Writes: writes[i]})
		load += 4 * uint64(writes[i])
	}
	row.Buckets = buckets16(load)
	return row
}

// Many reporters: the row's sample stays within sampleBuffer items while
// merging, mergedSamples once cut, and the key buffer within a small
// multiple of their bytes, however many keys arrive; the estimates of the
// total weight and of a key range are unbiased: over independent trials
// (other reporter ids, so other hashes) their mean is within a few of its
// standard errors of the truth, though one trial's may be off by a
// sampling error of ten percent. The hash is fixed, so the run is the
// same on every machine.
func TestMergeSampleBoundedAndUnbiased(t *testing.T) {
	cat := mergeCatalog(t)
	const trials, reporters, perReporter = 32, 100, 64
	var total, lowHalf, est, estLow uint64
	for trial := range trials {
		s := newColumnSum(0, testStep)
		for r := range reporters {
			keys := make([]string, perReporter)
			writes := make([]uint32, perReporter)
			for i := range keys {
				k := (r*perReporter + i) % 5000
				// Long keys so that the buffer bound is what it says.
				keys[i] = fmt.Sprintf("k%04d-%s", k, bytes.Repeat([]byte{'x'}, 200))
				writes[i] = uint32(1 + (k*7)%13)
				total += 4 * uint64(writes[i])
				if k < 2500 {
					lowHalf += 4 * uint64(writes[i])
				}
			}
			s.add(fmt.Sprint("t", trial, "r", r), reportCol(0, sampledRow(keys, writes)), cat)
		}
		row := s.row(2)
		if n := len(row.sample.items); n > sampleBuffer {
			t.Fatalf("%d sampled keys held while merging, want at most %d", n, sampleBuffer)
		}
		row.sample.cutBack()
		if n := len(row.sample.items); n != mergedSamples {
			t.Fatalf("%d sampled keys kept, want %d", n, mergedSamples)
		}
		keyBytes := 0
		for _, it := range row.sample.items {
			keyBytes += int(it.n)
		}
		if c := cap(row.sample.keys); c > 4*keyBytes+2048 {
			t.Fatalf("key buffer of %d bytes for %d bytes of kept keys", c, keyBytes)
		}
		dc := detector.DefaultConfig()
		dc.Threshold = 1
		e, _ := s.entry(cat, dc, 64, clusterversion.Version2, nil)
		var te, tl uint64
		for _, w := range findRow(t, e, 2).GetSamples() {
			te += w.GetWeight()
			if string(w.GetKey()) < "k2500" {
				tl += w.GetWeight()
			}
		}
		est, estLow = est+te, estLow+tl
	}
	within := func(what string, got, want uint64, tol float64) {
		d := float64(got)/float64(want) - 1
		if d > tol || d < -tol {
			t.Errorf("%s: estimated %d, true %d (%.1f%%)", what, got, want, 100*d)
		}
		t.Logf("%s: estimated %d, true %d (%+.1f%%)", what, got, want, 100*d)
	}
	// One trial's relative error is about 10% here, the mean's about 2%.
	within("total weight", est, total, 0.06)
	within("weight of the lower half of the keys", estLow, lowHalf, 0.08)
}

// Up to mergedSamples items the merged sample is exact: every key with its
// own weight, duplicates summed — what merging every sample gives.
func TestMergeSampleExactWhenItFits(t *testing.T) {
	cat := mergeCatalog(t)
	s := newColumnSum(0, testStep)
	want := map[string]uint64{}
	for r := range 4 { // 4 × 32 = mergedSamples
		keys := make([]string, 32)
		writes := make([]uint32, 32)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%02d", (r*11+i)%40)
			writes[i] = uint32(1 + i%5)
			want[keys[i]] += 4 * uint64(writes[i])
		}
		s.add(fmt.Sprint("r", r), reportCol(0, sampledRow(keys, writes)), cat)
	}
	dc := detector.DefaultConfig()
	dc.Threshold = 1
	e, _ := s.entry(cat, dc, 64, clusterversion.Version2, nil)
	got := findRow(t, e, 2).GetSamples()
	if len(got) != len(want) {
		t.Fatalf("%d keys, want %d", len(got), len(want))
	}
	for i, w := range got {
		if i > 0 && bytes.Compare(got[i-1].GetKey(), w.GetKey()) >= 0 {
			t.Fatalf("samples not in key order at %d", i)
		}
		if want[string(w.GetKey())] != w.GetWeight() {
			t.Fatalf("key %s weighs %d, want %d", w.GetKey(), w.GetWeight(), want[string(w.GetKey())])
		}
	}
	// One more item and the sample is full: priorities decide.
	s.add("r4", reportCol(0, sampledRow([]string{"zz"}, []uint32{1})), cat)
	s.row(2).sample.cutBack()
	if n := len(s.row(2).sample.items); n != mergedSamples || s.row(2).sample.tu == 0 {
		t.Fatalf("%d items, threshold %d: the 129th item must leave one out", n, s.row(2).sample.tu)
	}
}

// TestRowSampleKeepsTheTopProperty: whatever the order items arrive in,
// the sample keeps the mergedSamples items of highest priority and τ is
// the highest of the rest — what sorting every item would give. Weights,
// hashes and keys come from small sets so that ties in priority, weight
// and key are common.
func TestRowSampleKeepsTheTopProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		type item struct {
			w, u uint64
			k    []byte
		}
		n := rapid.IntRange(0, 3*sampleBuffer).Draw(t, "items")
		items := make([]item, n)
		for i := range items {
			items[i] = item{
				w: rapid.Uint64Range(1, 8).Draw(t, "w"),
				u: rapid.SampledFrom([]uint64{1, 2, 3, 1 << 62, 1 << 63}).Draw(t, "u"),
				k: []byte(rapid.SampledFrom([]string{"a", "b", "c", "dd"}).Draw(t, "k")),
			}
		}
		var s rowSample
		for _, it := range items {
			s.offer(it.w, it.u, it.k)
		}
		s.cutBack()
		// The reference: every item sorted highest first.
		order := func(a, b item) int {
			if c := cmpPriority(b.w, b.u, a.w, a.u); c != 0 {
				return c
			}
			return bytes.Compare(b.k, a.k)
		}
		slices.SortFunc(items, order)
		keep := min(n, mergedSamples)
		got := make([]item, 0, len(s.items))
		for _, it := range s.items {
			got = append(got, item{it.w, it.u, s.key(it)})
		}
		slices.SortFunc(got, order)
		if !slices.EqualFunc(got, items[:keep], func(a, b item) bool { return order(a, b) == 0 }) {
			t.Fatalf("kept %v, want %v", got, items[:keep])
		}
		var tw, tu uint64
		if n > keep {
			tw, tu = items[keep].w, items[keep].u
		}
		if s.tw != tw || s.tu != tu {
			t.Fatalf("τ is (%d, %d), want (%d, %d)", s.tw, s.tu, tw, tu)
		}
	})
}

// A merge costs nothing per reporter once the sample is full: the work of
// a report's samples is a hash and a comparison each.
func BenchmarkMergeSamples(b *testing.B) {
	cat := mergeCatalog(b)
	keys := make([]string, 32)
	writes := make([]uint32, 32)
	for i := range keys {
		keys[i] = fmt.Sprintf("user:%08d", i*7919)
		writes[i] = uint32(1 + i%3)
	}
	col := reportCol(0, sampledRow(keys, writes))
	wire, err := columnOf(col, cat)
	if err != nil {
		b.Fatal(err)
	}
	s := newColumnSum(0, testStep)
	for r := range 8 {
		s.add(fmt.Sprint("warm", r), col, cat)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.merge(fmt.Sprint("r", i), wire)
		i++
	}
}

// BenchmarkRowSampleOffer is one row's sample over a column of 100
// reporters' 32 sampled keys each (the version 2 shape): the items' weights
// and hashes precomputed, so ns/item is the sample's own work — mostly
// comparisons, a fifth of the items kept at some point.
func BenchmarkRowSampleOffer(b *testing.B) {
	type item struct {
		w, u uint64
		k    []byte
	}
	var items []item
	for r := range 100 {
		h := sampleRowHash(reporterHash(fmt.Sprint("reporter-", r)), 2)
		for pos := range 32 {
			k := fmt.Appendf(nil, "user:%08d", (r*32+pos)*7919%100_000)
			items = append(items, item{w: uint64(100 + (r*7+pos)%50), u: sampleU(sampleItemHash(h, pos)), k: k})
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		var s rowSample
		for _, it := range items {
			s.offer(it.w, it.u, it.k)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(items)), "ns/item")
}
