package detector

import (
	"bytes"
	"fmt"
	"math/big"
	"slices"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
	"pgregory.net/rapid"
)

// keyGen draws keys from a tiny alphabet so that shared prefixes, 0x00
// suffixes (H·0x00 boundaries) and equal windows are common.
func keyGen(maxLen int) *rapid.Generator[[]byte] {
	return rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 'a', 'b', 0x7f, 0xff}), 0, maxLen)
}

// genCatalog draws a catalog of up to 8 routes, some of them not ACTIVE.
func genCatalog(t *rapid.T) *catalog.Catalog {
	splits := rapid.SliceOfNDistinct(keyGen(6).Filter(func(k []byte) bool { return len(k) > 0 }), 0, 7,
		func(k []byte) string { return string(k) }).Draw(t, "splits")
	slices.SortFunc(splits, bytes.Compare)
	c, err := catalog.New(splits, 1)
	if err != nil {
		t.Fatalf("catalog.New: %v", err)
	}
	states := map[uint64]catalog.RouteState{}
	for id := uint64(1); id <= uint64(c.Len()); id++ {
		if rapid.IntRange(0, 5).Draw(t, "nonActive") == 0 {
			states[id] = catalog.StateMigratingSource
		}
	}
	return withStates(t, c, states)
}

func routesOf(c *catalog.Catalog) []*catalog.RouteDescriptor {
	var out []*catalog.RouteDescriptor
	c.Ascend(func(r *catalog.RouteDescriptor) bool { out = append(out, r); return true })
	return out
}

// genKeyFor draws a top-K key for route r: its start (lower edge), a key
// just inside, the key whose successor is the end (upper edge), or any key
// (often outside the route: no evidence).
func genKeyFor(t *rapid.T, r *catalog.RouteDescriptor) []byte {
	switch rapid.IntRange(0, 3).Draw(t, "keyKind") {
	case 0:
		return bytes.Clone(r.Start)
	case 1:
		return append(bytes.Clone(r.Start), keyGen(3).Draw(t, "suffix")...)
	case 2:
		if n := len(r.End); n > 0 && r.End[n-1] == 0 {
			return bytes.Clone(r.End[:n-1])
		}
	}
	return keyGen(5).Draw(t, "anyKey")
}

// genRow draws a row for r whose score lands below, at or above threshold
// for a column of durMs.
func genRow(t *rapid.T, cfg Config, r *catalog.RouteDescriptor, durMs uint64) Row {
	// Writes for about twice the threshold at most.
	perCol := cfg.Threshold*durMs/60_000/uint64(max(cfg.WriteWeight, 1)) + 2
	row := Row{
		RouteID: r.ID,
		Writes:  rapid.Uint64Range(0, 2*perCol).Draw(t, "writes"),
		Reads:   rapid.Uint64Range(0, perCol/4).Draw(t, "reads"),
	}
	k := catalog.NewLayout(r.Start, r.End, int(cfg.Buckets)).K()
	n := rapid.SampledFrom([]int{0, 1, 3, k, k, k, 16}).Draw(t, "buckets")
	row.Buckets = rapid.SliceOfN(rapid.SampledFrom([]uint64{0, 0, 1, 7, 100, 1000}), n, n).Draw(t, "bucketLoad")
	total := row.Writes*uint64(cfg.WriteWeight) + row.Reads*uint64(cfg.ReadWeight)
	for range rapid.IntRange(0, 3).Draw(t, "topK") {
		lower := rapid.Uint64Range(0, total+1).Draw(t, "lower")
		row.TopKeys = append(row.TopKeys, KeyEstimate{
			Key:   genKeyFor(t, r),
			Lower: lower,
			Upper: lower + rapid.Uint64Range(0, total/4+1).Draw(t, "slack"),
		})
	}
	row.TopKDegraded = rapid.IntRange(0, 7).Draw(t, "degraded") == 0
	return row
}

