package detector

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"pgregory.net/rapid"
)

// mergeConfig is the default config with merges on: cold below 25% of the
// threshold (12500: a 60 s column of fewer than 3125 writes), 4 merge
// windows, a 10 min delay, one merge per column, a 50% margin.
func mergeConfig() Config {
	c := DefaultConfig()
	c.MergeThresholdBP, c.MergeWindows, c.MergeDelayMs, c.MaxMergesPerCycle, c.MergeMarginBP = 2500, 4, 10*minute, 1, 5000
	return c
}

// mergeRun feeds consecutive 60 s columns to Observe from t0 on.
type mergeRun struct {
	t  testing.TB
	in Input
	s  *State
	at uint64 // the next column's window start
}

func newMergeRun(t testing.TB, c *catalog.Catalog, cfg Config) *mergeRun {
	return &mergeRun{t: t, in: Input{Config: cfg, Catalog: c, Enabled: true, NextOpID: 100, Rules: AllRules}, at: t0}
}

// column observes one complete column with the given rows and returns its
// plans.
func (r *mergeRun) column(rows ...Row) []Plan { return r.observe(true, rows...) }

func (r *mergeRun) observe(complete bool, rows ...Row) []Plan {
	r.t.Helper()
	col := Column{WindowStartMs: r.at, AtMs: r.at + minute, Rows: rows, Complete: complete}
	r.in.NowMs = col.AtMs
	var plans []Plan
	r.s, plans = Observe(r.in, r.s, col)
	r.at = col.AtMs
	return plans
}

// idle observes n complete columns without load and returns the last
// column's plans.
func (r *mergeRun) idle(n int) []Plan {
	var plans []Plan
	for range n {
		plans = r.column()
	}
	return plans
}

func (r *mergeRun) merge(id uint64) Explanation {
	t, _ := r.s.Get(id)
	return t.Merge
}

func loadRow(id, writes uint64) Row { return Row{RouteID: id, Writes: writes} }

// mergePlan renders the merge plans as "left+right#op" (est).
func mergePlans(plans []Plan) string {
	var out []string
	for _, p := range plans {
		if p.Kind == PlanMerge {
			out = append(out, fmt.Sprintf("%d+%d#%d(%d)", p.RouteID, p.RightRouteID, p.OpID, p.Score))
		}
	}
	return fmt.Sprint(out)
}

func withGroups(t fataler, c *catalog.Catalog, groups map[uint64]uint64) *catalog.Catalog {
	t.Helper()
	p := c.ToProto()
	for _, r := range p.Routes {
		if g, ok := groups[r.RouteId]; ok {
			r.GroupId = g
		}
	}
	out, err := catalog.FromProto(p)
	if err != nil {
		t.Fatalf("FromProto: %v", err)
	}
	return out
}

// withMarks returns c with the starts of the given routes marked as an
// operator's.
func withMarks(t fataler, c *catalog.Catalog, ids ...uint64) *catalog.Catalog {
	t.Helper()
	p := c.ToProto()
	for _, r := range p.Routes {
		if slices.Contains(ids, r.RouteId) {
			r.OperatorStart = true
		}
	}
	out, err := catalog.FromProto(p)
	if err != nil {
		t.Fatalf("FromProto: %v", err)
	}
	return out
}

func createdAt(ms map[uint64]uint64) func(*catalog.RouteDescriptor) uint64 {
	return func(r *catalog.RouteDescriptor) uint64 { return ms[r.ID] }
}

func TestMergeRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		run  func(t *testing.T)
	}{
		{"an idle pair merges after merge_windows complete columns", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			if p := r.idle(3); len(p) != 0 {
				t.Fatalf("planned after 3 columns: %+v", p)
			}
			p := r.column()
			if got := mergePlans(p); got != "[1+2#100(0)]" || p[0].RouteDelta != -1 || len(p[0].Keys) != 0 {
				t.Fatalf("plans %s %+v", got, p)
			}
			for id, partner := range map[uint64]uint64{1: 2, 2: 1} {
				x := r.merge(id)
				if x.Reason != ReasonMergePlanned || x.OpID != 100 || x.MergePartner != partner || x.ColdColumns != 4 ||
					x.MergeWindows != 4 || x.MergeLimit != 25_000 || x.MergeThreshold != 12_500 {
					t.Errorf("route %d explained %+v", id, x)
				}
			}
			if p[0].Explanation.Reason != ReasonMergePlanned || p[0].Explanation.MergePartner != 2 {
				t.Errorf("plan explanation %+v", p[0].Explanation)
			}
		}},
		{"a warm column restarts the streak; a cold load does not", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			r.idle(2)
			r.column(loadRow(2, 3200)) // 12800 >= 12500: warm
			r.column(loadRow(1, 3100)) // 12400: cold
			if p := r.idle(2); len(p) != 0 {
				t.Fatalf("planned 3 columns after a warm one: %s", mergePlans(p))
			}
			if got := mergePlans(r.column()); got != "[1+2#100(12400)]" {
				t.Fatalf("plans %s, want the merge 4 columns after the warm one, estimate 12400", got)
			}
		}},
		{"an incomplete column restarts the run", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			r.idle(3)
			r.observe(false)
			if p := r.idle(3); len(p) != 0 {
				t.Fatalf("planned: %s", mergePlans(p))
			}
			if got := mergePlans(r.column()); got != "[1+2#100(0)]" {
				t.Fatalf("plans %s", got)
			}
		}},
		{"a gap restarts the run", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			r.idle(3)
			r.at += minute
			if p := r.idle(3); len(p) != 0 {
				t.Fatalf("planned: %s", mergePlans(p))
			}
			if got := mergePlans(r.column()); got != "[1+2#100(0)]" {
				t.Fatalf("plans %s", got)
			}
		}},
		{"a SetConfig restarts the run", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			r.idle(3)
			r.s = r.s.ResetHysteresis()
			if p := r.idle(3); len(p) != 0 {
				t.Fatalf("planned: %s", mergePlans(p))
			}
			if got := mergePlans(r.column()); got != "[1+2#100(0)]" {
				t.Fatalf("plans %s", got)
			}
		}},
		{"no merge within merge_delay_ms of a route's creation", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			r.in.CreatedAtMs = createdAt(map[uint64]uint64{2: t0})
			r.idle(4)
			x := r.merge(1)
			if x.Reason != ReasonMergeDelay || x.MergeDelayLeftMs != 6*minute || x.FirstAtMs != t0+4*minute {
				t.Fatalf("after 4 columns: %+v, want merge_delay with 6 min left", x)
			}
			if p := r.idle(5); len(p) != 0 {
				t.Fatalf("planned within the delay: %s", mergePlans(p))
			}
			if x := r.merge(2); x.Reason != ReasonMergeDelay || x.FirstAtMs != t0+4*minute || x.Repeats != 5 || x.MergeDelayLeftMs != minute {
				t.Errorf("the repeated decline is one explanation: %+v", x)
			}
			if got := mergePlans(r.column()); got != "[1+2#100(0)]" {
				t.Fatalf("plans %s at the end of the delay", got)
			}
		}},
		{"only columns that started after a route's creation count", func(t *testing.T) {
			cfg := mergeConfig()
			cfg.MergeDelayMs = 0
			r := newMergeRun(t, newCatalog(t, "m"), cfg)
			r.in.CreatedAtMs = createdAt(map[uint64]uint64{1: t0 + minute + 30_000})
			if p := r.idle(5); len(p) != 0 {
				t.Fatalf("planned: %s", mergePlans(p))
			}
			if x := r.merge(1); x.Reason != ReasonUnspecified {
				t.Fatalf("explained before it was a candidate: %+v", x)
			}
			if got := mergePlans(r.column()); got != "[1+2#100(0)]" {
				t.Fatalf("plans %s: columns 3 to 6 started after the creation", got)
			}
		}},
		{"the merged estimate must stay merge_margin_bp below the threshold", func(t *testing.T) {
			cfg := mergeConfig()
			cfg.MergeThresholdBP = 5000 // cold below 25000
			r := newMergeRun(t, newCatalog(t, "m"), cfg)
			r.column(loadRow(1, 3500), loadRow(2, 3500)) // 14000 each: cold, together 28000 > 25000
			r.idle(3)
			if x := r.merge(1); x.Reason != ReasonMergeMargin || x.MergedEstimate != 28_000 || x.MergeLimit != 25_000 {
				t.Fatalf("explained %+v, want merge_margin 28000 > 25000", x)
			}
			r2 := newMergeRun(t, newCatalog(t, "m"), cfg)
			r2.column(loadRow(1, 3125), loadRow(2, 3125)) // 12500 each: exactly the limit
			if got := mergePlans(r2.idle(3)); got != "[1+2#100(25000)]" {
				t.Fatalf("plans %s, want a merge at the limit", got)
			}
		}},
		{"the switch off suppresses merges", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			r.in.Enabled = false
			if p := r.idle(5); len(p) != 0 {
				t.Fatalf("planned with the switch off: %s", mergePlans(p))
			}
			if x := r.merge(2); x.Reason != ReasonMergeSuppressed || x.MergePartner != 1 || x.Repeats != 1 {
				t.Fatalf("explained %+v", x)
			}
			r.in.Enabled = true
			if got := mergePlans(r.column()); got != "[1+2#100(0)]" {
				t.Fatalf("plans %s once enabled: the evidence stands", got)
			}
		}},
		{"coldest pairs first, within the budget", func(t *testing.T) {
			for budget, want := range map[uint32]string{1: "[3+4#100(0)]", 2: "[3+4#100(0) 1+2#101(3000)]", 3: "[3+4#100(0) 1+2#101(3000)]"} {
				cfg := mergeConfig()
				cfg.MaxMergesPerCycle = budget
				r := newMergeRun(t, newCatalog(t, "b", "c", "d"), cfg)
				r.column(loadRow(1, 500), loadRow(2, 250)) // peaks 2000 and 1000
				if got := mergePlans(r.idle(3)); got != want {
					t.Errorf("budget %d: plans %s, want %s", budget, got, want)
				}
				if budget == 1 {
					if x := r.merge(1); x.Reason != ReasonMergeBudget || x.MergedEstimate != 3000 {
						t.Errorf("budget 1: route 1 explained %+v", x)
					}
				}
				if x := r.merge(2); budget > 1 && (x.Reason != ReasonMergePlanned || x.MergePartner != 1) {
					t.Errorf("budget %d: route 2, planned with 1, explained %+v", budget, x)
				}
			}
		}},
		{"never across groups, with a non-ACTIVE route or a route in a live op", func(t *testing.T) {
			base := newCatalog(t, "b", "c")
			for name, tc := range map[string]struct {
				cat  *catalog.Catalog
				ops  []LiveOp
				want string
			}{
				"route 2 in another group": {withGroups(t, base, map[uint64]uint64{2: 7}), nil, "[]"},
				"route 3 in another group": {withGroups(t, base, map[uint64]uint64{3: 7}), nil, "[1+2#100(0)]"},
				"route 1 not ACTIVE":       {withStates(t, base, nonActive(1)), nil, "[2+3#100(0)]"},
				"route 2 in a live op":     {base, []LiveOp{{OpID: 9, RouteIDs: []uint64{2}}}, "[]"},
				"route 1 in a live op":     {base, []LiveOp{{OpID: 9, RouteIDs: []uint64{1}}}, "[2+3#100(0)]"},
			} {
				r := newMergeRun(t, tc.cat, mergeConfig())
				r.in.LiveOps = tc.ops
				if got := mergePlans(r.idle(4)); got != tc.want {
					t.Errorf("%s: plans %s, want %s", name, got, tc.want)
				}
			}
		}},
		{"never across a boundary an operator placed; across an automatic one", func(t *testing.T) {
			base := newCatalog(t, "b", "c") // r1 ["", b) r2 [b, c) r3 [c, +inf)
			for name, tc := range map[string]struct {
				cat  *catalog.Catalog
				want string
			}{
				"no marks":        {base, "[1+2#100(0)]"},
				"b an operator's": {withMarks(t, base, 2), "[2+3#100(0)]"},
				"c an operator's": {withMarks(t, base, 3), "[1+2#100(0)]"},
				"both operator's": {withMarks(t, base, 2, 3), "[]"},
			} {
				r := newMergeRun(t, tc.cat, mergeConfig())
				if got := mergePlans(r.idle(4)); got != tc.want {
					t.Errorf("%s: plans %s, want %s", name, got, tc.want)
				}
				if tc.want == "[]" {
					// Not a candidate: no explanation, so no decision.
					for _, id := range []uint64{1, 2, 3} {
						if x := r.merge(id); x.Reason != ReasonUnspecified {
							t.Errorf("%s: route %d explained %+v", name, id, x)
						}
					}
				}
			}
			// An automatic split of a marked route: its new boundary
			// merges, the operator's stay.
			c, ch, err := withMarks(t, base, 2, 3).Split(2, []byte("bm"), 1)
			if err != nil {
				t.Fatal(err)
			}
			r := newMergeRun(t, c, mergeConfig())
			want := fmt.Sprintf("[%d+%d#100(0)]", ch[0].ID, ch[1].ID)
			if got := mergePlans(r.idle(4)); got != want {
				t.Fatalf("after an automatic split: plans %s, want %s", got, want)
			}
		}},
		{"merge ops take the ids after the column's splits", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m", "n"), mergeConfig())
			b := make([]uint64, 16)
			for i := range b {
				b[i] = hotWrites * 4 / 16
			}
			var p []Plan
			for range 4 {
				p = r.column(Row{RouteID: 1, Writes: hotWrites, Buckets: b})
			}
			if len(p) != 2 || p[0].Kind != PlanSplit || p[0].OpID != 100 || mergePlans(p) != "[2+3#101(0)]" {
				t.Fatalf("plans %+v", p)
			}
		}},
		{"without the merge rule, no merge and no cold state", func(t *testing.T) {
			r := newMergeRun(t, newCatalog(t, "m"), mergeConfig())
			r.in.Rules = balanceRules
			if p := r.idle(6); len(p) != 0 || r.s.Cold().RunColumns != 0 {
				t.Fatalf("plans %+v, cold %+v", p, r.s.Cold())
			}
			cfg := mergeConfig()
			cfg.MaxMergesPerCycle = 0
			r = newMergeRun(t, newCatalog(t, "m"), cfg)
			if p := r.idle(6); len(p) != 0 || r.s.Cold().RunColumns != 0 {
				t.Fatalf("max_merges_per_cycle 0: plans %+v, cold %+v", p, r.s.Cold())
			}
		}},
		{"a cold peak is forgotten after two epochs", func(t *testing.T) {
			cfg := mergeConfig()
			cfg.MaxMergesPerCycle = 1
			r := newMergeRun(t, newCatalog(t, "m"), cfg)
			r.in.Enabled = false // keep the pair explained, not merged
			r.column(loadRow(1, 2000))
			r.idle(6) // run columns 2-7: epochs 0 and 1
			if e := r.s.Cold().Entries; len(e) != 1 || e[0].RouteID != 1 || e[0].PreviousPeak != 8000 {
				t.Fatalf("entries after 7 columns %+v", e)
			}
			if x := r.merge(1); x.MergedEstimate != 8000 {
				t.Fatalf("estimate %d, want the peak 8000", x.MergedEstimate)
			}
			r.column() // run column 8: epoch 2
			if e := r.s.Cold().Entries; len(e) != 0 {
				t.Fatalf("entries after two epochs %+v", e)
			}
			if x := r.merge(1); x.MergedEstimate != 0 {
				t.Fatalf("estimate %d after the peak aged out", x.MergedEstimate)
			}
		}},
	} {
		t.Run(tc.name, tc.run)
	}
}

