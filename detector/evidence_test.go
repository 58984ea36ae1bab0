package detector

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/hotsplit/hotsplit/catalog"
)

// The rules of cluster version 3 (AllRules): cuts on the best evidence with
// confidence intervals (evidence.go) and isolation of a key whose own load
// is hot (heavykey.go). Route [a, b) has 16 buckets: bucket i holds the
// keys "a"+[16i, 16i+16), so "ap…" is bucket 7.

// known is a top-K key of exactly known load (no sampling noise, no
// Space-Saving error).
func known(k string, lower uint64) KeyEstimate {
	return KeyEstimate{Key: []byte(k), Lower: lower, Upper: lower}
}

// sampledAt16 is a top-K key whose lower estimate comes from writes
// sampled one in 16 (weight 4): variance 16²·4²·writes = 64·lower.
func sampledAt16(k string, lower uint64) KeyEstimate {
	return KeyEstimate{Key: []byte(k), Lower: lower, Upper: lower, Variance: 64 * lower}
}

// manySamples are n equal-weight sampled keys prefix00, prefix01, ….
func manySamples(prefix string, n int) []WeightedKey {
	out := make([]WeightedKey, n)
	for i := range out {
		out[i] = WeightedKey{Key: fmt.Appendf(nil, "%s%02d", prefix, i), Weight: 100}
	}
	return out
}

// splitCaseV3 adds the v3 expectations to a split case.
type splitCaseV3 struct {
	splitCase
	evidence Evidence
	exact    bool // the interval is the point
}