func genConfig(t *rapid.T, live int) Config {
	c := Config{
		Threshold:         rapid.Uint64Range(1, 5000).Draw(t, "threshold"),
		WriteWeight:       uint32(rapid.IntRange(1, 5).Draw(t, "ww")),
		ReadWeight:        uint32(rapid.IntRange(0, 3).Draw(t, "wr")),
		CandidateWindows:  uint32(rapid.IntRange(1, 4).Draw(t, "candidateWindows")),
		CooldownMs:        rapid.SampledFrom([]uint64{0, minute, 3 * minute}).Draw(t, "cooldown"),
		MaxSplitsPerCycle: uint32(rapid.IntRange(1, 3).Draw(t, "budget")),
		MaxAutoRoutes:     uint32(max(1, live+rapid.IntRange(-1, 4).Draw(t, "headroom"))),
		TopKeyShareBP:     rapid.SampledFrom([]uint32{1, 5000, 8000, 10_000}).Draw(t, "share"),
		Buckets:           rapid.SampledFrom([]uint32{1, 4, 16}).Draw(t, "bucketCount"),
		SmoothingWindows:  uint32(rapid.IntRange(1, 5).Draw(t, "smoothing")),
	}
	c.TopKeyAbsoluteFloor = rapid.SampledFrom([]uint64{0, c.Threshold / 2, 2 * c.Threshold}).Draw(t, "floor")
	return c
}

// bigScore is the docs/design.md#scoring score in arbitrary precision: the reference the
// detector's 128-bit arithmetic must agree with.
func bigScore(cfg Config, r Row, durMs uint64) *big.Int {
	w := new(big.Int).Mul(new(big.Int).SetUint64(r.Writes), big.NewInt(int64(cfg.WriteWeight)))
	w.Add(w, new(big.Int).Mul(new(big.Int).SetUint64(r.Reads), big.NewInt(int64(cfg.ReadWeight))))
	w.Mul(w, big.NewInt(60_000))
	return w.Quo(w, new(big.Int).SetUint64(durMs))
}

// checkOutcome asserts the invariants that hold for any input: plans only
// for live, ACTIVE routes outside cooldown and live ops, within the budget
// and the route cap, with keys strictly inside the route that the catalog
// accepts step by step; a sorted, sparse state.
func checkOutcome(t fataler, in Input, prev *State, col Column, next *State, all []Plan) {
	t.Helper()
	var plans, merges []Plan
	for i, p := range all {
		switch {
		case p.Kind == PlanMerge:
			merges = append(merges, p)
		case len(merges) > 0:
			t.Fatalf("split plan %d after a merge plan: %+v", i, all)
		default:
			plans = append(plans, p)
		}
	}
	checkMergePlans(t, in, col, plans, merges, next)
	if len(plans) > int(in.Config.MaxSplitsPerCycle) {
		t.Fatalf("%d plans, budget %d", len(plans), in.Config.MaxSplitsPerCycle)
	}
	if len(plans) > 0 && !in.Enabled {
		t.Fatalf("planned with the switch off: %+v", plans)
	}
	var total uint64
	if in.Catalog != nil {
		total = uint64(in.Catalog.Len())
	}
	for _, op := range in.LiveOps {
		total = saturate.Add(total, uint64(max(op.RemainingDelta, 0)))
	}
	for i, p := range plans {
		total = saturate.Add(total, uint64(p.RouteDelta))
		if p.OpID != in.NextOpID+uint64(i) {
			t.Fatalf("plan %d has op id %d", i, p.OpID)
		}
		if tr, _ := prev.Get(p.RouteID); tr.CooldownUntilMs > in.NowMs {
			t.Fatalf("planned route %d in cooldown until %d (now %d)", p.RouteID, tr.CooldownUntilMs, in.NowMs)
		}
		for _, op := range in.LiveOps {
			if slices.Contains(op.RouteIDs, p.RouteID) {
				t.Fatalf("planned route %d of live op %d", p.RouteID, op.OpID)
			}
		}
		r, ok := in.Catalog.Route(p.RouteID)
		if !ok || r.State != catalog.StateActive {
			t.Fatalf("planned route %d: live %v, state %v", p.RouteID, ok, r)
		}
		if len(p.Keys) != p.RouteDelta || len(p.Keys) < 1 || len(p.Keys) > 2 {
			t.Fatalf("plan with %d keys and delta %d", len(p.Keys), p.RouteDelta)
		}
		// Every key strictly inside the route, and the steps valid in order.
		cur, parent := in.Catalog, p.RouteID
		for j, k := range p.Keys {
			if bytes.Compare(k, r.Start) <= 0 || (!r.Unbounded() && bytes.Compare(k, r.End) >= 0) || len(k) > catalog.MaxBoundaryLen {
				t.Fatalf("plan key %s not strictly inside %v", catalog.FormatKey(k), r)
			}
			var kids [2]*catalog.RouteDescriptor
			var err error
			if cur, kids, err = cur.Split(parent, k, uint64(j+1)); err != nil {
				t.Fatalf("step %d of %+v: %v", j+1, p, err)
			}
			parent = kids[1].ID
		}
		if tr, _ := next.Get(p.RouteID); tr.Explanation.Reason != ReasonPlanned || tr.Explanation.OpID != p.OpID {
			t.Fatalf("planned route %d explained as %+v", p.RouteID, tr.Explanation)
		}
	}
	if len(plans) > 0 && total > uint64(in.Config.MaxAutoRoutes) {
		t.Fatalf("plans take the routes to %d, cap %d", total, in.Config.MaxAutoRoutes)
	}
	tr := next.Tracked()
	for i := range tr {
		if i > 0 && tr[i-1].RouteID >= tr[i].RouteID {
			t.Fatalf("tracked entries out of order")
		}
		if in.Catalog == nil {
			continue
		}
		if _, ok := in.Catalog.Route(tr[i].RouteID); !ok && next != prev {
			t.Fatalf("tracked route %d not in the catalog", tr[i].RouteID)
		}
	}
}

