package detector

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
)

// fuzzBytes turns fuzz input into values. It is compact so that mutations
// of a few bytes change one decision, and reads zeros once the input runs
// out, so every input is a complete case.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	v := f.b[0]
	f.b = f.b[1:]
	return v
}

func (f *fuzzBytes) intn(n int) int { return int(f.byte()) % n }

func (f *fuzzBytes) bool() bool { return f.byte()&1 == 1 }

func (f *fuzzBytes) fixed(n int) uint64 {
	var buf [8]byte
	for i := range n {
		buf[i] = f.byte()
	}
	return binary.LittleEndian.Uint64(buf[:])
}

// u64 is a small number, a 16- or 64-bit one, or a boundary value.
func (f *fuzzBytes) u64() uint64 {
	switch f.byte() % 4 {
	case 0:
		return uint64(f.byte())
	case 1:
		return f.fixed(2)
	case 2:
		return f.fixed(8)
	}
	return []uint64{0, 1, 1 << 32, ^uint64(0) - 1, ^uint64(0)}[f.intn(5)]
}

func (f *fuzzBytes) u32() uint32 {
	switch f.byte() % 3 {
	case 0:
		return uint32(f.byte())
	case 1:
		return uint32(f.fixed(4))
	}
	return []uint32{0, 1, ^uint32(0)}[f.intn(3)]
}

var fuzzAlphabet = []byte{0x00, 0x01, 'a', 'b', 0x7f, 0xff}

// key is a short key over a small alphabet (shared prefixes, 0x00
// suffixes), or one at the key limits (4096-byte data keys, 4097-byte
// boundaries) when the length byte is at the top of its range.
func (f *fuzzBytes) key() []byte {
	n := int(f.byte())
	if n >= 250 {
		k := bytes.Repeat([]byte{'p'}, catalog.MaxKeyLen-4+n-250)
		return append(k, fuzzAlphabet[f.intn(len(fuzzAlphabet))])
	}
	k := make([]byte, n%7)
	for i := range k {
		k[i] = fuzzAlphabet[f.intn(len(fuzzAlphabet))]
	}
	return k
}

func (f *fuzzBytes) catalog(t fataler) *catalog.Catalog {
	var splits [][]byte
	for range f.intn(7) {
		if k := f.key(); len(k) > 0 && len(k) <= catalog.MaxBoundaryLen {
			splits = append(splits, k)
		}
	}
	slices.SortFunc(splits, bytes.Compare)
	splits = slices.CompactFunc(splits, bytes.Equal)
	c, err := catalog.New(splits, 1)
	if err != nil {
		t.Fatalf("catalog.New: %v", err)
	}
	states := map[uint64]catalog.RouteState{}
	for id := uint64(1); id <= uint64(c.Len()); id++ {
		if s := f.intn(8); s < 4 {
			states[id] = catalog.RouteState(s + 1) // ACTIVE or one of the reserved states
		}
	}
	return withStates(t, c, states)
}

// routeID is mostly a live or recently split route, sometimes anything.
func (f *fuzzBytes) routeID(c *catalog.Catalog) uint64 {
	if f.bool() {
		return f.u64()
	}
	return uint64(f.intn(int(min(c.NextRouteID()+1, 256))))
}

func (f *fuzzBytes) config() Config {
	if f.bool() {
		// Near the defaults: small thresholds so that rows are hot.
		c := DefaultConfig()
		c.Threshold = uint64(f.byte()) + 1
		c.CandidateWindows = uint32(f.intn(4)) + 1
		c.MaxSplitsPerCycle = uint32(f.intn(3)) + 1
		c.MaxAutoRoutes = uint32(f.intn(12)) + 1
		c.TopKeyShareBP = uint32(f.fixed(2)%10_000) + 1
		c.TopKeyAbsoluteFloor = uint64(f.byte())
		c.CooldownMs = uint64(f.intn(4)) * minute
		c.HoldBandBP = []uint32{0, 8000, 9999, 10_000}[f.intn(4)]
		if f.bool() {
			c.MergeThresholdBP = uint32(f.intn(5000)) + 1
			c.MergeWindows = c.CandidateWindows + uint32(f.intn(3)) + 1
			c.MergeDelayMs = uint64(f.intn(3)) * minute
			c.MaxMergesPerCycle = uint32(f.intn(3))
			c.MergeMarginBP = uint32(f.fixed(2)%9001) + 1000
		}
		return c
	}
	return Config{
		Threshold: f.u64(), WriteWeight: f.u32(), ReadWeight: f.u32(), CandidateWindows: f.u32(),
		CooldownMs: f.u64(), MaxSplitsPerCycle: f.u32(), MaxAutoRoutes: f.u32(), TopKeyShareBP: f.u32(),
		TopKeyAbsoluteFloor: f.u64(), Buckets: f.u32(), SmoothingWindows: f.u32(), HoldBandBP: f.u32(),
		MergeThresholdBP: f.u32(), MergeWindows: f.u32(), MergeDelayMs: f.u64(), MaxMergesPerCycle: f.u32(), MergeMarginBP: f.u32(),
	}
}

// state is a restorable state with arbitrary entries.
func (f *fuzzBytes) state(t fataler, c *catalog.Catalog) *State {
	var tr []Tracked
	for range f.intn(6) {
		tr = append(tr, Tracked{
			RouteID: f.routeID(c) | 1, ConsecutiveOver: f.u32(), LastScore: f.u64(), CooldownUntilMs: f.u64(),
			RecentScores: make([]uint64, f.intn(70)),
			Explanation:  Explanation{Reason: Reason(f.intn(20)), AtMs: f.u64(), Repeats: f.u32()},
		})
	}
	slices.SortFunc(tr, func(a, b Tracked) int { return cmp.Compare(a.RouteID, b.RouteID) })
	tr = slices.CompactFunc(tr, func(a, b Tracked) bool { return a.RouteID == b.RouteID })
	s, err := NewState(tr, f.u64())
	if err != nil {
		t.Fatalf("NewState: %v", err)
	}
	return s
}

