package detector

import (
	"bytes"
	"fmt"
	"testing"

	"pgregory.net/rapid"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// The balance rules (balanceRules, on from cluster version 2): split keys at
// the balance point of the evidence, isolation on the lower confidence
// bound, already_isolated by shape, the hold band and coherent
// explanations. With no rule flags (Input.Rules 0, noRules) the detector
// runs its first rules.

// samples are equal-weight sampled keys.
func samples(ks ...string) []WeightedKey {
	out := make([]WeightedKey, len(ks))
	for i, k := range ks {
		out[i] = WeightedKey{Key: []byte(k), Weight: 100}
	}
	return out
}

// withVariance is a top-K entry whose lower estimate has the given
// variance (the leader's sum of scaled Poisson counts).
func withVariance(k KeyEstimate, v uint64) KeyEstimate {
	k.Variance = v
	return k
}

// TestBalanceSplitKey: route [a, b) has 16 buckets with boundaries a·0x10, …,
// a·0xf0 (bucket 7 holds the keys "ap…"); the row scores 60000.
func TestBalanceSplitKey(t *testing.T) {
	in7 := buckets(16, map[int]uint64{7: 60_000})
	mid := buckets(16, map[int]uint64{2: 100, 5: 300, 9: 200})
	cases := []splitCase{
		{name: "sampled keys place the cut inside the one loaded bucket", start: "a", end: "b",
			row:    Row{Buckets: in7, Samples: samples("ap1", "ap2", "ap3", "ap4", "ap5", "ap6", "ap7", "ap8")},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap5"), isolation: ReasonNoTopK, left: 5000, right: 5000},
		{name: "the key is the shortest separator of the evidence around the cut", start: "u", end: "v",
			row:    Row{Buckets: buckets(16, map[int]uint64{7: 60_000}), Samples: samples("user:0049", "user:0050", "user:0050/x\x88\x80", "user:0051")},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("user:0050/"), isolation: ReasonNoTopK, left: 5000, right: 5000},
		{name: "a loaded bucket without samples is an interval no cut enters", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{3: 30_000, 10: 30_000}), Samples: samples("a\xa5x", "a\xa6y")},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("a\xa5"), isolation: ReasonNoTopK, left: 5000, right: 5000},
		{name: "bucket loads alone cut between loaded buckets at the shortest key", start: "a", end: "b",
			row:    Row{Buckets: mid},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("a\x90"), isolation: ReasonNoTopK, left: 6666, right: 3334},
		{name: "no cut leaves a fifth of the load on each side: declined with the numbers", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{2: 54_000, 12: 6_000})},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK, left: 9000, right: 1000},
		{name: "samples without bucket evidence share the row's load", start: "a", end: "b",
			row:    Row{Samples: samples("ak", "am", "ap", "ar")},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("ap"), isolation: ReasonNoTopK, left: 5000, right: 5000},
		{name: "too few samples to cut between: declined", start: "a", end: "b",
			row:    Row{Samples: samples("ak", "am", "ap")},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK, left: 3333, right: 6667},
		{name: "samples outside the route or in empty buckets are ignored", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{3: 30_000, 10: 30_000}), Samples: samples("Z", "a\x55", "zz")},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("a\xa0"), isolation: ReasonNoTopK, left: 5000, right: 5000},
		{name: "no evidence at all declines, never a midpoint", start: "a", end: "b",
			row:    Row{},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK},
		{name: "[H, H·0x00) is already isolated by its shape, whatever the share", start: "k", end: "k\x00",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k", 10_000, 12_000)}},
			reason: ReasonAlreadyIsolated, isolation: ReasonAlreadyIsolated},
		{name: "[H, H·0x00) is already isolated with no evidence at all", start: "k", end: "k\x00",
			row:    Row{},
			reason: ReasonAlreadyIsolated, isolation: ReasonAlreadyIsolated},
		{name: "a key whose bound clears share and floor is isolated", start: "a", end: "z",
			row:    Row{TopKeys: []KeyEstimate{withVariance(hotKey("k", 55_000, 56_000), 1_000_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("k", "k\x00")},
		{name: "the same estimate with a wide bound misses the floor: balance instead", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{withVariance(hotKey("a5", 55_000, 56_000), 400_000_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginBalance, keys: keys("a\x90"), isolation: ReasonTopKErrorBound, left: 6666, right: 3334},
		{name: "a dominant key whose bound misses only the share is isolated when nothing balances", start: "a", end: "b",
			row: Row{TopKeys: []KeyEstimate{withVariance(hotKey("ap3", 48_000, 50_000), 4_000_000)}, Buckets: in7,
				Samples: []WeightedKey{{Key: []byte("ap1"), Weight: 6}, {Key: []byte("ap3"), Weight: 48}, {Key: []byte("ap5"), Weight: 6}}},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("ap3", "ap3\x00")},
		{name: "a dominant key below the floor at confidence is not isolated", start: "a", end: "b",
			row: Row{TopKeys: []KeyEstimate{withVariance(hotKey("ap3", 48_000, 50_000), 4_000_000)}, Buckets: in7,
				Samples: []WeightedKey{{Key: []byte("ap1"), Weight: 6}, {Key: []byte("ap3"), Weight: 48}, {Key: []byte("ap5"), Weight: 6}}},
			cfg:    func(c *Config) { c.TopKeyAbsoluteFloor = 49_000 },
			reason: ReasonNoSplitKey, isolation: ReasonTopKErrorBound, left: 1000, right: 9000},
	}
	for _, tc := range cases {
		tc.rules = balanceRules
		t.Run(tc.name, func(t *testing.T) { runSplitCase(t, tc) })
	}
}

// TestBalancePlanExplanation: a planned key keeps the numbers behind it and the
// settings it was judged by.
func TestBalancePlanExplanation(t *testing.T) {
	cfg := DefaultConfig()
	c, id := routeUnderTest(t, "a", "b")
	in := enabledInput(c, cfg)
	in.Rules = balanceRules
	row := Row{RouteID: id, Writes: hotWrites, Buckets: buckets(16, map[int]uint64{7: 60_000}), SampleRate: 16,
		Samples: samples("ap1", "ap2", "ap3", "ap4"), TopKeys: []KeyEstimate{withVariance(hotKey("ap2", 15_000, 18_000), 1)}}
	s, plans := Observe(in, eligibleState(t, cfg, id), column(row))
	if len(plans) != 1 {
		t.Fatalf("%d plans", len(plans))
	}
	x := plans[0].Explanation
	want := Explanation{Reason: ReasonPlanned, Origin: OriginBalance, IsolationReason: ReasonTopKShare,
		AtMs: t0 + minute, FirstAtMs: t0 + minute, Score: 60_000, ConsecutiveOver: 3,
		SplitKeys: keys("ap3"), HotKey: []byte("ap2"), HotKeyLowerPerMin: 14_996, HotKeyUpperPerMin: 18_000, HotKeyShareBP: 2499,
		MedianBucket: 7, OpID: 100, ProjectedRoutes: 4,
		LeftShareBP: 5000, RightShareBP: 5000, BucketShareBP: 10_000, HotKeyUpperShareBP: 3000, SampleRate: 16,
		Floor: 25_000, Threshold: 50_000, CandidateWindows: 3, HoldBandBP: 8000, SamplePoints: 4}
	if got := fmt.Sprintf("%+v", x); got != fmt.Sprintf("%+v", want) {
		t.Fatalf("explanation\n got %s\nwant %+v", got, want)
	}
	if tr, _ := s.Get(id); fmt.Sprintf("%+v", tr.Explanation) != fmt.Sprintf("%+v", want) {
		t.Fatalf("tracked explanation %+v differs from the plan's", tr.Explanation)
	}
}

// TestHoldBand: a column in [hold·threshold, threshold) holds the counter
// (balanceRules, hold > 0); below it, or absent, or strict, it resets. noRules
// is strict whatever the config says.
func TestHoldBand(t *testing.T) {
	const (
		hot  = 15_000 // 60000/min
		band = 11_250 // 45000/min: 90% of the threshold
		low  = 9_000  // 36000/min: 72%
		gone = 0      // absent from the column
	)
	cases := []struct {
		name   string
		rules  Rules
		hold   uint32
		writes []uint64
		want   []uint32 // counter after each column
		reason []Reason
	}{
		{"hold 8000: the band holds, three hot columns plan", balanceRules, 8000,
			[]uint64{hot, band, hot, band, hot}, []uint32{1, 1, 2, 2, 3},
			[]Reason{ReasonCounting, ReasonHoldBand, ReasonCounting, ReasonHoldBand, ReasonPlanned}},
		{"hold 8000: below the band resets", balanceRules, 8000,
			[]uint64{hot, hot, low, hot}, []uint32{1, 2, 0, 1},
			[]Reason{ReasonCounting, ReasonCounting, ReasonBelowThreshold, ReasonCounting}},
		{"hold 8000: an absent route resets", balanceRules, 8000,
			[]uint64{hot, hot, gone, hot}, []uint32{1, 2, 0, 1},
			[]Reason{ReasonCounting, ReasonCounting, ReasonBelowThreshold, ReasonCounting}},
		{"hold 9500: 90% is below the band", balanceRules, 9500,
			[]uint64{hot, band, hot}, []uint32{1, 0, 1},
			[]Reason{ReasonCounting, ReasonBelowThreshold, ReasonCounting}},
		{"hold 0 is strict", balanceRules, 0,
			[]uint64{hot, band, hot}, []uint32{1, 0, 1},
			[]Reason{ReasonCounting, ReasonBelowThreshold, ReasonCounting}},
		{"a band column with nothing counted is below the threshold", balanceRules, 8000,
			[]uint64{band, band}, []uint32{0, 0},
			[]Reason{ReasonUnspecified, ReasonUnspecified}},
		{"version 1 rules are strict whatever the config", noRules, 8000,
			[]uint64{hot, band, hot}, []uint32{1, 0, 1},
			[]Reason{ReasonCounting, ReasonCounting, ReasonCounting}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.HoldBandBP = tc.hold
			c := newCatalog(t, "m")
			var s *State
			for i, w := range tc.writes {
				col := Column{WindowStartMs: t0 + uint64(i)*minute, AtMs: t0 + uint64(i+1)*minute}
				if w != gone {
					col.Rows = []Row{{RouteID: 1, Writes: w, Buckets: buckets(16, map[int]uint64{3: 2 * w, 10: 2 * w})}}
				}
				in := Input{Config: cfg, Catalog: c, NowMs: col.AtMs, Enabled: true, NextOpID: 1, Rules: tc.rules}
				s, _ = Observe(in, s, col)
				if got := counterOf(s, 1); got != tc.want[i] {
					t.Fatalf("column %d: counter %d, want %d", i, got, tc.want[i])
				}
				if got := reasonOf(s, 1); got != tc.reason[i] {
					t.Fatalf("column %d: reason %v, want %v", i, got, tc.reason[i])
				}
			}
		})
	}
}

// TestColumnExplanationsCoherent: under balanceRules the explanation's score,
// counter and reason come from one column, also after the load drops;
// under noRules a cooled route keeps its last hot explanation.
func TestColumnExplanationsCoherent(t *testing.T) {
	cfg := DefaultConfig()
	c := newCatalog(t, "m", "n", "n\x00")
	run := func(rules Rules, rows ...[]Row) *State {
		var s *State
		for i, r := range rows {
			col := Column{WindowStartMs: t0 + uint64(i)*minute, AtMs: t0 + uint64(i+1)*minute, Rows: r}
			s, _ = Observe(Input{Config: cfg, Catalog: c, NowMs: col.AtMs, Enabled: true, NextOpID: 1, Rules: rules}, s, col)
		}
		return s
	}
	// Route 1 is hot twice, then below the hold band; route 3 is
	// [n, n·0x00), hot three times then below the band.
	const below = 9_000 // 36000/min: under the 80% band
	hotCold := [][]Row{
		{hot(1), writesRow(3, hotWrites)}, {hot(1), writesRow(3, hotWrites)},
		{writesRow(1, below), writesRow(3, hotWrites)}, {writesRow(1, below), writesRow(3, below)}, {writesRow(1, 1000), writesRow(3, below)},
	}
	s := run(balanceRules, hotCold...)
	tr, _ := s.Get(1)
	x := tr.Explanation
	if x.Reason != ReasonBelowThreshold || x.Score != 36_000 || x.ConsecutiveOver != 0 || x.AtMs != t0+3*minute || x.Threshold != 50_000 {
		t.Fatalf("cooled route 1: %+v, want below_threshold from the first cold column (score 36000, counter 0)", x)
	}
	if tr.LastScore != 4000 || tr.ConsecutiveOver != 0 {
		t.Fatalf("route 1 last score %d counter %d", tr.LastScore, tr.ConsecutiveOver)
	}
	tr, _ = s.Get(3)
	if x := tr.Explanation; x.Reason != ReasonBelowThreshold || x.ConsecutiveOver != 0 || x.Score != 36_000 {
		t.Fatalf("cooled single-key route 3: %+v", x)
	}
	// The hot single-key route was explained already_isolated with its own
	// counter at every hot column.
	s3 := run(balanceRules, hotCold[:3]...)
	if tr, _ := s3.Get(3); tr.Explanation.Reason != ReasonAlreadyIsolated || tr.Explanation.ConsecutiveOver != 3 || tr.ConsecutiveOver != 3 {
		t.Fatalf("hot single-key route: %+v", tr)
	}
	// Without the rule the stale explanation stays (the incoherence
	// column_explanations fixes), so replicas of a version 1 cluster agree.
	s = run(noRules, hotCold...)
	if tr, _ := s.Get(1); tr.Explanation.Reason != ReasonCounting || tr.Explanation.ConsecutiveOver != 2 || tr.ConsecutiveOver != 0 {
		t.Fatalf("version 1 route 1: %+v", tr)
	}
}

// TestNoRulesHaveNoFlaggedOutputs: whatever the input, noRules never produces
// a version 2 origin, reason or explanation field, so a version 1 cluster's
// state stays what a version 1 binary computes.
func TestNoRulesHaveNoFlaggedOutputs(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCatalog(t)
		routes := routesOf(c)
		cfg := DefaultConfig()
		cfg.CandidateWindows = 1
		cfg.HoldBandBP = rapid.Uint32Range(0, 10_000).Draw(t, "hold")
		var rows []Row
		for _, r := range routes {
			if !rapid.Bool().Draw(t, "present") {
				continue
			}
			row := Row{RouteID: r.ID, Writes: rapid.Uint64Range(0, 40_000).Draw(t, "writes"),
				Buckets: buckets(16, map[int]uint64{rapid.IntRange(0, 15).Draw(t, "b"): 1000})}
			for range rapid.IntRange(0, 3).Draw(t, "samples") {
				row.Samples = append(row.Samples, WeightedKey{Key: genKeyFor(t, r), Weight: 10})
			}
			rows = append(rows, row)
		}
		s, plans := Observe(Input{Config: cfg, Catalog: c, NowMs: t0 + minute, Enabled: true, NextOpID: 1}, nil,
			Column{WindowStartMs: t0, AtMs: t0 + minute, Rows: rows})
		for _, p := range plans {
			if p.Origin == OriginBalance {
				t.Fatalf("noRules planned a balance split: %+v", p)
			}
		}
		for _, tr := range s.Tracked() {
			x := tr.Explanation
			if x.Reason == ReasonHoldBand || x.Reason == ReasonBelowThreshold || x.Origin == OriginBalance ||
				x.LeftShareBP != 0 || x.RightShareBP != 0 || x.BucketShareBP != 0 || x.HotKeyUpperShareBP != 0 ||
				x.SampleRate != 0 || x.Floor != 0 || x.Threshold != 0 || x.CandidateWindows != 0 || x.HoldBandBP != 0 || x.SamplePoints != 0 {
				t.Fatalf("noRules explanation with version 2 content: %+v", x)
			}
		}
	})
}

