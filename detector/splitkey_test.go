package detector

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
)

// splitCase is one eligible route [start, end) and its row in the column
// that makes it eligible; the want fields are the decision.
type splitCase struct {
	name       string
	start, end string // end "" = +inf
	row        Row    // RouteID is filled in; Writes default to hotWrites
	cfg        func(*Config)

	reason    Reason
	origin    Origin
	keys      [][]byte
	isolation Reason
	median    int // expected median bucket, checked when origin is the median

	// balanceRules cases (rules balanceRules): the expected shares of the best cut,
	// checked when left is not 0.
	rules       Rules
	left, right uint32
}

// routeUnderTest builds a catalog in which [start, end) is a route and
// returns its id.
func routeUnderTest(t *testing.T, start, end string) (*catalog.Catalog, uint64) {
	t.Helper()
	var splits []string
	if start != "" {
		splits = append(splits, start)
	}
	if end != "" {
		splits = append(splits, end)
	}
	c := newCatalog(t, splits...)
	r := c.Lookup([]byte(start))
	if string(r.Start) != start || string(r.End) != end {
		t.Fatalf("route under test is %v", r)
	}
	return c, r.ID
}

func runSplitCase(t *testing.T, tc splitCase) {
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
	s, plans := Observe(in, eligibleState(t, cfg, id), column(row))
	tr, ok := s.Get(id)
	if !ok {
		t.Fatalf("route %d not tracked", id)
	}
	x := tr.Explanation
	if x.Reason != tc.reason {
		t.Fatalf("reason = %v, want %v (explanation %+v)", x.Reason, tc.reason, x)
	}
	if x.IsolationReason != tc.isolation {
		t.Errorf("isolation reason = %v, want %v", x.IsolationReason, tc.isolation)
	}
	if x.Origin != tc.origin || !equalKeys(x.SplitKeys, tc.keys) {
		t.Errorf("explanation says %v %s, want %v %s", x.Origin, fmtKeys(x.SplitKeys), tc.origin, fmtKeys(tc.keys))
	}
	if tc.origin == OriginSubBucketMedian && x.MedianBucket != uint32(tc.median) {
		t.Errorf("median bucket = %d, want %d", x.MedianBucket, tc.median)
	}
	if tc.left != 0 && (x.LeftShareBP != tc.left || x.RightShareBP != tc.right) {
		t.Errorf("shares %d|%d bp, want %d|%d", x.LeftShareBP, x.RightShareBP, tc.left, tc.right)
	}
	if tc.reason != ReasonPlanned {
		if len(plans) != 0 {
			t.Fatalf("declined route planned: %+v", plans)
		}
		return
	}
	if len(plans) != 1 {
		t.Fatalf("%d plans, want 1", len(plans))
	}
	p := plans[0]
	if p.RouteID != id || p.Origin != tc.origin || !equalKeys(p.Keys, tc.keys) || p.RouteDelta != len(tc.keys) {
		t.Errorf("plan = route %d %v %s delta %d, want route %d %v %s delta %d",
			p.RouteID, p.Origin, fmtKeys(p.Keys), p.RouteDelta, id, tc.origin, fmtKeys(tc.keys), len(tc.keys))
	}
	// The catalog accepts the steps in order, and an isolation leaves [H, H·0x00).
	cur, parent := c, id
	var kids [2]*catalog.RouteDescriptor
	for i, k := range p.Keys {
		var err error
		if cur, kids, err = cur.Split(parent, k, uint64(i+1)); err != nil {
			t.Fatalf("step %d at %s: %v", i+1, catalog.FormatKey(k), err)
		}
		parent = kids[1].ID // step 2 splits the right child of step 1
	}
	if tc.origin != OriginSubBucketMedian && tc.origin != OriginBalance {
		h := tc.keys[0]
		if tc.origin == OriginIsolationSingleLowerEdge {
			h = h[:len(h)-1]
		}
		if !bytes.Equal(x.HotKey, h) {
			t.Errorf("explained hot key %s, want %s", catalog.FormatKey(x.HotKey), catalog.FormatKey(h))
		}
		if r := cur.Lookup(h); r == nil || !bytes.Equal(r.Start, h) || !bytes.Equal(r.End, append(bytes.Clone(h), 0)) {
			t.Errorf("after the steps the hot key's route is %v, want [H, H·0x00)", r)
		}
	}
}

func equalKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// hotKey is a top-K entry with the given weighted lower and upper counts
// (a 60 s column: the same numbers per minute).
func hotKey(k string, lower, upper uint64) KeyEstimate {
	return KeyEstimate{Key: []byte(k), Lower: lower, Upper: upper}
}

