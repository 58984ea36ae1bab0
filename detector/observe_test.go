package detector

import (
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
)

// colSpec is one column of a scenario and what must hold after it.
type colSpec struct {
	dur      uint64 // column length; default one minute
	skip     uint64 // time missing before this column (a gap)
	rows     []Row
	late     uint64 // NowMs = AtMs + late
	disabled bool
	liveOps  []LiveOp
	states   map[uint64]catalog.RouteState
	before   func(*State) *State // committed between the previous column and this one
	want     map[uint64]routeWant
	plans    []wantPlan // exactly these, in this order
}

type routeWant struct {
	counter       uint32
	reason        Reason // checked when set
	isolation     Reason // checked when set
	cooldownUntil uint64 // checked when set
	absent        bool   // no tracked entry at all
}

type wantPlan struct {
	route  uint64
	origin Origin
}

type scenario struct {
	name   string
	splits []string
	cfg    func(*Config)
	cols   []colSpec
}

func runScenario(t *testing.T, sc scenario) {
	t.Helper()
	cfg := DefaultConfig()
	if sc.cfg != nil {
		sc.cfg(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("scenario config: %v", err)
	}
	base := newCatalog(t, sc.splits...)
	var s *State
	at := t0
	for k, cs := range sc.cols {
		if cs.before != nil {
			s = cs.before(s)
		}
		dur := cs.dur
		if dur == 0 {
			dur = minute
		}
		col := Column{WindowStartMs: at + cs.skip, AtMs: at + cs.skip + dur, Rows: cs.rows}
		in := Input{
			Config:   cfg,
			Catalog:  withStates(t, base, cs.states),
			LiveOps:  cs.liveOps,
			NowMs:    col.AtMs + cs.late,
			Enabled:  !cs.disabled,
			NextOpID: 1,
		}
		var plans []Plan
		s, plans = Observe(in, s, col)
		at = col.AtMs
		if s.LastColumnAtMs() != col.AtMs {
			t.Fatalf("column %d: LastColumnAtMs = %d, want %d", k+1, s.LastColumnAtMs(), col.AtMs)
		}
		for id, w := range cs.want {
			tr, ok := s.Get(id)
			if w.absent && ok {
				t.Errorf("column %d: route %d still tracked: %+v", k+1, id, tr)
			}
			if tr.ConsecutiveOver != w.counter {
				t.Errorf("column %d: route %d consecutive_over = %d, want %d", k+1, id, tr.ConsecutiveOver, w.counter)
			}
			if w.reason != 0 && tr.Explanation.Reason != w.reason {
				t.Errorf("column %d: route %d reason = %v, want %v", k+1, id, tr.Explanation.Reason, w.reason)
			}
			if w.isolation != 0 && tr.Explanation.IsolationReason != w.isolation {
				t.Errorf("column %d: route %d isolation reason = %v, want %v", k+1, id, tr.Explanation.IsolationReason, w.isolation)
			}
			if w.cooldownUntil != 0 && tr.CooldownUntilMs != w.cooldownUntil {
				t.Errorf("column %d: route %d cooldown_until = %d, want %d", k+1, id, tr.CooldownUntilMs, w.cooldownUntil)
			}
		}
		if len(plans) != len(cs.plans) {
			t.Fatalf("column %d: %d plans %+v, want %d %+v", k+1, len(plans), plans, len(cs.plans), cs.plans)
		}
		for i, p := range plans {
			if p.RouteID != cs.plans[i].route || p.Origin != cs.plans[i].origin {
				t.Errorf("column %d: plan %d = route %d %v, want route %d %v", k+1, i, p.RouteID, p.Origin, cs.plans[i].route, cs.plans[i].origin)
			}
			if p.OpID != uint64(1+i) || p.Explanation.OpID != p.OpID || p.Explanation.Reason != ReasonPlanned {
				t.Errorf("column %d: plan %d op id %d (explanation %d, reason %v), want %d planned", k+1, i, p.OpID, p.Explanation.OpID, p.Explanation.Reason, 1+i)
			}
		}
	}
}

func counting(n uint32) routeWant { return routeWant{counter: n, reason: ReasonCounting} }

var median1 = []wantPlan{{1, OriginSubBucketMedian}}

// scaledRows is the load of the column-length invariance cases at a fixed
// per-minute rate, for a column of durMs: route 1 at 60000/min with a key
// at 54000/min (90%), route 2 at 48000/min (never hot), route 3 at
// 60000/min with a key at 48000/min (80%, below the raised floor of 50000).
func scaledRows(durMs uint64) []Row {
	f := durMs / 1000 // the rates below are per second
	key := func(k string, perSec uint64) []KeyEstimate {
		return []KeyEstimate{{Key: []byte(k), Lower: perSec * f, Upper: perSec * f}}
	}
	r1 := Row{RouteID: 1, Writes: 250 * f, TopKeys: key("c", 900)}
	r3 := Row{RouteID: 3, Writes: 250 * f, TopKeys: key("x", 800), Buckets: buckets(16, map[int]uint64{3: 1000 * f})}
	return []Row{r1, {RouteID: 2, Writes: 200 * f}, r3}
}

func durationCase(name string, durMs uint64) scenario {
	col := colSpec{dur: durMs, rows: scaledRows(durMs)}
	last := col
	last.want = map[uint64]routeWant{
		1: {counter: 3, reason: ReasonPlanned},
		2: {counter: 0},
		3: {counter: 3, reason: ReasonPlanned, isolation: ReasonAbsoluteFloor},
	}
	last.plans = []wantPlan{{1, OriginIsolationCompound}, {3, OriginSubBucketMedian}}
	mid := col
	mid.want = map[uint64]routeWant{1: counting(2), 2: {counter: 0}, 3: counting(2)}
	return scenario{
		name:   name,
		splits: []string{"m", "w"},
		cfg: func(c *Config) {
			c.TopKeyAbsoluteFloor = 50_000
			c.MaxSplitsPerCycle = 2
		},
		cols: []colSpec{col, mid, last},
	}
}

// TestHysteresisAndCooldown covers docs/design.md#the-detector column by column.
func TestHysteresisAndCooldown(t *testing.T) {
	cases := []scenario{
		{
			name:   "cold start is eligible after exactly 3 hot columns",
			splits: []string{"m"},
			cols: []colSpec{
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(1)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(2)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 3, reason: ReasonPlanned}}, plans: median1},
			},
		},
		{
			name:   "hot hot below hot hot hot is eligible only at the sixth",
			splits: []string{"m"},
			cols: []colSpec{
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(1)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(2)}},
				{rows: []Row{cold(1)}, want: map[uint64]routeWant{1: {counter: 0}}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(1)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(2)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 3, reason: ReasonPlanned}}, plans: median1},
			},
		},
		{
			name:   "a route absent from a column scores 0: hot absent hot ends at 1",
			splits: []string{"m"},
			cols: []colSpec{
				{rows: []Row{hot(1), hot(2)}, want: map[uint64]routeWant{1: counting(1)}},
				{rows: []Row{hot(2)}, want: map[uint64]routeWant{1: {counter: 0}, 2: counting(2)}},
				{rows: []Row{hot(1), hot(2)}, want: map[uint64]routeWant{1: counting(1), 2: {counter: 3, reason: ReasonPlanned}},
					plans: []wantPlan{{2, OriginSubBucketMedian}}},
			},
		},
		{
			name:   "a missing step resets every counter",
			splits: []string{"m"},
			cols: []colSpec{
				{rows: []Row{hot(1), hot(2)}},
				{rows: []Row{hot(1), hot(2)}, want: map[uint64]routeWant{1: counting(2), 2: counting(2)}},
				{skip: minute, rows: []Row{hot(1), hot(2)}, want: map[uint64]routeWant{1: counting(1), 2: counting(1)}},
				{rows: []Row{hot(1), hot(2)}, want: map[uint64]routeWant{1: counting(2), 2: counting(2)}},
				{rows: []Row{hot(1), hot(2)}, want: map[uint64]routeWant{1: {counter: 3, reason: ReasonPlanned}, 2: {counter: 3, reason: ReasonBudgetExhausted}},
					plans: median1},
			},
		},
		durationCase("the same per-minute rate decides the same with 1 s columns", 1_000),
		durationCase("the same per-minute rate decides the same with 30 s columns", 30_000),
		durationCase("the same per-minute rate decides the same with 60 s columns", 60_000),
		durationCase("the same per-minute rate decides the same with 120 s columns", 120_000),
		{
			name:   "hot hot non-active hot ends at 1",
			splits: []string{"m"},
			cols: []colSpec{
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(1)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(2)}},
				{rows: []Row{hot(1)}, states: nonActive(1), want: map[uint64]routeWant{1: {counter: 0, reason: ReasonNonActive}}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(1)}},
			},
		},
		{
			name:   "a non-active just-split child keeps its cooldown",
			splits: []string{"m"},
			cfg:    func(c *Config) { c.CooldownMs = 10 * minute },
			cols: []colSpec{
				{
					// Routes 1 and 2 are the children of a split at t0.
					before: func(s *State) *State { return s.OnSplit(DefaultConfig(), 99, []uint64{1, 2}, 0, t0) },
					rows:   []Row{hot(1)}, states: nonActive(1),
					want: map[uint64]routeWant{1: {counter: 0, reason: ReasonNonActive, cooldownUntil: t0 + 10*minute}},
				},
				{rows: []Row{hot(1)}, states: nonActive(1), want: map[uint64]routeWant{1: {counter: 0, reason: ReasonNonActive, cooldownUntil: t0 + 10*minute}}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 1, reason: ReasonCounting, cooldownUntil: t0 + 10*minute}}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(2)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 3, reason: ReasonCooldown, cooldownUntil: t0 + 10*minute}}},
			},
		},
		{
			name:   "cooldown blocks and a route still hot when it ends is planned at once",
			splits: []string{"m"},
			cfg:    func(c *Config) { c.CooldownMs = 4 * minute },
			cols: []colSpec{
				{
					before: func(s *State) *State { return s.StartCooldown(Config{CooldownMs: 4 * minute}, 1, t0) },
					rows:   []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 1, reason: ReasonCounting, cooldownUntil: t0 + 4*minute}},
				},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: counting(2)}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 3, reason: ReasonCooldown}}},
				// NowMs = t0 + 4 min: the cooldown is over.
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 4, reason: ReasonPlanned}}, plans: median1},
			},
		},
		{
			name:   "cooldown is judged at apply time, not at the column end",
			splits: []string{"m"},
			cfg:    func(c *Config) { c.CooldownMs = 4 * minute },
			cols: []colSpec{
				{before: func(s *State) *State { return s.StartCooldown(Config{CooldownMs: 4 * minute}, 1, t0) }, rows: []Row{hot(1)}},
				{rows: []Row{hot(1)}},
				// The column ends at t0+3min but applies at t0+4min.
				{rows: []Row{hot(1)}, late: minute, want: map[uint64]routeWant{1: {counter: 3, reason: ReasonPlanned}}, plans: median1},
			},
		},
		{
			name:   "switch off suppresses and plans nothing; switching on plans at once",
			splits: []string{"m"},
			cols: []colSpec{
				{rows: []Row{hot(1)}, disabled: true},
				{rows: []Row{hot(1)}, disabled: true},
				{rows: []Row{hot(1)}, disabled: true, want: map[uint64]routeWant{1: {counter: 3, reason: ReasonSuppressedDisable}}},
				{rows: []Row{hot(1)}, disabled: true, want: map[uint64]routeWant{1: {counter: 4, reason: ReasonSuppressedDisable}}},
				{rows: []Row{hot(1)}, want: map[uint64]routeWant{1: {counter: 5, reason: ReasonPlanned}}, plans: median1},
			},
		},
		{
			name:   "a route in a live op is not promoted",
			splits: []string{"m"},
			cols: []colSpec{
				{rows: []Row{hot(1)}},
				{rows: []Row{hot(1)}},
				{rows: []Row{hot(1), hot(2)}, liveOps: []LiveOp{{OpID: 7, RouteIDs: []uint64{1}, RemainingDelta: 1}},
					want: map[uint64]routeWant{1: {counter: 3, reason: ReasonInLiveOp}, 2: counting(1)}},
			},
		},
		{
			name:   "a tracked route that left the catalog is dropped and its row ignored",
			splits: []string{"m"},
			cols: []colSpec{
				{
					before: func(*State) *State {
						return mustState(t, Tracked{RouteID: 3, ConsecutiveOver: 2, CooldownUntilMs: t0 + 100*minute})
					},
					rows: []Row{hot(1), hot(3)},
					want: map[uint64]routeWant{1: counting(1), 3: {absent: true}},
				},
				{rows: []Row{hot(1), hot(4)}, want: map[uint64]routeWant{1: counting(2), 4: {absent: true}}},
			},
		},
	}
	for _, sc := range cases {
		t.Run(sc.name, func(t *testing.T) { runScenario(t, sc) })
	}
}