// TestMergeScanIsBounded: a column examines at most MergeScanRoutes routes
// and the next one continues where it stopped, so pairs beyond the first
// window are found without a column ever walking the whole catalog.
func TestMergeScanIsBounded(t *testing.T) {
	c := spreadCatalog(t, MergeScanRoutes+904)
	cfg := mergeConfig()
	cfg.MergeWindows = 4
	r := newMergeRun(t, c, cfg)
	r.idle(3)
	if got := mergePlans(r.column()); got != "[1+2#100(0)]" {
		t.Fatalf("first window: %s", got)
	}
	last, _ := c.Route(MergeScanRoutes)
	if cur := r.s.Cold().ScanCursor; !bytes.Equal(cur, last.Start) {
		t.Fatalf("cursor %s, want the start of route %d (%s)", catalog.FormatKey(cur), MergeScanRoutes, catalog.FormatKey(last.Start))
	}
	busy := make([]uint64, MergeScanRoutes-1)
	for i := range busy {
		busy[i] = uint64(i + 1)
	}
	r.in.LiveOps = []LiveOp{{OpID: 1, RouteIDs: busy}}
	want := fmt.Sprintf("[%d+%d#100(0)]", MergeScanRoutes, MergeScanRoutes+1)
	if got := mergePlans(r.column()); got != want {
		t.Fatalf("second window: %s, want %s", got, want)
	}
	// The window wrapped: routes MergeScanRoutes..n, then 1..k, k routes
	// short of MergeScanRoutes in all.
	end, _ := c.Route(uint64(2*MergeScanRoutes - 1 - c.Len()))
	if cur := r.s.Cold().ScanCursor; !bytes.Equal(cur, end.Start) {
		t.Fatalf("cursor %s after the wrap, want %s", catalog.FormatKey(cur), catalog.FormatKey(end.Start))
	}
}

