package detector

import (
	"slices"
	"testing"
)

// Guardrail cases run one column over five routes: 1 [, b), 2 [b, d),
// 3 [d, f), 4 [f, h), 5 [h, +inf); the listed rows' routes are eligible.
var guardSplits = []string{"b", "d", "f", "h"}

// isoRow is a row whose dominant key (the route start + "x") is isolated
// by a compound op (+2 routes).
func isoRow(id, writes uint64, start string) Row {
	w := writes * 4
	return Row{RouteID: id, Writes: writes, TopKeys: []KeyEstimate{{Key: []byte(start + "x"), Lower: w * 9 / 10, Upper: w}}}
}

// medRow is a row split at its sub-bucket median (+1 route).
func medRow(id, writes uint64) Row { return writesRow(id, writes) }

// bareRow is a hot row without any split-key evidence.
func bareRow(id, writes uint64) Row { return Row{RouteID: id, Writes: writes} }

type guardCase struct {
	name      string
	cfg       func(*Config)
	rows      []Row
	liveOps   []LiveOp
	disabled  bool
	reasons   map[uint64]Reason
	projected map[uint64]uint64 // explanation's projected routes, when listed
	plans     []uint64          // planned routes, in plan order
}

func runGuardCase(t *testing.T, tc guardCase) {
	t.Helper()
	cfg := DefaultConfig()
	if tc.cfg != nil {
		tc.cfg(&cfg)
	}
	c := newCatalog(t, guardSplits...)
	ids := make([]uint64, len(tc.rows))
	for i, r := range tc.rows {
		ids[i] = r.RouteID
	}
	in := enabledInput(c, cfg)
	in.LiveOps = tc.liveOps
	in.Enabled = !tc.disabled
	s, plans := Observe(in, eligibleState(t, cfg, sortedIDs(ids)...), column(tc.rows...))
	for id, want := range tc.reasons {
		if got := reasonOf(s, id); got != want {
			t.Errorf("route %d: reason %v, want %v", id, got, want)
		}
	}
	for id, want := range tc.projected {
		tr, _ := s.Get(id)
		if tr.Explanation.ProjectedRoutes != want {
			t.Errorf("route %d: projected routes %d, want %d", id, tr.Explanation.ProjectedRoutes, want)
		}
	}
	if len(plans) != len(tc.plans) {
		t.Fatalf("planned %d ops %+v, want routes %v", len(plans), plans, tc.plans)
	}
	for i, p := range plans {
		if p.RouteID != tc.plans[i] {
			t.Errorf("plan %d is route %d, want %d", i, p.RouteID, tc.plans[i])
		}
		if p.OpID != in.NextOpID+uint64(i) {
			t.Errorf("plan %d has op id %d, want %d", i, p.OpID, in.NextOpID+uint64(i))
		}
		if tr, _ := s.Get(p.RouteID); tr.Explanation.OpID != p.OpID {
			t.Errorf("route %d explanation names op %d, plan is op %d", p.RouteID, tr.Explanation.OpID, p.OpID)
		}
	}
}