// TestSplitKey covers docs/design.md#split-keys: isolation first, then the sub-bucket
// median with its boundary fallbacks, then decline. Route [a, b) has 16
// buckets with boundaries a·0x10, a·0x20, …, a·0xf0; the row scores 60000
// (15000 writes), so a key at 48000 holds 8000 bp.
func TestSplitKey(t *testing.T) {
	long4095 := strings.Repeat("x", 4095)
	p4096 := strings.Repeat("p", 4096)
	mid := buckets(16, map[int]uint64{2: 100, 5: 300, 9: 200}) // median: bucket 5
	cases := []splitCase{
		// (b) the sub-bucket median.
		{name: "median in a middle bucket splits at its hi", start: "a", end: "b",
			row:    Row{Buckets: mid},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a`"), isolation: ReasonNoTopK, median: 5},
		{name: "median reached exactly at half splits at that bucket's hi", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{3: 300, 10: 300})},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a@"), isolation: ReasonNoTopK, median: 3},
		{name: "median in the last bucket falls back to its lo", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{0: 10, 15: 990})},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a\xf0"), isolation: ReasonNoTopK, median: 15},
		{name: "median in the first bucket splits at its hi", start: "a", end: "b",
			row:    Row{Buckets: buckets(16, map[int]uint64{0: 900, 8: 100})},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a\x10"), isolation: ReasonNoTopK, median: 0},
		{name: "rightmost route splits at a finite hi", start: "m",
			row:    Row{Buckets: buckets(16, map[int]uint64{7: 600, 12: 400})},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("\xb6\x80"), isolation: ReasonNoTopK, median: 7},
		{name: "rightmost route with the median in its +inf bucket falls back to its lo", start: "m",
			row:    Row{Buckets: buckets(16, map[int]uint64{15: 1000})},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("\xf6\xd0"), isolation: ReasonNoTopK, median: 15},
		{name: "narrow route uses its effective bucket count", start: "k", end: "k\x00\x00\x00\x00\x00\x00\x00\x05",
			row:    Row{Buckets: buckets(5, map[int]uint64{3: 100})},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("k\x00\x00\x00\x00\x00\x00\x00\x04"), isolation: ReasonNoTopK, median: 3},
		{name: "bucket count of another layout is no evidence", start: "k", end: "k\x00\x00\x00\x00\x00\x00\x00\x05",
			row:    Row{Buckets: buckets(16, map[int]uint64{3: 100})},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK},
		{name: "one effective bucket declines no_split_key", start: "k", end: "k\x00\x00\x00\x00\x00\x00\x00\x01",
			row:    Row{Buckets: []uint64{1000}},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK},
		{name: "buckets without load decline no_split_key", start: "a", end: "b",
			row:    Row{Buckets: make([]uint64, 16)},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK},
		{name: "no evidence at all declines no_split_key, never a midpoint", start: "a", end: "b",
			row:    Row{},
			reason: ReasonNoSplitKey, isolation: ReasonNoTopK},
		{name: "a median boundary above the key limit declines key_too_long", start: p4096 + "a", end: p4096 + "b",
			row:    Row{Buckets: mid},
			reason: ReasonKeyTooLong, isolation: ReasonNoTopK},

		// (a) single-key isolation.
		{name: "isolation compound splits at H and H·0x00", start: "a", end: "z",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k", 55_000, 56_000), hotKey("q", 1_000, 2_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("k", "k\x00")},
		{name: "isolation lower edge: H is the route start", start: "k", end: "z",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k", 55_000, 56_000)}},
			reason: ReasonPlanned, origin: OriginIsolationSingleLowerEdge, keys: keys("k\x00")},
		{name: "isolation lower edge on the first route: H is the empty key", start: "", end: "m",
			row:    Row{TopKeys: []KeyEstimate{hotKey("", 55_000, 56_000)}},
			reason: ReasonPlanned, origin: OriginIsolationSingleLowerEdge, keys: keys("\x00")},
		{name: "isolation upper edge: H·0x00 is the route end", start: "a", end: "k\x00",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k", 55_000, 56_000)}},
			reason: ReasonPlanned, origin: OriginIsolationSingleUpperEdge, keys: keys("k")},
		{name: "already isolated route declines", start: "k", end: "k\x00",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k", 60_000, 60_000)}, Buckets: []uint64{60_000}},
			reason: ReasonAlreadyIsolated, isolation: ReasonAlreadyIsolated},
		{name: "4096-byte hot key isolates with a 4097-byte boundary", start: "a", end: "z",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k"+long4095, 55_000, 56_000)}},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("k"+long4095, "k"+long4095+"\x00")},
		{name: "hot key beyond the data key limit declines key_too_long", start: "a", end: "z",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k"+long4095+"x", 55_000, 56_000)}, Buckets: mid},
			reason: ReasonKeyTooLong, isolation: ReasonKeyTooLong},
		{name: "equal lower bounds: the smaller key is H", start: "a", end: "z",
			row:    Row{Writes: 30_000, TopKeys: []KeyEstimate{hotKey("p", 50_000, 50_000), hotKey("k", 50_000, 50_000)}},
			cfg:    func(c *Config) { c.TopKeyShareBP = 4000 },
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("k", "k\x00")},
		{name: "the largest lower bound is H even against a larger upper", start: "a", end: "z",
			row:    Row{TopKeys: []KeyEstimate{hotKey("p", 49_000, 59_000), hotKey("k", 50_000, 50_000)}},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("k", "k\x00")},
		{name: "a key share of exactly topKeyShare isolates", start: "a", end: "z",
			row:    Row{TopKeys: []KeyEstimate{hotKey("k", 48_000, 48_000)}},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("k", "k\x00")},

		// Isolation not used: the reason, and the median instead.
		{name: "degraded sketch falls back to the median", start: "a", end: "b",
			row:    Row{TopKDegraded: true, TopKeys: []KeyEstimate{hotKey("a5", 55_000, 56_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a`"), isolation: ReasonTopKDegraded, median: 5},
		{name: "share passes but the absolute floor fails: median", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{hotKey("a5", 55_000, 56_000)}, Buckets: mid},
			cfg:    func(c *Config) { c.TopKeyAbsoluteFloor = 70_000 },
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a`"), isolation: ReasonAbsoluteFloor, median: 5},
		{name: "upper estimate passes but the lower bound fails: median", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{hotKey("a5", 42_000, 54_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a`"), isolation: ReasonTopKErrorBound, median: 5},
		{name: "upper share passes but the upper floor fails: not an error-bound miss", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{hotKey("a5", 42_000, 54_000)}, Buckets: mid},
			cfg:    func(c *Config) { c.TopKeyAbsoluteFloor = 58_000 },
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a`"), isolation: ReasonTopKShare, median: 5},
		{name: "hot key share below topKeyShare: median", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{hotKey("a5", 30_000, 30_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a`"), isolation: ReasonTopKShare, median: 5},
		{name: "top-K entries outside the route are no evidence", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{hotKey("zz", 60_000, 60_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginSubBucketMedian, keys: keys("a`"), isolation: ReasonNoTopK, median: 5},
		{name: "a larger count for a key outside the route does not hide the route's own hot key", start: "a", end: "z",
			row:    Row{TopKeys: []KeyEstimate{hotKey("zz", 70_000, 70_000), hotKey("k", 55_000, 56_000)}, Buckets: mid},
			reason: ReasonPlanned, origin: OriginIsolationCompound, keys: keys("k", "k\x00")},
		{name: "isolation not used and no bucket evidence declines no_split_key", start: "a", end: "b",
			row:    Row{TopKeys: []KeyEstimate{hotKey("a5", 30_000, 30_000)}},
			reason: ReasonNoSplitKey, isolation: ReasonTopKShare},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runSplitCase(t, tc) })
	}
}

// sampled is what the merged column carries for a true weighted count when
// a reporter feeds one in rate operations to its sketch: the sampled count
// scaled back up, with a Space-Saving error of errSampled sampled units.
func sampled(key string, true_, rate, errSampled uint64) KeyEstimate {
	c := true_ / rate
	return KeyEstimate{Key: []byte(key), Lower: (c - errSampled) * rate, Upper: c * rate}
}

// sampledBuckets is the bucket counts of a reporter sampling 1 in rate.
func sampledBuckets(b []uint64, rate uint64) []uint64 {
	out := make([]uint64, len(b))
	for i, v := range b {
		out[i] = v / rate * rate
	}
	return out
}

// TestSamplingRateDecidesTheSame: the same traffic reported by a reporter
// that samples every operation and by one that samples 1 in 16 gives the
// same decision (the estimates differ; the outcome must not).
func TestSamplingRateDecidesTheSame(t *testing.T) {
	mid := buckets(16, map[int]uint64{2: 10_003, 5: 30_011, 9: 20_007})
	cases := []struct {
		name      string
		rows      func(rate uint64) Row
		origin    Origin
		isolation Reason
	}{
		{
			name: "dominant key isolated",
			rows: func(rate uint64) Row {
				return Row{Writes: hotWrites, Buckets: sampledBuckets(mid, rate), TopKeys: []KeyEstimate{
					sampled("a5", 54_000, rate, min(rate-1, 1)), sampled("a6", 3_000, rate, min(rate-1, 1)),
				}}
			},
			origin: OriginIsolationCompound,
		},
		{
			name: "spread load split at the median",
			rows: func(rate uint64) Row {
				return Row{Writes: hotWrites, Buckets: sampledBuckets(mid, rate), TopKeys: []KeyEstimate{
					sampled("a5", 20_000, rate, min(rate-1, 1)), sampled("a6", 19_000, rate, min(rate-1, 1)),
				}}
			},
			origin: OriginSubBucketMedian, isolation: ReasonTopKShare,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, rate := range []uint64{1, 16} {
				cfg := DefaultConfig()
				c, id := routeUnderTest(t, "a", "b")
				row := tc.rows(rate)
				row.RouteID = id
				s, plans := Observe(enabledInput(c, cfg), eligibleState(t, cfg, id), column(row))
				tr, _ := s.Get(id)
				if len(plans) != 1 || plans[0].Origin != tc.origin || tr.Explanation.IsolationReason != tc.isolation {
					t.Fatalf("rate %d: plans %+v, isolation %v; want one %v plan, isolation %v", rate, plans, tr.Explanation.IsolationReason, tc.origin, tc.isolation)
				}
				got = append(got, fmtKeys(plans[0].Keys))
			}
			if got[0] != got[1] {
				t.Errorf("rate 1 splits at %s, rate 16 at %s", got[0], got[1])
			}
		})
	}
}