func TestEvidenceCutSplitKey(t *testing.T) {
	in7 := buckets(16, map[int]uint64{7: 60_000})
	five := []KeyEstimate{known("ap1", 12_000), known("ap2", 12_000), known("ap3", 12_000), known("ap4", 12_000), known("ap5", 12_000)}
	cases := []splitCaseV3{
		{splitCase: splitCase{name: "five keys of known load in one bucket: the most balanced cut between them", start: "a", end: "b",
			row:    Row{Buckets: in7, TopKeys: five},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap3"), isolation: ReasonTopKShare, left: 4000, right: 6000},
			evidence: EvidenceTopKeys, exact: true},
		{splitCase: splitCase{name: "the heavier key of the two around the cut goes to the edge of its child", start: "a", end: "b",
			row: Row{Buckets: in7, SampleRate: 16,
				TopKeys: []KeyEstimate{sampledAt16("ap1", 20_400), sampledAt16("ap2", 19_800), sampledAt16("ap3", 19_800)}},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap1\x00"), isolation: ReasonTopKShare, left: 3400, right: 6600},
			evidence: EvidenceTopKeys},
		{splitCase: splitCase{name: "keys in different buckets: cut at a bucket boundary, exact, however few the samples", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{2: 20_000, 5: 20_000, 9: 20_000}), Samples: samples("a\x25", "a\x55", "a\x95")},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("a\x90"), isolation: ReasonNoTopK, left: 6666, right: 3334},
			evidence: EvidenceBuckets, exact: true},
		{splitCase: splitCase{name: "an exact bucket cut beats a more balanced one among samples", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{3: 27_000, 7: 33_000}), Samples: append(samples("a\x35"), manySamples("ap", 32)...)},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap"), isolation: ReasonNoTopK, left: 4500, right: 5500},
			evidence: EvidenceBuckets, exact: true},
		{splitCase: splitCase{name: "enough samples place a cut inside a bucket", start: "a", end: "b",
			row: Row{Buckets: in7, Samples: manySamples("ap", 32),
				TopKeys: []KeyEstimate{{Key: []byte("ap05"), Lower: 1_000, Upper: 9_000}}}, // error above an eighth: not a known key
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap16"), isolation: ReasonTopKShare, left: 5000, right: 5000},
			evidence: EvidenceSamples},
		{splitCase: splitCase{name: "a cut inside a bucket weighs only that bucket's samples", start: "a", end: "b",
			row: Row{Buckets: buckets(16, map[int]uint64{2: 40_000, 9: 20_000}),
				Samples: append(manySamples("a\x20", 32), samples("a\x95x", "a\x96y", "a\x97z")...)},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("a\x2024"), isolation: ReasonNoTopK, left: 5000, right: 5000},
			evidence: EvidenceSamples},
		{splitCase: splitCase{name: "eight samples: balanced by the estimate, not at confidence", start: "a", end: "b",
			row:    Row{Buckets: in7, Samples: samples("ap1", "ap2", "ap3", "ap4", "ap5", "ap6", "ap7", "ap8")},
			reason: ReasonCutUncertain, isolation: ReasonNoTopK, left: 5000, right: 5000},
			evidence: EvidenceSamples},
		{splitCase: splitCase{name: "three samples without buckets: uncertain", start: "a", end: "b",
			row:    Row{Samples: samples("ak", "am", "ap")},
			reason: ReasonCutUncertain, isolation: ReasonNoTopK, left: 6666, right: 3334},
			evidence: EvidenceSamples},
		{splitCase: splitCase{name: "exact buckets that leave no fifth on a side: no_split_key with the numbers", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{2: 54_000, 12: 6_000})},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK, left: 9000, right: 1000},
			evidence: EvidenceBuckets, exact: true},
		{splitCase: splitCase{name: "no evidence at all: no_evidence, never a midpoint", start: "a", end: "b",
			row:    Row{},
			reason: ReasonNoEvidence, isolation: ReasonNoTopK}},
		{splitCase: splitCase{name: "keys and samples of other routes only: no_evidence", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{known("zz", 60_000)}, Samples: samples("Z", "c")},
			reason: ReasonNoEvidence, isolation: ReasonNoTopK}},
		{splitCase: splitCase{name: "a key hot on its own is isolated whatever its share", start: "a", end: "b",
			row: Row{Writes: 30_000, Buckets: buckets(16, map[int]uint64{7: 120_000}), SampleRate: 16,
				TopKeys: []KeyEstimate{sampledAt16("ap3", 60_000), sampledAt16("ap9", 60_000)}},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("ap3", "ap3\x00")},
			evidence: EvidenceKeyLoad},
		{splitCase: splitCase{name: "a key hot on its own but below a floor set above the threshold: cut instead", start: "a", end: "b",
			row: Row{Writes: 30_000, Buckets: buckets(16, map[int]uint64{7: 120_000}), SampleRate: 16,
				TopKeys: []KeyEstimate{sampledAt16("ap3", 60_000), sampledAt16("ap9", 60_000)}},
			cfg:    func(c *Config) { c.TopKeyAbsoluteFloor = 70_000 },
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap9"), isolation: ReasonTopKShare, left: 5000, right: 5000},
			evidence: EvidenceTopKeys},
		{splitCase: splitCase{name: "a key whose bound is too wide to be hot on its own: the cut between the keys", start: "a", end: "b",
			row: Row{Writes: 30_000, Buckets: buckets(16, map[int]uint64{7: 120_000}), SampleRate: 16,
				TopKeys: []KeyEstimate{withVariance(known("ap3", 60_000), 400_000_000), withVariance(known("ap9", 60_000), 400_000_000)}},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap9"), isolation: ReasonTopKShare, left: 5000, right: 5000},
			evidence: EvidenceTopKeys},
		{splitCase: splitCase{name: "the same wide variance at sample rate 1 is no noise: the key is isolated", start: "a", end: "b",
			row: Row{Writes: 30_000, Buckets: buckets(16, map[int]uint64{7: 120_000}), SampleRate: 1,
				TopKeys: []KeyEstimate{withVariance(known("ap3", 60_000), 400_000_000), withVariance(known("ap9", 60_000), 400_000_000)}},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("ap3", "ap3\x00")},
			evidence: EvidenceKeyLoad},
		{splitCase: splitCase{name: "a dominant key is still isolated when nothing balances", start: "a", end: "b",
			row: Row{TopKeys: []KeyEstimate{withVariance(hotKey("ap3", 48_000, 50_000), 4_000_000)}, Buckets: in7,
				Samples: []WeightedKey{{Key: []byte("ap1"), Weight: 6}, {Key: []byte("ap3"), Weight: 48}, {Key: []byte("ap5"), Weight: 6}}},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("ap3", "ap3\x00")}},
		{splitCase: splitCase{name: "[H, H·0x00) is already isolated by its shape", start: "k", end: "k\x00",
			row:    Row{TopKeys: []KeyEstimate{known("k", 60_000)}},
			reason: ReasonAlreadyIsolated, isolation: ReasonAlreadyIsolated}},
	}
	for _, tc := range cases {
		tc.rules = AllRules
		t.Run(tc.name, func(t *testing.T) {
			runSplitCase(t, tc.splitCase)
			x := explanationOf(t, tc.splitCase)
			if x.Evidence != tc.evidence {
				t.Errorf("evidence %v, want %v", x.Evidence, tc.evidence)
			}
			if tc.evidence == EvidenceUnspecified || tc.evidence == EvidenceKeyLoad {
				return
			}
			checkInterval(t, x)
			if exact := x.LeftShareLoBP == x.LeftShareHiBP; exact != tc.exact {
				t.Errorf("interval %d..%d bp: exact %v, want %v", x.LeftShareLoBP, x.LeftShareHiBP, exact, tc.exact)
			}
			switch lo := min(x.LeftShareLoBP, x.RightShareLoBP); {
			case x.Reason == ReasonPlanned && lo < MinSideShareBP:
				t.Errorf("planned with a side's lower bound at %d bp", lo)
			case x.Reason == ReasonCutUncertain && lo >= MinSideShareBP:
				t.Errorf("uncertain with both lower bounds at least %d bp", lo)
			}
		})
	}
}

