package sim

import (
	"errors"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sample is what a stream drew: per-key counts and the number of writes.
type sample struct {
	n      int
	writes int
	counts []uint32 // by key index
}

// draw takes n operations from w seeded with seed, all at operation time at.
func draw(w Workload, seed uint64, n int, at time.Duration) sample {
	st := w.Stream(rand.New(rand.NewPCG(seed, 0)))
	s := sample{n: n, counts: make([]uint32, w.Keys().Len())}
	for range n {
		k, write := st.Next(at)
		s.counts[k]++ // an index out of the key space panics here
		if write {
			s.writes++
		}
	}
	return s
}

// in counts the draws in [lo, hi).
func (s sample) in(lo, hi uint64) int {
	c := 0
	for _, v := range s.counts[lo:hi] {
		c += int(v)
	}
	return c
}

func mustWorkload(t testing.TB, name string, mod func(*WorkloadOptions)) Workload {
	t.Helper()
	o := DefaultWorkloadOptions()
	if mod != nil {
		mod(&o)
	}
	w, err := ParseWorkload(name, o)
	if err != nil {
		t.Fatalf("ParseWorkload(%q): %v", name, err)
	}
	return w
}

// checkShare asserts an observed share: within 5% (relative) of the
// configured share — the simulator's documented accuracy — and, tighter, within
// five standard deviations of the exact expectation (which adds the uniform
// remainder's hits).
func checkShare(t *testing.T, what string, got, n int, configured, expected float64) {
	t.Helper()
	share := float64(got) / float64(n)
	sigma := math.Sqrt(expected * (1 - expected) / float64(n))
	t.Logf("%s: %.5f over %d ops (configured %.4f, expected %.5f ± %.5f)", what, share, n, configured, expected, sigma)
	if math.Abs(share-configured) > 0.05*configured {
		t.Errorf("%s: share %.5f not within 5%% of the configured %.4f", what, share, configured)
	}
	if math.Abs(share-expected) > 5*sigma+1e-12 {
		t.Errorf("%s: share %.5f is more than 5σ (%.5f) from the expected %.5f", what, share, sigma, expected)
	}
}

const distN = 1_000_000

func TestHotKeyShare(t *testing.T) {
	for _, share := range []float64{0, 0.5, 0.95} {
		w := mustWorkload(t, HotKey, func(o *WorkloadOptions) { o.HotShare = share })
		configured := share
		if share == 0 {
			configured = DefaultHotKeyShare
		}
		lo, hi, ok := w.Hotspot(0)
		if !ok || hi != lo+1 {
			t.Fatalf("hotkey Hotspot = [%d, %d) %v: want one key", lo, hi, ok)
		}
		n := distN // the acceptance case: the default share
		if share != 0 {
			n = distN / 4
		}
		s := draw(w, 7, n, 0)
		keys := float64(w.Keys().Len())
		checkShare(t, "hot key "+string(w.Keys().Key(lo)), s.in(lo, hi), s.n, configured, configured+(1-configured)/keys)
	}
}

func TestHotRangeShare(t *testing.T) {
	for _, tc := range []struct{ share, width float64 }{{0, DefaultHotWidth}, {0.6, 0.05}, {0.99, 0.001}} {
		w := mustWorkload(t, HotRange, func(o *WorkloadOptions) { o.HotShare, o.HotWidth = tc.share, tc.width })
		configured := tc.share
		if configured == 0 {
			configured = DefaultHotRangeShare
		}
		lo, hi, ok := w.Hotspot(0)
		keys := w.Keys().Len()
		if !ok || hi-lo != uint64(tc.width*float64(keys)) || hi > keys {
			t.Fatalf("hotrange Hotspot = [%d, %d) %v: want %v of %d keys", lo, hi, ok, tc.width, keys)
		}
		n := distN // the acceptance case: the default share and width
		if tc.share != 0 {
			n = distN / 4
		}
		s := draw(w, 11, n, 0)
		frac := float64(hi-lo) / float64(keys)
		checkShare(t, "hot range", s.in(lo, hi), s.n, configured, configured+(1-configured)*frac)
		// Inside the range, the load is uniform: both halves get half.
		mid := lo + (hi-lo)/2
		checkShare(t, "lower half of the hot range", s.in(lo, mid), s.in(lo, hi), 0.5, 0.5)
	}
}

func TestWriteFraction(t *testing.T) {
	for _, name := range WorkloadNames() {
		if name == Incidental {
			continue // its mix is fixed by design: TestIncidentalShape
		}
		for _, wf := range []float64{0, 0.2, 0.5, 1} {
			w := mustWorkload(t, name, func(o *WorkloadOptions) { o.WriteFraction = wf })
			n := 200_000
			if wf == 0 || wf == 1 {
				n = 10_000
			}
			s := draw(w, 3, n, 0)
			switch wf {
			case 0, 1:
				if s.writes != int(wf)*s.n {
					t.Errorf("%s write fraction %v: %d writes of %d", name, wf, s.writes, s.n)
				}
			default:
				checkShare(t, name+" writes", s.writes, s.n, wf, wf)
			}
		}
	}
}

// TestUniformSpread: uniform fills 100 equal slices of the key space evenly
// (chi-square with 99 degrees of freedom below mean + 5 sd; no slice more
// than 5% above the mean).
func TestUniformSpread(t *testing.T) {
	w := mustWorkload(t, Uniform, nil)
	if _, _, ok := w.Hotspot(0); ok {
		t.Error("uniform has a hotspot")
	}
	s := draw(w, 5, distN, 0)
	const slices = 100
	var count [slices]int
	n := w.Keys().Len()
	for k, v := range s.counts {
		count[uint64(k)*slices/n] += int(v)
	}
	mean := float64(s.n) / slices
	chi2, top := 0.0, 0
	for _, c := range count {
		chi2 += (float64(c) - mean) * (float64(c) - mean) / mean
		top = max(top, c)
	}
	bound := 99 + 5*math.Sqrt(2*99)
	t.Logf("uniform: chi-square %.1f over %d slices (bound %.1f), max/mean %.4f", chi2, slices, bound, float64(top)/mean)
	if chi2 > bound {
		t.Errorf("chi-square %.1f above %.1f", chi2, bound)
	}
	if float64(top)/mean > 1.05 {
		t.Errorf("max/mean %.4f above 1.05", float64(top)/mean)
	}
}

// zipfTheory is the probability of rank 0 over n keys: 1/H(n, s).
func zipfTheory(n uint64, s float64) float64 {
	h := 0.0
	for k := n; k >= 1; k-- { // small terms first, for accuracy
		h += math.Pow(float64(k), -s)
	}
	return 1 / h
}

func TestZipfTopKeys(t *testing.T) {
	for _, tc := range []struct {
		keys uint64
		skew float64
	}{{DefaultKeySpace, DefaultSkew}, {DefaultKeySpace, 2}, {1000, 1.5}} {
		w := mustWorkload(t, Zipf, func(o *WorkloadOptions) { o.KeySpace, o.Skew = tc.keys, tc.skew })
		z := w.(*zipf)
		n := distN / 2
		if tc.skew != DefaultSkew {
			n = distN / 5
		}
		s := draw(w, 13, n, 0)
		p0 := zipfTheory(tc.keys, tc.skew)
		lo, hi, ok := w.Hotspot(0)
		if !ok || hi != lo+1 || lo != z.keyOfRank(0) {
			t.Fatalf("zipf Hotspot = [%d, %d) %v: want the key of rank 0 (%d)", lo, hi, ok, z.keyOfRank(0))
		}
		name := "zipf s=" + strconv.FormatFloat(tc.skew, 'g', -1, 64)
		checkShare(t, name+" rank 0", int(s.counts[lo]), s.n, p0, p0)
		p1 := p0 * math.Pow(2, -tc.skew)
		checkShare(t, name+" rank 1", int(s.counts[z.keyOfRank(1)]), s.n, p1, p1)
		// The hottest key drawn is rank 0's.
		best := uint64(0)
		for k, v := range s.counts {
			if v > s.counts[best] {
				best = uint64(k)
			}
		}
		if best != lo {
			t.Errorf("%s: the most drawn key is %d, Hotspot says %d", name, best, lo)
		}
	}
}

// TestZipfRankBijection: scattering ranks over the key space loses no key.
func TestZipfRankBijection(t *testing.T) {
	for _, n := range []uint64{2, 3, 10, 1000, 1024, 999_983} {
		w := mustWorkload(t, Zipf, func(o *WorkloadOptions) { o.KeySpace = n })
		z := w.(*zipf)
		seen := make([]bool, n)
		for r := range n {
			k := z.keyOfRank(r)
			if k >= n || seen[k] {
				t.Fatalf("n=%d: rank %d maps to %d, out of range or taken", n, r, k)
			}
			seen[k] = true
		}
	}
}

// TestShiftMoves: the hot range holds its share in each interval and moves
// clear of itself at every interval boundary; the first interval's range is
// hotrange's.
func TestShiftMoves(t *testing.T) {
	every := 30 * time.Second
	w := mustWorkload(t, Shift, func(o *WorkloadOptions) { o.ShiftEvery = every })
	hr := mustWorkload(t, HotRange, nil)
	l0, h0, _ := w.Hotspot(0)
	if rl, rh, _ := hr.Hotspot(0); rl != l0 || rh != h0 {
		t.Errorf("shift starts at [%d, %d), hotrange is at [%d, %d)", l0, h0, rl, rh)
	}
	n := w.Keys().Len()
	prevLo, prevHi := uint64(0), uint64(0)
	positions := map[uint64]bool{}
	for p := range 6 {
		at := time.Duration(p)*every + every/2
		lo, hi, ok := w.Hotspot(at)
		if !ok || hi-lo != uint64(DefaultHotWidth*float64(n)) || hi > n {
			t.Fatalf("interval %d: Hotspot = [%d, %d) %v", p, lo, hi, ok)
		}
		if l, h, _ := w.Hotspot(time.Duration(p) * every); l != lo || h != hi {
			t.Errorf("interval %d: the range moved inside the interval", p)
		}
		if p > 0 && lo < prevHi && prevLo < hi {
			t.Errorf("interval %d: [%d, %d) overlaps the previous [%d, %d)", p, lo, hi, prevLo, prevHi)
		}
		positions[lo] = true
		s := draw(w, uint64(100+p), 200_000, at)
		frac := float64(hi-lo) / float64(n)
		checkShare(t, "shift interval "+string(w.Keys().Key(lo)), s.in(lo, hi), s.n, DefaultHotRangeShare,
			DefaultHotRangeShare+(1-DefaultHotRangeShare)*frac)
		prevLo, prevHi = lo, hi
	}
	if len(positions) != 6 {
		t.Errorf("6 intervals visited %d places", len(positions))
	}
}

// TestShiftNeverOverlaps checks the no-overlap promise over many intervals
// and odd key spaces and widths ParseWorkload accepts.
func TestShiftNeverOverlaps(t *testing.T) {
	for _, tc := range []struct {
		keys    uint64
		width   float64
		refused bool
	}{{DefaultKeySpace, DefaultHotWidth, false}, {100, 0.1, false}, {7, 0.15, false}, {1_000_003, 0.19, false}, {10, 0.5, true}, {1000, 0.2, true}} {
		w, err := ParseWorkload(Shift, WorkloadOptions{KeySpace: tc.keys, HotWidth: tc.width, ShiftEvery: time.Second})
		if tc.refused != (err != nil) {
			t.Fatalf("keys %d width %v: error %v, want refused=%v", tc.keys, tc.width, err, tc.refused)
		}
		if err != nil {
			continue
		}
		pl, ph, _ := w.Hotspot(0)
		for p := 1; p < 5000; p++ {
			lo, hi, _ := w.Hotspot(time.Duration(p) * time.Second)
			if hi > tc.keys || lo >= hi {
				t.Fatalf("keys %d width %v interval %d: [%d, %d) outside the key space", tc.keys, tc.width, p, lo, hi)
			}
			if lo < ph && pl < hi {
				t.Fatalf("keys %d width %v interval %d: [%d, %d) overlaps [%d, %d)", tc.keys, tc.width, p, lo, hi, pl, ph)
			}
			pl, ph = lo, hi
		}
	}
}

// TestStreamsAreReproducible: a seed fixes the whole sequence; another seed
// gives another one.
func TestStreamsAreReproducible(t *testing.T) {
	for _, name := range WorkloadNames() {
		w := mustWorkload(t, name, func(o *WorkloadOptions) { o.ShiftEvery = time.Millisecond })
		a := w.Stream(rand.New(rand.NewPCG(42, 0)))
		b := w.Stream(rand.New(rand.NewPCG(42, 0)))
		c := w.Stream(rand.New(rand.NewPCG(43, 0)))
		differ := 0
		for i := range 20_000 {
			at := time.Duration(i) * 50 * time.Microsecond
			ka, wa := a.Next(at)
			kb, wb := b.Next(at)
			kc, _ := c.Next(at)
			if ka != kb || wa != wb {
				t.Fatalf("%s: op %d differs between two streams of seed 42: %d/%v vs %d/%v", name, i, ka, wa, kb, wb)
			}
			if ka != kc {
				differ++
			}
		}
		if differ < 1000 {
			t.Errorf("%s: seeds 42 and 43 agree on %d of 20000 keys", name, 20_000-differ)
		}
	}
}

func TestParseWorkloadRejects(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name string
		mod  func(*WorkloadOptions)
		want string
	}{
		{"pareto", nil, `workload "pareto": want one of uniform, zipf, hotrange, hotkey, shift`},
		{"", nil, `workload ""`},
		{Uniform, func(o *WorkloadOptions) { o.KeySpace = 0 }, "key-space 0"},
		{Uniform, func(o *WorkloadOptions) { o.KeySpace = 1 }, "key-space 1"},
		{Uniform, func(o *WorkloadOptions) { o.KeySpace = MaxKeySpace + 1 }, "key-space 1000000000001"},
		{HotKey, func(o *WorkloadOptions) { o.WriteFraction = -0.1 }, "write-fraction -0.1"},
		{HotKey, func(o *WorkloadOptions) { o.WriteFraction = 1.5 }, "write-fraction 1.5"},
		{HotKey, func(o *WorkloadOptions) { o.WriteFraction = nan }, "write-fraction NaN"},
		{HotKey, func(o *WorkloadOptions) { o.HotShare = 1.01 }, "hot-share 1.01"},
		{HotRange, func(o *WorkloadOptions) { o.HotShare = -0.5 }, "hot-share -0.5"},
		{Shift, func(o *WorkloadOptions) { o.HotShare = nan }, "hot-share NaN"},
		{HotRange, func(o *WorkloadOptions) { o.HotWidth = 0 }, "hot-width 0"},
		{HotRange, func(o *WorkloadOptions) { o.HotWidth = 0.6 }, "hot-width 0.6"},
		{Shift, func(o *WorkloadOptions) { o.HotWidth = 0.4 }, "hot-width: a range of 400000 of 1000000 keys cannot move clear of itself"},
		{Zipf, func(o *WorkloadOptions) { o.Skew = 1 }, "skew 1:"},
		{Zipf, func(o *WorkloadOptions) { o.Skew = 0.5 }, "skew 0.5"},
		{Zipf, func(o *WorkloadOptions) { o.Skew = 101 }, "skew 101"},
		{Zipf, func(o *WorkloadOptions) { o.Skew = nan }, "skew NaN"},
		{Shift, func(o *WorkloadOptions) { o.ShiftEvery = 0 }, "shift-every 0s"},
		{Shift, func(o *WorkloadOptions) { o.ShiftEvery = 25 * time.Hour }, "shift-every 25h0m0s"},
	} {
		o := DefaultWorkloadOptions()
		if tc.mod != nil {
			tc.mod(&o)
		}
		w, err := ParseWorkload(tc.name, o)
		if err == nil {
			t.Errorf("ParseWorkload(%q, %+v) = %v, want an error", tc.name, o, w)
			continue
		}
		if !errors.Is(err, ErrInvalidWorkload) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseWorkload(%q): %v; want ErrInvalidWorkload naming %q", tc.name, err, tc.want)
		}
	}
	// Options a workload does not use are not checked.
	o := DefaultWorkloadOptions()
	o.Skew, o.ShiftEvery, o.HotWidth = 0, 0, 0
	if _, err := ParseWorkload(HotKey, o); err != nil {
		t.Errorf("hotkey with unused options zero: %v", err)
	}
}

func TestWorkloadStrings(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{Uniform, "uniform over 1000000 keys user:00000000..user:00999999, writes 50%"},
		{Zipf, "zipf s=1.1 over 1000000 keys (hottest user:00381967), writes 50%"},
		{HotKey, "hotkey: 90% of ops on user:00618033, the rest uniform over 1000000 keys, writes 50%"},
		{HotRange, "hotrange: 80% of ops in [user:00381967, user:00391967) (10000 keys), the rest uniform over 1000000 keys, writes 50%"},
		{Shift, "shift: 80% of ops in a range of 10000 keys that moves every 30s (first [user:00381967, user:00391967)), the rest uniform over 1000000 keys, writes 50%"},
	} {
		w := mustWorkload(t, tc.name, nil)
		if got := w.String(); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
		if w.Name() != tc.name {
			t.Errorf("Name() = %q, want %q", w.Name(), tc.name)
		}
	}
}