// history is the naive reference model of one route: per observed column,
// whether it began after a gap (or a hysteresis reset) and whether the
// route was ACTIVE with a score at or above the threshold.
type history []struct{ gapBefore, hotActive bool }

// eligible: the last candidateWindows columns were all hot and ACTIVE with
// no gap between them, judged from the whole history, without a counter.
func (h history) eligible(cw int) bool {
	if len(h) < cw {
		return false
	}
	for i := len(h) - cw; i < len(h); i++ {
		if !h[i].hotActive || (i > len(h)-cw && h[i].gapBefore) {
			return false
		}
	}
	return true
}

// TestObserveProperties runs random column sequences over random catalogs
// and checks every column against checkOutcome, the eligibility model and
// row-order independence.
func TestObserveProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCatalog(t)
		routes := routesOf(c)
		cfg := genConfig(t, c.Len())
		hist := make(map[uint64]history, len(routes))
		var s *State
		at := t0
		reset := false
		var nextOp uint64 = 1
		for range rapid.IntRange(1, 12).Draw(t, "columns") {
			// Things committed between columns.
			switch rapid.IntRange(0, 9).Draw(t, "between") {
			case 0:
				s = s.StartCooldown(cfg, routes[rapid.IntRange(0, len(routes)-1).Draw(t, "coolRoute")].ID, at)
			case 1:
				s = s.ResetHysteresis()
				reset = true
			}
			dur := rapid.SampledFrom([]uint64{1_000, 30_000, minute, 2 * minute}).Draw(t, "dur")
			start := at
			if rapid.IntRange(0, 7).Draw(t, "gap") == 0 {
				start += rapid.SampledFrom([]uint64{1, dur}).Draw(t, "skip")
			}
			col := Column{WindowStartMs: start, AtMs: start + dur}
			for _, r := range rapid.SliceOfNDistinct(rapid.SampledFrom(routes), 0, len(routes),
				func(r *catalog.RouteDescriptor) uint64 { return r.ID }).Draw(t, "rowRoutes") {
				col.Rows = append(col.Rows, genRow(t, cfg, r, dur))
			}
			if rapid.IntRange(0, 5).Draw(t, "unknownRow") == 0 {
				col.Rows = append(col.Rows, Row{RouteID: c.NextRouteID() + 3, Writes: 1 << 40})
			}
			in := Input{
				Config:   cfg,
				Catalog:  c,
				NowMs:    col.AtMs + rapid.SampledFrom([]uint64{0, 0, 500, minute}).Draw(t, "late"),
				Enabled:  rapid.IntRange(0, 4).Draw(t, "off") != 0,
				NextOpID: nextOp,
			}
			for i := range rapid.IntRange(0, 2).Draw(t, "liveOps") {
				in.LiveOps = append(in.LiveOps, LiveOp{
					OpID:           uint64(1000 + i),
					RouteIDs:       []uint64{routes[rapid.IntRange(0, len(routes)-1).Draw(t, "opRoute")].ID},
					RemainingDelta: rapid.IntRange(0, 2).Draw(t, "remaining"),
				})
			}

			colBefore := fmt.Sprintf("%+v", col)
			next, plans := Observe(in, s, col)
			if fmt.Sprintf("%+v", col) != colBefore {
				t.Fatalf("Observe modified the column")
			}
			checkOutcome(t, in, s, col, next, plans)

			// Any row and live-op order gives a byte-identical outcome.
			perm := in
			perm.LiveOps = rapid.Permutation(in.LiveOps).Draw(t, "opOrder")
			pcol := col
			pcol.Rows = rapid.Permutation(col.Rows).Draw(t, "rowOrder")
			pnext, pplans := Observe(perm, s, pcol)
			if a, b := dump(next, plans), dump(pnext, pplans); a != b {
				t.Fatalf("row order changed the outcome:\n%s\n%s", a, b)
			}

			// The reference model.
			rows := map[uint64]Row{}
			for _, r := range col.Rows {
				rows[r.RouteID] = r
			}
			for _, r := range routes {
				row, present := rows[r.ID]
				hotNow := present && bigScore(cfg, row, dur).Cmp(new(big.Int).SetUint64(cfg.Threshold)) >= 0
				active := r.State == catalog.StateActive
				gapBefore := reset || (s.LastColumnAtMs() != 0 && start != s.LastColumnAtMs())
				hist[r.ID] = append(hist[r.ID], struct{ gapBefore, hotActive bool }{gapBefore, hotNow && active})
				want := hist[r.ID].eligible(int(cfg.CandidateWindows))
				tr, _ := next.Get(r.ID)
				if got := tr.ConsecutiveOver >= cfg.CandidateWindows; got != want {
					t.Fatalf("route %d eligible = %v (counter %d), model says %v; history %+v", r.ID, got, tr.ConsecutiveOver, want, hist[r.ID])
				}
				if present && hotNow && tr.LastScore != bigScore(cfg, row, dur).Uint64() {
					t.Fatalf("route %d score %d, reference %v", r.ID, tr.LastScore, bigScore(cfg, row, dur))
				}
				if !hotNow {
					continue
				}
				x := tr.Explanation
				switch {
				case !active:
					if x.Reason != ReasonNonActive {
						t.Fatalf("hot non-active route %d explained %v", r.ID, x.Reason)
					}
				case !want:
					if x.Reason != ReasonCounting {
						t.Fatalf("hot route %d short of candidateWindows explained %v", r.ID, x.Reason)
					}
				case x.Reason == ReasonCounting || x.AtMs != col.AtMs:
					t.Fatalf("eligible route %d explained %+v", r.ID, x)
				}
			}
			for _, p := range plans {
				if !hist[p.RouteID].eligible(int(cfg.CandidateWindows)) {
					t.Fatalf("planned route %d the model does not find eligible", p.RouteID)
				}
			}
			s, at, reset = next, col.AtMs, false
			nextOp += uint64(len(plans))
		}
	})
}