// explanationOf runs tc and returns the route's explanation.
func explanationOf(t *testing.T, tc splitCase) Explanation {
	t.Helper()
	cfg := DefaultConfig()
	if tc.cfg != nil {
		tc.cfg(&cfg)
	}
	c, id := routeUnderTest(t, tc.start, tc.end)
	row := tc.row
	row.RouteID = id
	if row.Writes == 0 && row.Reads == 0 {
		row.Writes = hotWrites
	}
	in := enabledInput(c, cfg)
	in.Rules = tc.rules
	s, _ := Observe(in, eligibleState(t, cfg, id), column(row))
	tr, _ := s.Get(id)
	return tr.Explanation
}

// checkInterval: each side's interval holds its point, and the two
// sides' intervals mirror each other.
func checkInterval(t *testing.T, x Explanation) {
	t.Helper()
	if !(x.LeftShareLoBP <= x.LeftShareBP && x.LeftShareBP <= x.LeftShareHiBP && x.LeftShareHiBP <= fullShareBP) ||
		x.RightShareLoBP != fullShareBP-x.LeftShareHiBP || x.RightShareHiBP != fullShareBP-x.LeftShareLoBP ||
		x.LeftShareBP+x.RightShareBP != fullShareBP {
		t.Errorf("interval left %d (%d..%d) right %d (%d..%d)", x.LeftShareBP, x.LeftShareLoBP, x.LeftShareHiBP,
			x.RightShareBP, x.RightShareLoBP, x.RightShareHiBP)
	}
}

// TestFewKeysUnderBalanceRules: the version 2 rules decline the few-keys rows the
// version 3 rules cut (fewer than four sampled keys; keys of known load
// are no evidence to them), and record none of the version 3 numbers.
func TestFewKeysUnderBalanceRules(t *testing.T) {
	in7 := buckets(16, map[int]uint64{7: 60_000})
	for _, row := range []Row{
		{Buckets: in7, TopKeys: []KeyEstimate{known("ap1", 12_000), known("ap2", 12_000), known("ap3", 12_000), known("ap4", 12_000), known("ap5", 12_000)}},
		{Buckets: buckets(16, map[int]uint64{2: 20_000, 5: 20_000, 9: 20_000}), Samples: samples("a\x25", "a\x55", "a\x95")},
	} {
		tc := splitCase{start: "a", end: "b", row: row, rules: balanceRules}
		x := explanationOf(t, tc)
		if x.Reason != ReasonNoSplitKey {
			t.Errorf("v2: %v, want no_split_key", x.Reason)
		}
		if x.Evidence != 0 || x.LeftShareLoBP != 0 || x.LeftShareHiBP != 0 || x.RightShareLoBP != 0 || x.RightShareHiBP != 0 || x.KnownKeys != 0 {
			t.Errorf("v2 recorded version 3 numbers: %+v", x)
		}
	}
}