// TestBalancePlansAreValid: under balanceRules every planned key lies strictly
// inside its route and a balance plan leaves MinSideShareBP on each side.
func TestBalancePlansAreValid(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCatalog(t)
		routes := routesOf(c)
		r := rapid.SampledFrom(routes).Draw(t, "route")
		cfg := DefaultConfig()
		cfg.CandidateWindows = 1
		n := catalog.NewLayout(r.Start, r.End, 16).K()
		row := Row{RouteID: r.ID, Writes: 20_000, Buckets: make([]uint64, n)}
		for i := range row.Buckets {
			row.Buckets[i] = rapid.Uint64Range(0, 5000).Draw(t, "bucket")
		}
		for range rapid.IntRange(0, 12).Draw(t, "samples") {
			row.Samples = append(row.Samples, WeightedKey{Key: genKeyFor(t, r), Weight: rapid.Uint64Range(0, 100).Draw(t, "w")})
		}
		_, plans := Observe(Input{Config: cfg, Catalog: withStates(t, c, nil), NowMs: t0 + minute, Enabled: true, NextOpID: 1, Rules: balanceRules}, nil,
			Column{WindowStartMs: t0, AtMs: t0 + minute, Rows: []Row{row}})
		for _, p := range plans {
			if _, err := c.CheckSplit(p.RouteID, p.Keys[0]); err != nil && r.State == catalog.StateActive {
				t.Fatalf("plan key %s not inside %v: %v", catalog.FormatKey(p.Keys[0]), r, err)
			}
			x := p.Explanation
			if p.Origin == OriginBalance && (x.LeftShareBP < MinSideShareBP || x.RightShareBP < MinSideShareBP) {
				t.Fatalf("balance plan with shares %d|%d", x.LeftShareBP, x.RightShareBP)
			}
		}
	})
}