// TestMergeAllocationsBounded: an idle column's allocations do not grow
// with the catalog beyond the scan window.
func TestMergeAllocationsBounded(t *testing.T) {
	allocs := func(n int) float64 {
		r := newMergeRun(t, spreadCatalog(t, n), mergeConfig())
		r.idle(4)
		s, at := r.s, r.at
		col := Column{WindowStartMs: at, AtMs: at + minute, Complete: true}
		in := r.in
		in.NowMs = col.AtMs
		return testing.AllocsPerRun(5, func() { Observe(in, s, col) })
	}
	small, large := allocs(2*MergeScanRoutes), allocs(8*MergeScanRoutes)
	if small != large {
		t.Errorf("allocations grow with the catalog: %v at %d routes, %v at %d", small, 2*MergeScanRoutes, large, 8*MergeScanRoutes)
	}
}

// TestColdStateRoundTrip: WithCold restores what Cold returns and refuses
// what no Observe produces.
func TestColdStateRoundTrip(t *testing.T) {
	r := newMergeRun(t, newCatalog(t, "b", "c"), mergeConfig())
	r.in.Enabled = false
	r.column(loadRow(1, 100), loadRow(3, 4000))
	r.idle(2)
	c := r.s.Cold()
	if c.RunColumns != 3 || len(c.RecentStarts) != 3 || len(c.Entries) != 2 {
		t.Fatalf("cold %+v", c)
	}
	back, err := mustState(t).WithCold(c)
	if err != nil {
		t.Fatal(err)
	}
	if got := back.Cold(); fmt.Sprint(got) != fmt.Sprint(c) {
		t.Fatalf("round trip %+v, want %+v", got, c)
	}
	for name, bad := range map[string]Cold{
		"starts not increasing":  {RunColumns: 3, RecentStarts: []uint64{5, 5}},
		"more starts than run":   {RunColumns: 1, RecentStarts: []uint64{5, 6}},
		"entries unsorted":       {RunColumns: 3, Entries: []ColdEntry{{RouteID: 4}, {RouteID: 2}}},
		"route 0":                {RunColumns: 3, Entries: []ColdEntry{{RouteID: 0}}},
		"warm column beyond run": {RunColumns: 3, Entries: []ColdEntry{{RouteID: 1, WarmColumn: 4}}},
	} {
		if _, err := mustState(t).WithCold(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestMergeConfigValidation: the merge settings are all absent or each in
// range, merge_windows above candidate_windows.
func TestMergeConfigValidation(t *testing.T) {
	if err := mergeConfig().Validate(); err != nil {
		t.Fatalf("mergeConfig: %v", err)
	}
	for field, edit := range map[string]func(*Config){
		"merge_threshold_bp":   func(c *Config) { c.MergeThresholdBP = 5001 },
		"merge_windows":        func(c *Config) { c.MergeWindows = c.CandidateWindows },
		"merge_delay_ms":       func(c *Config) { c.MergeDelayMs = maxCooldownMs + 1 },
		"max_merges_per_cycle": func(c *Config) { c.MaxMergesPerCycle = 1025 },
		"merge_margin_bp":      func(c *Config) { c.MergeMarginBP = 999 },
	} {
		c := mergeConfig()
		edit(&c)
		err := c.Validate()
		if ce, ok := err.(*ConfigError); !ok || ce.Field != field {
			t.Errorf("%s out of range: %v", field, err)
		}
	}
	c := DefaultConfig()
	c.MergeThresholdBP, c.MergeWindows, c.MaxMergesPerCycle, c.MergeMarginBP = 0, 0, 0, 0
	if ce, ok := c.Validate().(*ConfigError); !ok || ce.Field != "merge_delay_ms" {
		t.Errorf("a merge setting without merge_windows: %v", c.Validate())
	}
}

// checkMergePlans asserts what holds for every merge plan, whatever the
// history: merges only with the rule and the switch on, within the budget,
// with the ids after the splits', of adjacent ACTIVE routes of one group
// that are in no live op or split plan and no other merge plan, past the
// merge delay, with an estimate within the limit, explained on both routes.
func checkMergePlans(t fataler, in Input, col Column, splits, merges []Plan, next *State) {
	t.Helper()
	if len(merges) == 0 {
		return
	}
	switch {
	case !mergesOn(in) || !in.Enabled || !col.Complete:
		t.Fatalf("merges planned: rule %v, switch %v, complete %v", mergesOn(in), in.Enabled, col.Complete)
	case len(merges) > int(in.Config.MaxMergesPerCycle):
		t.Fatalf("%d merges, budget %d", len(merges), in.Config.MaxMergesPerCycle)
	}
	busy := map[uint64]bool{}
	for _, op := range in.LiveOps {
		for _, id := range op.RouteIDs {
			busy[id] = true
		}
	}
	for _, p := range splits {
		busy[p.RouteID] = true
	}
	limit := mergeLimit(in.Config)
	for i, p := range merges {
		if p.OpID != in.NextOpID+uint64(len(splits)+i) || p.RouteDelta != -1 || len(p.Keys) != 0 {
			t.Fatalf("merge plan %d: %+v", i, p)
		}
		l, okL := in.Catalog.Route(p.RouteID)
		r, okR := in.Catalog.Route(p.RightRouteID)
		switch {
		case !okL || !okR:
			t.Fatalf("merge of routes that are not live: %+v", p)
		case l.Unbounded() || !bytes.Equal(l.End, r.Start):
			t.Fatalf("merge of %v and %v: not adjacent", l, r)
		case l.GroupID != r.GroupID || l.State != catalog.StateActive || r.State != catalog.StateActive:
			t.Fatalf("merge of %v (group %d) and %v (group %d)", l, l.GroupID, r, r.GroupID)
		case busy[l.ID] || busy[r.ID]:
			t.Fatalf("merge of %d+%d: one is in a live op, a split plan or another merge", l.ID, r.ID)
		case r.OperatorStart:
			t.Fatalf("merge of %d+%d removes the boundary %s an operator placed", l.ID, r.ID, catalog.FormatKey(r.Start))
		case p.Score > limit:
			t.Fatalf("merge estimate %d above the limit %d", p.Score, limit)
		}
		busy[l.ID], busy[r.ID] = true, true
		for _, d := range []*catalog.RouteDescriptor{l, r} {
			created := uint64(0)
			if in.CreatedAtMs != nil {
				created = in.CreatedAtMs(d)
			}
			if created+in.Config.MergeDelayMs > in.NowMs {
				t.Fatalf("route %d created at %d merged at %d, delay %d", d.ID, created, in.NowMs, in.Config.MergeDelayMs)
			}
			tr, _ := next.Get(d.ID)
			if x := tr.Merge; x.Reason != ReasonMergePlanned || x.OpID != p.OpID || x.AtMs != col.AtMs {
				t.Fatalf("merged route %d explained %+v", d.ID, x)
			}
		}
	}
}

// coldModel is the naive reference of coldness: every observed column in
// full, judged from the whole history without counters or epochs.
type coldModel struct {
	cols []modelColumn
}

type modelColumn struct {
	start    uint64
	complete bool
	gap      bool // does not start where the previous column ended
	scores   map[uint64]uint64
}

// coldColumns counts route id's consecutive cold complete columns, newest
// first, within one run and after createdMs.
func (m *coldModel) coldColumns(cfg Config, id, createdMs uint64) int {
	n := 0
	for i := len(m.cols) - 1; i >= 0; i-- {
		c := m.cols[i]
		if !c.complete || c.start < createdMs || isWarm(cfg, c.scores[id]) {
			break
		}
		n++
		if c.gap {
			break
		}
	}
	return n
}

// TestMergeProperties: over random catalogs (groups, states), settings,
// columns (complete or not, gaps, loads), live ops, switch and creation
// times: every merge plan satisfies the rules against the naive model of
// coldness (rule 2 from the whole history); when the switch is on, the
// margin cannot bind and some unbusy pair is cold long enough and past its
// delay, a merge is planned (the scan covers small catalogs whole); the
// outcome does not depend on the order of the rows and is the same twice.
func TestMergeProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genCatalog(t)
		groups := map[uint64]uint64{}
		for id := uint64(1); id <= uint64(c.Len()); id++ {
			if rapid.IntRange(0, 6).Draw(t, "otherGroup") == 0 {
				groups[id] = 2
			}
		}
		c = withGroups(t, c, groups)
		var marked []uint64
		for id := uint64(2); id <= uint64(c.Len()); id++ {
			if rapid.IntRange(0, 4).Draw(t, "operatorStart") == 0 {
				marked = append(marked, id)
			}
		}
		c = withMarks(t, c, marked...)
		routes := routesOf(c)
		cfg := DefaultConfig()
		cfg.Threshold = 1000
		cfg.CandidateWindows = 1
		cfg.MergeThresholdBP = uint32(rapid.IntRange(1, 5000).Draw(t, "mergeThreshold"))
		cfg.MergeWindows = uint32(rapid.IntRange(int(cfg.CandidateWindows)+1, 6).Draw(t, "mergeWindows"))
		cfg.MergeDelayMs = rapid.SampledFrom([]uint64{0, 0, minute, 5 * minute, 10 * minute}).Draw(t, "mergeDelay")
		cfg.MaxMergesPerCycle = uint32(rapid.IntRange(1, 3).Draw(t, "mergeBudget"))
		cfg.MergeMarginBP = uint32(rapid.IntRange(1000, 10_000).Draw(t, "margin"))
		marginBinds := 2*cfg.MergeThresholdBP > fullShareBP-cfg.MergeMarginBP
		created := map[uint64]uint64{}
		for _, r := range routes {
			created[r.ID] = t0 + rapid.SampledFrom([]uint64{0, 0, 0, 2 * minute, 7 * minute}).Draw(t, "created")
		}
		in := Input{Config: cfg, Catalog: c, NextOpID: 1, Rules: AllRules, CreatedAtMs: createdAt(created)}
		var (
			s     *State
			model coldModel
			at    = t0
		)
		for range rapid.IntRange(1, 30).Draw(t, "columns") {
			if rapid.IntRange(0, 19).Draw(t, "gap") == 0 {
				at += minute
			}
			col := Column{WindowStartMs: at, AtMs: at + minute, Complete: rapid.IntRange(0, 19).Draw(t, "incomplete") != 0}
			mc := modelColumn{start: at, complete: col.Complete, gap: s.LastColumnAtMs() != 0 && at != s.LastColumnAtMs(), scores: map[uint64]uint64{}}
			for _, r := range routes {
				w := rapid.SampledFrom([]uint64{0, 0, 0, 0, 0, 0, 1, 10, 60, 300}).Draw(t, "writes")
				if w > 0 {
					row := Row{RouteID: r.ID, Writes: w}
					col.Rows = append(col.Rows, row)
					mc.scores[r.ID] = Score(0, w, cfg, minute)
				}
			}
			in.NowMs = col.AtMs
			in.Enabled = rapid.IntRange(0, 4).Draw(t, "off") != 0
			in.LiveOps = nil
			if rapid.Bool().Draw(t, "liveOp") {
				in.LiveOps = []LiveOp{{OpID: 1, RouteIDs: []uint64{rapid.SampledFrom(routes).Draw(t, "opRoute").ID}}}
			}
			next, plans := Observe(in, s, col)
			checkOutcome(t, in, s, col, next, plans)

			shuffled := col
			shuffled.Rows = slices.Clone(col.Rows)
			slices.Reverse(shuffled.Rows)
			again, plans2 := Observe(in, s, shuffled)
			if a, b := dump(next, plans)+fmt.Sprint(next.Cold()), dump(again, plans2)+fmt.Sprint(again.Cold()); a != b {
				t.Fatalf("row order changed the outcome:\n%s\n%s", a, b)
			}

			model.cols = append(model.cols, mc)
			busy := map[uint64]bool{}
			for _, op := range in.LiveOps {
				busy[op.RouteIDs[0]] = true
			}
			eligible := false
			for i := 0; i+1 < len(routes); i++ {
				a, b := routes[i], routes[i+1]
				ok := model.coldColumns(cfg, a.ID, created[a.ID]) >= int(cfg.MergeWindows) &&
					model.coldColumns(cfg, b.ID, created[b.ID]) >= int(cfg.MergeWindows)
				for _, p := range plans {
					if p.Kind == PlanMerge && p.RouteID == a.ID && !ok {
						t.Fatalf("merge %d+%d: the model says cold for %d and %d columns, need %d", a.ID, b.ID,
							model.coldColumns(cfg, a.ID, created[a.ID]), model.coldColumns(cfg, b.ID, created[b.ID]), cfg.MergeWindows)
					}
				}
				if ok && !b.OperatorStart && a.GroupID == b.GroupID && a.State == catalog.StateActive && b.State == catalog.StateActive &&
					!busy[a.ID] && !busy[b.ID] && max(created[a.ID], created[b.ID])+cfg.MergeDelayMs <= in.NowMs {
					eligible = true
				}
			}
			merged := slices.ContainsFunc(plans, func(p Plan) bool { return p.Kind == PlanMerge })
			if eligible && in.Enabled && !marginBinds && !merged {
				t.Fatalf("an eligible pair and no merge planned; cold %+v", next.Cold())
			}
			s = next
			at = col.AtMs
		}
	})
}