// TestEvidenceCutPlanExplanation: a planned cut keeps the evidence and the interval
// behind it.
func TestEvidenceCutPlanExplanation(t *testing.T) {
	cfg := DefaultConfig()
	c, id := routeUnderTest(t, "a", "b")
	in := enabledInput(c, cfg)
	in.Rules = AllRules
	row := Row{RouteID: id, Writes: hotWrites, Buckets: buckets(16, map[int]uint64{7: 60_000}), SampleRate: 16,
		TopKeys: []KeyEstimate{sampledAt16("ap1", 20_400), sampledAt16("ap2", 19_800), sampledAt16("ap3", 19_800)},
		Samples: samples("ap1", "ap2", "ap3")}
	_, plans := Observe(in, eligibleState(t, cfg, id), column(row))
	if len(plans) != 1 {
		t.Fatalf("%d plans", len(plans))
	}
	x := plans[0].Explanation
	// The fraction 20400/60000 of the bucket has sd √(X_R²·V_L + X_L²·V_R)/X²
	// with V the variances times 15/16: 149.9 bp; ×2.326, rounded up.
	want := Explanation{Reason: ReasonPlanned, Origin: OriginBalance, IsolationReason: ReasonTopKShare,
		AtMs: t0 + minute, FirstAtMs: t0 + minute, Score: 60_000, ConsecutiveOver: 3,
		SplitKeys: keys("ap1\x00"), HotKey: []byte("ap1"), HotKeyLowerPerMin: 17_826, HotKeyUpperPerMin: 20_400, HotKeyShareBP: 2971,
		MedianBucket: 7, OpID: 100, ProjectedRoutes: 4,
		LeftShareBP: 3400, RightShareBP: 6600, BucketShareBP: 10_000, HotKeyUpperShareBP: 3400, SampleRate: 16,
		Floor: 25_000, Threshold: 50_000, CandidateWindows: 3, HoldBandBP: 8000, SamplePoints: 0,
		Evidence: EvidenceTopKeys, LeftShareLoBP: 3046, LeftShareHiBP: 3754, RightShareLoBP: 6246, RightShareHiBP: 6954, KnownKeys: 3}
	if got := fmt.Sprintf("%+v", x); got != fmt.Sprintf("%+v", want) {
		t.Fatalf("explanation\n got %s\nwant %+v", got, want)
	}
	sd := math.Sqrt(39_600*39_600*64*20_400*15/16+20_400*20_400*64*39_600*15/16) / (60_000 * 60_000) * 10_000
	if half := float64(x.LeftShareBP - x.LeftShareLoBP); half < 2.326*sd || half > 2.326*sd+8 {
		t.Errorf("half width %.0f bp, want 2.326·%.1f bp rounded up", half, sd)
	}
}

// TestRatioSd: the integer sd of a ratio of two estimates against the
// delta method in floating point: never narrower, at most a few bp wider.
func TestRatioSd(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.Uint64Range(1, 1<<40).Draw(t, "l")
		r := rapid.Uint64Range(1, 1<<40).Draw(t, "r")
		vl := rapid.Uint64Range(0, 1<<50).Draw(t, "vl")
		vr := rapid.Uint64Range(0, 1<<50).Draw(t, "vr")
		got := ratioSdBP(l, r, vl, vr)
		x := float64(l + r)
		want := math.Sqrt(float64(r)*float64(r)*float64(vl)+float64(l)*float64(l)*float64(vr)) / (x * x) * 1e4
		if want > 1<<30 {
			return // capped
		}
		if float64(got) < want-1e-6 || float64(got) > want+4 {
			t.Fatalf("ratioSdBP(%d, %d, %d, %d) = %d, want %.2f", l, r, vl, vr, got, want)
		}
	})
}