// TestLowerBound: the bound is the variance-stabilised one-sided 99%
// Poisson bound, close to the exact one, never above the estimate, and
// falls as the variance grows.
func TestLowerBound(t *testing.T) {
	cases := []struct{ lower, variance, want uint64 }{
		{0, 0, 0}, {100, 0, 100}, {0, 100, 0},
		{100, 100, 77},       // k = 100 events of weight 1: exact Poisson 99% bound 77.8
		{1000, 1000, 925},    // k = 1000: exact 927.1
		{1600, 25_600, 1247}, // k = 100 events of weight 16 (rate 16, weight 1): 16 × 78.1
		{10, 10, 2},          // k = 10: ceil(√10) rounds the bound down (formula 4.0, exact 4.1)
		{5, 100, 0},          // the bound reaches zero
	}
	for _, tc := range cases {
		if got := lowerBound(tc.lower, tc.variance); got != tc.want {
			t.Errorf("lowerBound(%d, %d) = %d, want %d", tc.lower, tc.variance, got, tc.want)
		}
	}
	// Saturated inputs do not overflow: 2^64 events of weight 1 have a
	// bound just below the estimate.
	if got := lowerBound(^uint64(0), ^uint64(0)); got >= ^uint64(0) || got < ^uint64(0)-20_000_000_000 {
		t.Errorf("lowerBound(max, max) = %d", got)
	}
	rapid.Check(t, func(t *rapid.T) {
		l := rapid.Uint64().Draw(t, "lower")
		v := rapid.Uint64().Draw(t, "variance")
		w := rapid.Uint64Range(v, ^uint64(0)).Draw(t, "wider")
		b := lowerBound(l, v)
		if b > l || lowerBound(l, w) > b {
			t.Fatalf("lowerBound(%d, %d) = %d, with variance %d: %d", l, v, b, w, lowerBound(l, w))
		}
	})
	rapid.Check(t, func(t *rapid.T) {
		x := rapid.Uint64().Draw(t, "x")
		r := ceilSqrt(x)
		// r is the least integer with r² >= x.
		if hi, lo := mulParts(r, r); hi == 0 && lo < x {
			t.Fatalf("ceilSqrt(%d) = %d is below √x", x, r)
		}
		if r > 0 {
			if hi, lo := mulParts(r-1, r-1); hi == 0 && lo >= x {
				t.Fatalf("ceilSqrt(%d) = %d is not the least", x, r)
			}
		}
	})
}

func mulParts(a, b uint64) (uint64, uint64) {
	p := saturate.Mul64(a, b)
	return p.Hi, p.Lo
}

// TestShortestSeparatorInPlans: a balance key never carries window bytes
// beyond what separates its neighbours.
func TestShortestSeparatorInPlans(t *testing.T) {
	a, b := []byte("tenant:0042:order:0499"), []byte("tenant:0042:order:0500")
	if got := catalog.ShortestSeparator(a, b); !bytes.Equal(got, []byte("tenant:0042:order:05")) {
		t.Fatalf("ShortestSeparator = %q", got)
	}
}