// TestMergeReasonsMatchTheAPI: the merge reasons are the api's.
func TestMergeReasonsMatchTheAPI(t *testing.T) {
	for r, want := range map[Reason]api.Reason{
		ReasonMergePlanned: api.Reason_REASON_MERGE_PLANNED, ReasonMergeDelay: api.Reason_REASON_MERGE_DELAY,
		ReasonMergeMargin: api.Reason_REASON_MERGE_MARGIN, ReasonMergeSuppressed: api.Reason_REASON_MERGE_SUPPRESSED,
		ReasonMergeBudget: api.Reason_REASON_MERGE_BUDGET,
	} {
		if int32(r) != int32(want) {
			t.Errorf("%s = %d, api %d", r, r, want)
		}
	}
}

// BenchmarkObserveMerges: one column under the merge rule over a catalog
// of 10,000 routes, idle (the cold state is empty, the scan walks
// MergeScanRoutes routes) and with every route loaded below the merge
// threshold (a cold entry per route).
func BenchmarkObserveMerges(b *testing.B) {
	for _, loaded := range []bool{false, true} {
		b.Run(fmt.Sprintf("loaded=%v", loaded), func(b *testing.B) {
			c := spreadCatalog(&testing.T{}, 10_000)
			r := newMergeRun(b, c, mergeConfig())
			var rows []Row
			if loaded {
				for id := uint64(1); id <= 10_000; id++ {
					rows = append(rows, loadRow(id, 1+id%100))
				}
			}
			for range 4 {
				r.column(rows...)
			}
			col := Column{WindowStartMs: r.at, AtMs: r.at + minute, Rows: rows, Complete: true}
			in := r.in
			in.NowMs = col.AtMs
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				Observe(in, r.s, col)
			}
			b.ReportMetric(float64(len(r.s.Cold().Entries)), "entries")
		})
	}
}