func TestFinitePopulation(t *testing.T) {
	for _, tc := range []struct {
		v    uint64
		rate uint32
		want uint64
	}{{1600, 16, 1500}, {1600, 1, 0}, {1600, 0, 1600}, {^uint64(0), 2, ^uint64(0) / 2}} {
		if got := finitePopulation(tc.v, tc.rate); got != tc.want {
			t.Errorf("finitePopulation(%d, %d) = %d, want %d", tc.v, tc.rate, got, tc.want)
		}
	}
}

// TestCutIntervalCoverage: the interval is a confidence interval. A route
// holds three keys (34/33/33% of its load, half the operations writes);
// each trial samples its operations one in 16 as a reporter does, the
// top-K estimates and their variances follow the leader's formulas, and
// the bucket load is exact. Over 3000 trials at each size (400 under
// -short) the true left share lies within the recorded interval in at
// least 96% of the trials that plan a cut (98% nominal), and no cut is
// planned whose true smaller side is below the minimum share. With 6000 operations (about 375
// sampled) every trial plans; with 600 (37 sampled, a 1 s column) most
// are refused as uncertain, but not all.
func TestCutIntervalCoverage(t *testing.T) {
	cfg := DefaultConfig()
	r := &catalog.RouteDescriptor{ID: 1, Start: []byte("a"), End: []byte("b")}
	keysOf := []string{"ap1", "ap2", "ap3"}
	shares := []float64{0.34, 0.33, 0.33}
	rng := rand.New(rand.NewPCG(23, 1))
	for _, ops := range []int{600, 6000} { // a 1 s and a 10 s column at 1.8× the threshold, about
		covered, planned, bad := 0, 0, 0
		trials := 3000
		if testing.Short() {
			trials = 400 // CI's unit stage; a plain go test runs the full count
		}
		for range trials {
			var total uint64
			row := Row{SampleRate: 16}
			truth := make([]uint64, len(keysOf))
			for i, k := range keysOf {
				var w, rd uint64
				n := int(float64(ops)*shares[i] + 0.5)
				for range n {
					write := rng.IntN(2) == 0
					if write {
						truth[i] += 4
					} else {
						truth[i]++
					}
					if rng.IntN(16) == 0 {
						if write {
							w++
						} else {
							rd++
						}
					}
				}
				total += truth[i]
				lower := 16 * (4*w + rd)
				if lower > 0 {
					row.TopKeys = append(row.TopKeys, KeyEstimate{Key: []byte(k), Lower: lower, Upper: lower,
						SampledReads: rd, SampledWrites: w, Variance: 256 * (16*w + rd)})
				}
			}
			row.Buckets = buckets(16, map[int]uint64{7: total})
			var c splitChoice
			evidenceCut(cfg, r, &row, nil, &c)
			if c.decline != ReasonUnspecified {
				continue
			}
			// The true left share of the cut: the keys below it.
			var left uint64
			for i, k := range keysOf {
				if k < string(c.keys[0]) {
					left += truth[i]
				}
			}
			planned++
			share := uint32(left * fullShareBP / total)
			if share >= c.leftLoBP && share <= c.leftHiBP {
				covered++
			}
			if min(share, fullShareBP-share) < MinSideShareBP {
				bad++
			}
		}
		t.Logf("%d operations: %d of %d trials planned a cut; the interval covered the truth in %d (%.1f%%)",
			ops, planned, trials, covered, 100*float64(covered)/float64(max(planned, 1)))
		if (ops > 1000 && planned < trials) || planned < trials/10 || covered*100 < 96*planned || bad > 0 {
			t.Errorf("%d operations: %d planned, %d covered, %d with a true side below %d bp", ops, planned, covered, bad, MinSideShareBP)
		}
	}
}