func sortedIDs(ids []uint64) []uint64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestGuardrails covers docs/design.md#guardrails: the route cap with live ops and the
// column's reserved delta, the per-column budget, the order of candidates.
func TestGuardrails(t *testing.T) {
	capAt := func(n uint32) func(*Config) { return func(c *Config) { c.MaxAutoRoutes = n } }
	cases := []guardCase{
		{
			name:      "a two-step isolation at cap-1 is skipped with route_cap",
			cfg:       capAt(6),
			rows:      []Row{isoRow(2, 15_000, "b")},
			reasons:   map[uint64]Reason{2: ReasonRouteCap},
			projected: map[uint64]uint64{2: 7},
		},
		{
			name:      "a normal split at cap-1 proceeds",
			cfg:       capAt(6),
			rows:      []Row{medRow(3, 15_000)},
			reasons:   map[uint64]Reason{3: ReasonPlanned},
			projected: map[uint64]uint64{3: 6},
			plans:     []uint64{3},
		},
		{
			name:      "a skipped isolation at cap-1 leaves the budget to a normal split",
			cfg:       capAt(6),
			rows:      []Row{isoRow(2, 20_000, "b"), medRow(3, 15_000)},
			reasons:   map[uint64]Reason{2: ReasonRouteCap, 3: ReasonPlanned},
			projected: map[uint64]uint64{2: 7, 3: 6},
			plans:     []uint64{3},
		},
		{
			name: "a compound isolation at cap-2 proceeds",
			cfg:  capAt(7),
			rows: []Row{isoRow(2, 15_000, "b")}, reasons: map[uint64]Reason{2: ReasonPlanned},
			projected: map[uint64]uint64{2: 7},
			plans:     []uint64{2},
		},
		{
			name:      "two normal splits at cap-1 with budget 2: the first planned, the second route_cap",
			cfg:       func(c *Config) { c.MaxAutoRoutes, c.MaxSplitsPerCycle = 6, 2 },
			rows:      []Row{medRow(2, 20_000), medRow(3, 15_000)},
			reasons:   map[uint64]Reason{2: ReasonPlanned, 3: ReasonRouteCap},
			projected: map[uint64]uint64{2: 6, 3: 7},
			plans:     []uint64{2},
		},
		{
			name:      "the column's reserved delta counts: isolation, isolation over cap, then a normal split fits",
			cfg:       func(c *Config) { c.MaxAutoRoutes, c.MaxSplitsPerCycle = 8, 3 },
			rows:      []Row{isoRow(2, 30_000, "b"), isoRow(3, 20_000, "d"), medRow(4, 15_000)},
			reasons:   map[uint64]Reason{2: ReasonPlanned, 3: ReasonRouteCap, 4: ReasonPlanned},
			projected: map[uint64]uint64{2: 7, 3: 9, 4: 8},
			plans:     []uint64{2, 4},
		},
		{
			name:      "a live half-done isolation's remaining +1 counts",
			cfg:       capAt(6),
			rows:      []Row{medRow(3, 15_000)},
			liveOps:   []LiveOp{{OpID: 9, RouteIDs: []uint64{5}, RemainingDelta: 1}},
			reasons:   map[uint64]Reason{3: ReasonRouteCap},
			projected: map[uint64]uint64{3: 7},
		},
		{
			name:      "live ops' remaining deltas add up",
			cfg:       capAt(9),
			rows:      []Row{medRow(3, 15_000)},
			liveOps:   []LiveOp{{OpID: 9, RouteIDs: []uint64{5}, RemainingDelta: 1}, {OpID: 10, RouteIDs: []uint64{1}, RemainingDelta: 2}},
			reasons:   map[uint64]Reason{3: ReasonPlanned},
			projected: map[uint64]uint64{3: 9},
			plans:     []uint64{3},
		},
		{
			name:    "a declined hottest route does not block the next one",
			rows:    []Row{bareRow(2, 30_000), medRow(3, 15_000)},
			reasons: map[uint64]Reason{2: ReasonNoSplitKey, 3: ReasonPlanned},
			plans:   []uint64{3},
		},
		{
			name:    "after the budget is used a route without a split key still says no_split_key",
			rows:    []Row{medRow(2, 30_000), bareRow(3, 20_000), medRow(4, 15_000)},
			reasons: map[uint64]Reason{2: ReasonPlanned, 3: ReasonNoSplitKey, 4: ReasonBudgetExhausted},
			plans:   []uint64{2},
		},
		{
			name:    "budget 1: the highest score is planned, the rest budget_exhausted",
			rows:    []Row{medRow(2, 15_000), medRow(3, 20_000), medRow(4, 17_000)},
			reasons: map[uint64]Reason{2: ReasonBudgetExhausted, 3: ReasonPlanned, 4: ReasonBudgetExhausted},
			plans:   []uint64{3},
		},
		{
			name:    "budget 2: plans in score order with consecutive op ids",
			cfg:     func(c *Config) { c.MaxSplitsPerCycle = 2 },
			rows:    []Row{medRow(2, 15_000), medRow(3, 20_000), medRow(4, 17_000)},
			reasons: map[uint64]Reason{2: ReasonBudgetExhausted, 3: ReasonPlanned, 4: ReasonPlanned},
			plans:   []uint64{3, 4},
		},
		{
			name:    "equal scores go to the lower route id",
			rows:    []Row{medRow(4, 15_000), medRow(2, 15_000)},
			reasons: map[uint64]Reason{2: ReasonPlanned, 4: ReasonBudgetExhausted},
			plans:   []uint64{2},
		},
		{
			name:     "switch off: every eligible route suppressed, nothing planned",
			disabled: true,
			rows:     []Row{medRow(2, 15_000), isoRow(3, 20_000, "d"), bareRow(4, 17_000)},
			reasons:  map[uint64]Reason{2: ReasonSuppressedDisable, 3: ReasonSuppressedDisable, 4: ReasonSuppressedDisable},
		},
		{
			name:    "a route in a live op is skipped and does not use the budget",
			rows:    []Row{medRow(2, 20_000), medRow(3, 15_000)},
			liveOps: []LiveOp{{OpID: 9, RouteIDs: []uint64{2}, RemainingDelta: 1}},
			reasons: map[uint64]Reason{2: ReasonInLiveOp, 3: ReasonPlanned},
			plans:   []uint64{3},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runGuardCase(t, tc) })
	}
}