func (f *fuzzBytes) row(c *catalog.Catalog) Row {
	id := f.routeID(c)
	row := Row{RouteID: id, Reads: f.u64(), Writes: f.u64(), TopKDegraded: f.intn(4) == 0}
	n := []int{0, 1, 2, 16, 256, 300}[f.intn(6)]
	if r, ok := c.Route(id); ok && f.bool() {
		n = catalog.NewLayout(r.Start, r.End, n).K() // the reporters' layout
	}
	row.Buckets = make([]uint64, n)
	for range min(n, f.intn(5)) {
		row.Buckets[f.intn(n)] = f.u64()
	}
	for range f.intn(5) {
		var key []byte
		r, ok := c.Route(id)
		switch {
		case ok && f.bool():
			key = bytes.Clone(r.Start) // lower edge
		case ok && f.bool():
			key = append(bytes.Clone(r.Start), f.key()...)
		case ok && len(r.End) > 0 && r.End[len(r.End)-1] == 0 && f.bool():
			key = bytes.Clone(r.End[:len(r.End)-1]) // upper edge
		default:
			key = f.key()
		}
		row.TopKeys = append(row.TopKeys, KeyEstimate{Key: key, Lower: f.u64(), Upper: f.u64(), Variance: f.u64()})
		row.Samples = append(row.Samples, WeightedKey{Key: key, Weight: f.u64()})
	}
	row.SampleRate = f.u32()
	return row
}

// FuzzObserve drives Observe with arbitrary columns, catalog views, live
// ops, states and configs (valid or not): it never panics, never plans a
// key that is not strictly inside its route (or that the catalog would
// refuse), never exceeds the budget or the route cap, never plans a route
// in cooldown or in a live op, and does not depend on row order.
func FuzzObserve(f *testing.F) {
	rng := rand.New(rand.NewPCG(4, 4))
	for range 16 {
		f.Add(randomBytes(rng, 512))
	}
	f.Fuzz(func(t *testing.T, b []byte) { observeArbitrary(t, b) })
}

// TestObserveArbitraryInputs runs the fuzz body over pseudo-random inputs
// in every test run, beyond the 16 seeds.
func TestObserveArbitraryInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	n := 5000
	if testing.Short() {
		n = 1000
	}
	for range n {
		observeArbitrary(t, randomBytes(rng, 64+rng.IntN(1024)))
	}
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func observeArbitrary(t *testing.T, b []byte) {
	f := &fuzzBytes{b: b}
	c := f.catalog(t)
	cfg := f.config()
	s := f.state(t, c)
	for range f.intn(3) + 1 {
		start := s.LastColumnAtMs()
		if f.intn(4) == 0 {
			start = f.u64()
		}
		col := Column{WindowStartMs: start, AtMs: start + min(uint64(f.fixed(3)), ^uint64(0)-start), Complete: f.intn(4) != 0}
		if f.intn(8) == 0 {
			col.AtMs = f.u64()
		}
		for range f.intn(6) {
			col.Rows = append(col.Rows, f.row(c))
		}
		in := Input{Config: cfg, Catalog: c, NowMs: col.AtMs + uint64(f.fixed(3)), Enabled: f.intn(4) != 0, NextOpID: f.u64(),
			Rules: Rules(f.intn(int(AllRules) + 1))}
		if f.intn(8) == 0 {
			in.NowMs = f.u64()
		}
		for range f.intn(3) {
			in.LiveOps = append(in.LiveOps, LiveOp{
				OpID:           f.u64(),
				RouteIDs:       []uint64{f.routeID(c)},
				RemainingDelta: []int{-3, -1, 0, 1, 2, 3, math.MaxInt, math.MinInt}[f.intn(8)],
			})
		}
		next, plans := Observe(in, s, col)
		checkOutcome(t, in, s, col, next, plans)
		if next.LastColumnAtMs() < s.LastColumnAtMs() {
			t.Fatalf("last column went back from %d to %d", s.LastColumnAtMs(), next.LastColumnAtMs())
		}
		rev := col
		rev.Rows = slices.Clone(col.Rows)
		slices.Reverse(rev.Rows)
		if pnext, pplans := Observe(in, s, rev); dump(pnext, pplans)+fmt.Sprint(pnext.Cold()) != dump(next, plans)+fmt.Sprint(next.Cold()) {
			t.Fatalf("row order changed the outcome")
		}
		s = next
		if len(plans) > 0 && plans[len(plans)-1].Kind == PlanMerge && f.bool() {
			// The FSM commits the last plan, a merge.
			p := plans[len(plans)-1]
			nc, merged, err := c.Merge(p.RouteID, p.RightRouteID, 1)
			if err != nil {
				t.Fatalf("planned merge refused: %v", err)
			}
			c, s = nc, s.OnMerge(cfg, p.RouteID, p.RightRouteID, merged.ID, in.NowMs)
			continue
		}
		if len(plans) > 0 && plans[0].Kind == PlanSplit && f.bool() {
			// The FSM commits the first step of the first plan.
			p := plans[0]
			nc, kids, err := c.Split(p.RouteID, p.Keys[0], 1)
			if err != nil {
				t.Fatalf("planned split refused: %v", err)
			}
			var consumed uint64
			if len(p.Keys) == 2 {
				consumed = kids[1].ID
			}
			c, s = nc, s.OnSplit(cfg, p.RouteID, []uint64{kids[0].ID, kids[1].ID}, consumed, in.NowMs)
		}
	}
}