// TestEvidenceCutProperties: whatever the evidence, a planned cut lies
// strictly inside the route with both lower bounds at the minimum share,
// the intervals hold their points, and the outcome does not depend on the
// order of the top keys and samples.
func TestEvidenceCutProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCatalog(t)
		routes := routesOf(c)
		r := rapid.SampledFrom(routes).Draw(t, "route")
		cfg := DefaultConfig()
		cfg.Buckets = uint32(rapid.SampledFrom([]int{1, 4, 16}).Draw(t, "buckets"))
		row := genRow(t, cfg, r, minute)
		for range rapid.IntRange(0, 40).Draw(t, "samples") {
			row.Samples = append(row.Samples, WeightedKey{Key: genKeyFor(t, r), Weight: rapid.Uint64Range(0, 1000).Draw(t, "w")})
		}
		for i := range row.TopKeys {
			row.TopKeys[i].Variance = rapid.Uint64Range(0, 1<<40).Draw(t, "var")
		}
		row.SampleRate = uint32(rapid.SampledFrom([]int{0, 1, 16}).Draw(t, "rate"))
		var a splitChoice
		evidenceCut(cfg, r, &row, nil, &a)
		shuffled := row
		shuffled.TopKeys = slices.Clone(row.TopKeys)
		shuffled.Samples = slices.Clone(row.Samples)
		slices.Reverse(shuffled.TopKeys)
		slices.Reverse(shuffled.Samples)
		var b splitChoice
		evidenceCut(cfg, r, &shuffled, nil, &b)
		if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
			t.Fatalf("order changed the outcome:\n%+v\n%+v", a, b)
		}
		x := Explanation{LeftShareBP: a.leftShareBP, RightShareBP: a.rightShareBP, LeftShareLoBP: a.leftLoBP,
			LeftShareHiBP: a.leftHiBP, RightShareLoBP: a.rightLoBP, RightShareHiBP: a.rightHiBP}
		if a.leftShareBP != 0 || a.rightShareBP != 0 {
			if !(x.LeftShareLoBP <= x.LeftShareBP && x.LeftShareBP <= x.LeftShareHiBP && x.LeftShareHiBP <= fullShareBP) ||
				x.RightShareLoBP != fullShareBP-x.LeftShareHiBP || x.RightShareHiBP != fullShareBP-x.LeftShareLoBP {
				t.Fatalf("interval %+v", x)
			}
		}
		if a.decline != ReasonUnspecified {
			return
		}
		if len(a.keys) != 1 || !r.Contains(a.keys[0]) || string(a.keys[0]) == string(r.Start) || len(a.keys[0]) > catalog.MaxBoundaryLen {
			t.Fatalf("cut %q outside (%q, %q)", a.keys, r.Start, r.End)
		}
		if min(a.leftLoBP, a.rightLoBP) < MinSideShareBP {
			t.Fatalf("planned with lower bounds %d | %d", a.leftLoBP, a.rightLoBP)
		}
	})
}

// BenchmarkEvidenceCut: the version 3 cut of one candidate with a full
// row of evidence (16 buckets, 32 top keys, 128 samples).
func BenchmarkEvidenceCut(b *testing.B) {
	cfg := DefaultConfig()
	r := &catalog.RouteDescriptor{ID: 1, Start: []byte("a"), End: []byte("b")}
	row := Row{Writes: 15_000, SampleRate: 16, Buckets: make([]uint64, 16)}
	for i := range row.Buckets {
		row.Buckets[i] = uint64(1000 * (i + 1))
	}
	for i := range 32 {
		row.TopKeys = append(row.TopKeys, sampledAt16(fmt.Sprintf("a%c%03d", 16*(i%16), i), uint64(500+i)))
	}
	for i := range 128 {
		row.Samples = append(row.Samples, WeightedKey{Key: fmt.Appendf(nil, "a%c%03d", 2*i, i), Weight: uint64(50 + i)})
	}
	b.ReportAllocs()
	for b.Loop() {
		var c splitChoice
		evidenceCut(cfg, r, &row, nil, &c)
	}
}