// TestArithmeticAgainstBigInt: the 128-bit score, per-minute and share
// arithmetic equals arbitrary precision, saturating where documented.
func TestArithmeticAgainstBigInt(t *testing.T) {
	maxU64 := new(big.Int).SetUint64(^uint64(0))
	rapid.Check(t, func(t *rapid.T) {
		big64 := rapid.OneOf(rapid.Uint64(), rapid.Uint64Range(0, 1000), rapid.Just(^uint64(0)))
		cfg := Config{
			WriteWeight: rapid.Uint32().Draw(t, "ww"),
			ReadWeight:  rapid.Uint32().Draw(t, "wr"),
		}
		row := Row{Reads: big64.Draw(t, "reads"), Writes: big64.Draw(t, "writes")}
		dur := rapid.OneOf(rapid.Uint64Range(1, 200_000), rapid.Uint64Range(1, ^uint64(0))).Draw(t, "dur")

		want := bigScore(cfg, row, dur)
		if want.Cmp(maxU64) > 0 {
			want = maxU64
		}
		if got := Score(row.Reads, row.Writes, cfg, dur); got != want.Uint64() {
			t.Fatalf("score %d, want %v", got, want)
		}

		part := big64.Draw(t, "part")
		total := weighted(row.Reads, row.Writes, cfg)
		bigTotal := new(big.Int).Add(
			new(big.Int).Mul(new(big.Int).SetUint64(row.Writes), big.NewInt(int64(cfg.WriteWeight))),
			new(big.Int).Mul(new(big.Int).SetUint64(row.Reads), big.NewInt(int64(cfg.ReadWeight))))
		var wantShare uint64 = fullShareBP
		if bigTotal.Sign() == 0 {
			if part == 0 {
				wantShare = 0
			}
		} else {
			q := new(big.Int).Quo(new(big.Int).Mul(new(big.Int).SetUint64(part), big.NewInt(fullShareBP)), bigTotal)
			if q.Cmp(big.NewInt(fullShareBP)) < 0 {
				wantShare = q.Uint64()
			}
		}
		if got := shareBP(part, total); uint64(got) != wantShare {
			t.Fatalf("share of %d in %v = %d, want %d", part, bigTotal, got, wantShare)
		}
	})
}
