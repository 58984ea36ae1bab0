package simlab

import (
	"fmt"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/sim"
)

// Issue 13's acceptance, measured through the whole pipeline. Under
// -short (CI's unit stage) each test runs a fast subset; the long suite
// (`.ci/run long`) runs them in full.

// longEnough is how many seeds (or trials) to run: few under -short.
func longEnough(short, long int) int {
	if testing.Short() {
		return short
	}
	return long
}

// TestNarrowConvergesWithinBound: K = 1000 hot keys under a P-byte prefix
// in one route covering everything, uniform load at 3× the threshold: the
// hottest route is below the threshold within ⌈log2(3)⌉ + 2 = 4 automatic
// splits, counting every split of the run, for P = 4, 19 and 40. The full
// test runs at the production step and cooldown (60 s, 10 min).
func TestNarrowConvergesWithinBound(t *testing.T) {
	const load = 3.0
	bound := int(math.Ceil(math.Log2(load))) + 2
	prefixes := []int{4, 19, 40}
	cfg := SuiteConfig() // 10 s step: six times cheaper
	if !testing.Short() {
		cfg = nil // production defaults
	} else {
		prefixes = []int{19}
	}
	for _, p := range prefixes {
		o := sim.DefaultWorkloadOptions()
		o.PrefixLen, o.HotKeys = p, 1000
		w, err := sim.ParseWorkload(sim.Narrow, o)
		if err != nil {
			t.Fatal(err)
		}
		for seed := uint64(1); seed <= uint64(longEnough(1, 5)); seed++ {
			res, err := Run(Spec{Workload: w, Config: cfg, Load: load, Columns: longEnough(22, 40), Seed: seed})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("P=%d seed %d: relief at column %d after %d splits; %d splits in all, %d routes, hottest %.2f× threshold",
				p, seed, res.ReliefColumn, res.SplitsToRelief, res.Splits, res.Routes, res.Hottest)
			if res.ReliefColumn < 0 || res.Splits > bound {
				t.Fatalf("P=%d seed %d: relief column %d, %d splits in the run; want relief within %d splits",
					p, seed, res.ReliefColumn, res.Splits, bound)
			}
		}
	}
}

// TestPairBothKeysIsolated: two adjacent keys with 45% each. Issue 13's
// restated bound (no pair rule, docs/design.md): both isolated within
// 2 × candidateWindows + cooldown/step + 4 steps of onset, in at most 5
// splits.
func TestPairBothKeysIsolated(t *testing.T) {
	w, err := sim.ParseWorkload(sim.Pair, sim.DefaultWorkloadOptions())
	if err != nil {
		t.Fatal(err)
	}
	cfg := SuiteConfig()
	bound := 2*3 + int(SuiteCooldownMs/SuiteStepMs) + 4
	for seed := uint64(1); seed <= uint64(longEnough(1, 40)); seed++ {
		res, err := Run(Spec{Workload: w, Config: cfg, Load: 4, Columns: bound + 2, Seed: seed, Watch: watchKeys(w)})
		if err != nil {
			t.Fatal(err)
		}
		last := max(res.IsolatedAt[0], res.IsolatedAt[1])
		if res.IsolatedAt[0] < 0 || res.IsolatedAt[1] < 0 || last > bound || res.Splits > 5 {
			t.Fatalf("seed %d: isolated at columns %v (bound %d) with %d splits (%v)", seed, res.IsolatedAt, bound, res.Splits, res.ByOrigin)
		}
	}
}

// TestEmptyChildren: across every workload of the suite, at most 5% of
// the children of median or balance splits receive under 1% of their
// parent's load in the three columns after their split, over at least 100
// such splits per workload (fixed seeds), under the rules of cluster
// versions 2 and 3. Under -short: one workload, one seed.
func TestEmptyChildren(t *testing.T) {
	cases := Suite()
	if testing.Short() {
		cases = []Case{shortNarrow}
	}
	var rows []Row
	for _, v := range []uint32{clusterversion.Version2, clusterversion.Version3} {
		for _, c := range cases {
			row := suiteRow(t, c, v)
			rows = append(rows, row)
			_, balance, empty, _ := row.Sum()
			need := c.MinBalanceSplits
			if need == 0 {
				need = 100
			}
			switch {
			case balance == 0 && isolatedEverywhere(row):
				// No cut to judge: the rules isolated the workload's keys
				// instead (pair under version 3, by their load).
				t.Logf("%s v%d: no balance split in %d seeds; every watched key isolated in every run", c.Name, v, row.Seeds)
			case balance < need:
				t.Errorf("%s v%d: %d balance splits over %d seeds, want at least %d", c.Name, v, balance, row.Seeds, need)
			}
			if empty*100 > 5*2*balance {
				t.Errorf("%s v%d: %d of %d children got under 1%% of their parent's load", c.Name, v, empty, 2*balance)
			}
		}
	}
	if !testing.Short() {
		if err := WriteTable(os.Stdout, rows); err != nil {
			t.Fatal(err)
		}
	}
}

// isolatedEverywhere reports whether the row watched keys and every run
// ended with each of them alone in a route.
func isolatedEverywhere(row Row) bool {
	if len(row.Runs) == 0 || len(row.Runs[0].IsolatedAt) == 0 {
		return false
	}
	for _, x := range row.Runs {
		if slices.Contains(x.IsolatedAt, -1) {
			return false
		}
	}
	return true
}

// shortNarrow is narrow cut down for -short: one seed, 22 columns.
var shortNarrow = Case{Name: sim.Narrow, Load: 3, Columns: 22, MinBalanceSplits: 3, MaxSeeds: 1}

// suiteRows caches the suite's rows by case and version: the suite is
// slow, and several tests read the same rows (tests of a package run one
// at a time).
var suiteRows = map[string]Row{}

func suiteRow(t *testing.T, c Case, v uint32) Row {
	t.Helper()
	key := fmt.Sprintf("%s/%d/%d/%d", c.Name, v, c.Columns, c.MaxSeeds)
	if row, ok := suiteRows[key]; ok {
		return row
	}
	row, err := RunCase(c, v, 1)
	if err != nil {
		t.Fatal(err)
	}
	suiteRows[key] = row
	return row
}

// TestIncidentalKeyIsolation: the confidence-bound floor test, as a
// statistical test with fixed seeds, under the rules of cluster versions 2
// and 3 (whose isolation of a key hot on its own tests the same floor). Over 10,000 independent columns (five
// seeds) at sample rate 16 and a 6 s step — the floor is then worth about
// 39 sampled events of the key per column — a key at 0.8× the floor is
// planned for isolation in at most 1% of them and a key at 2× the floor
// in at least 99%. At the 1 s step (a dozen events) only the first half
// holds, and version 1's point estimate fails it (about a quarter).
func TestIncidentalKeyIsolation(t *testing.T) {
	trials := longEnough(50, 2000) // per seed, five seeds
	rate := func(mult float64, stepMs uint64, v uint32) float64 {
		planned := 0
		for seed := uint64(1); seed <= 5; seed++ {
			n, err := IsolationTrials(TrialSpec{FloorMultiple: mult, StepMs: stepMs, Trials: trials, Seed: seed, ClusterVersion: v})
			if err != nil {
				t.Fatal(err)
			}
			planned += n
		}
		return float64(planned) / float64(5*trials)
	}
	check := func(name string, got float64, ok bool) {
		t.Helper()
		t.Logf("%s: planned in %.2f%% of %d columns", name, 100*got, 5*trials)
		if !ok {
			t.Errorf("%s: planned in %.2f%%", name, 100*got)
		}
	}
	for _, v := range []uint32{clusterversion.Version2, clusterversion.Version3} {
		below, above := rate(0.8, 6000, v), rate(2, 6000, v)
		check(fmt.Sprintf("v%d, 6 s, key at 0.8× the floor", v), below, below <= 0.01)
		check(fmt.Sprintf("v%d, 6 s, key at 2× the floor", v), above, above >= 0.99)
		small := rate(0.8, 1000, v)
		check(fmt.Sprintf("v%d, 1 s, key at 0.8× the floor", v), small, small <= 0.01)
	}
	if !testing.Short() {
		naive := rate(0.8, 1000, clusterversion.Version1)
		check("v1 (point estimate), 1 s, key at 0.8× the floor", naive, naive > 0.1)
	}
}

// TestHoldBandComparison: the comparison the hold band's default rests on
// (docs/benchmarks.md). A route oscillating ±10% around the threshold
// splits under the default band and never under strict hysteresis; one
// whose peaks stay below the threshold never splits.
func TestHoldBandComparison(t *testing.T) {
	scenarios := map[string]HoldScenario{"around": {1.00, 0.10, 1}, "below": {0.90, 0.10, 1}}
	columns := longEnough(8, holdColumns)
	for name, sc := range scenarios {
		for _, bp := range []uint32{0, fsm.DefaultHoldBandBP} {
			r, err := RunHold(sc, bp, 1, columns)
			if err != nil {
				t.Fatal(err)
			}
			wantSplit := name == "around" && bp == fsm.DefaultHoldBandBP
			if (r.Splits > 0) != wantSplit {
				t.Errorf("%s, hold %d: %d splits (first at column %d), want a split: %v", name, bp, r.Splits, r.FirstSplit, wantSplit)
			}
		}
	}
	if !testing.Short() {
		if err := WriteHoldTable(os.Stdout); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunsAreReproducible: the same spec and seed give the same result.
func TestRunsAreReproducible(t *testing.T) {
	w, err := sim.ParseWorkload(sim.HotRange, sim.DefaultWorkloadOptions())
	if err != nil {
		t.Fatal(err)
	}
	spec := Spec{Workload: w, Config: SuiteConfig(), Load: 2, Columns: 8, Seed: 7}
	a, err := Run(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Run(spec)
	if fmt.Sprintf("%+v", a) != fmt.Sprintf("%+v", b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
}

// TestShiftMergesKeepSplitting: the merge acceptance. shift's hot range
// moves every 20 minutes at the production step and cooldown; without
// merges the routes it leaves behind reach max_auto_routes within the run
// and from then on no hotspot is split. With the default merge settings,
// side by side: the route count stays bounded below the cap (never a
// route_cap decline), no route is merged within merge_delay_ms of its
// creation, no merged route is split within the cooldown of its merge, and
// hotspots are still split (and relieved) after the column at which the
// run without merges hit the cap. Under -short CI runs ShortShift (2
// simulated hours, 120 columns, at a twentieth of the threshold, cap 26);
// the long suite FullShift (6 hours, production threshold, cap 40). The
// initial routes stand for routes automatic splits made before the run
// (ShiftScale.PinnedSlices off), so merges may remove their boundaries —
// and do: the run checks that some did.
func TestShiftMergesKeepSplitting(t *testing.T) {
	sc := FullShift
	if testing.Short() {
		sc = ShortShift
	}
	off, err := RunShift(MergeSettings()[0], sc, 1)
	if err != nil {
		t.Fatal(err)
	}
	on, err := RunShift(DefaultMergeSetting(), sc, 1)
	if err != nil {
		t.Fatal(err)
	}
	capAt := off.RouteCapColumn
	offS, onS := Summarize(off, capAt), Summarize(on, capAt)
	t.Logf("without merges: cap %d hit at column %d, %d splits, %d after it, relieved after it %.0f%%", sc.RouteCap, capAt,
		off.Splits, offS.SplitsAfterCap, 100*offS.RelievedAfterCap)
	t.Logf("with merges: %d merges (%d of an initial boundary), at most %d routes (%d at the end), %d splits, %d after column %d, relieved after it %.0f%%, %d same-phase resplits",
		on.Merges, on.InitialBoundariesMerged, on.MaxRoutes, on.Routes, on.Splits, onS.SplitsAfterCap, capAt, 100*onS.RelievedAfterCap, on.Thrash)
	switch {
	case capAt < 0 || off.Merges != 0:
		t.Fatalf("without merges: cap never hit (column %d) or %d merges", capAt, off.Merges)
	case offS.SplitsAfterCap != 0:
		t.Fatalf("without merges: %d splits after the cap was hit", offS.SplitsAfterCap)
	case on.Merges == 0 || on.MaxRoutes >= int(sc.RouteCap) || on.RouteCapColumns != 0:
		t.Fatalf("with merges: %d merges, at most %d routes (cap %d), %d route_cap columns", on.Merges, on.MaxRoutes, sc.RouteCap, on.RouteCapColumns)
	case on.DelayViolations != 0 || on.CooldownViolations != 0:
		t.Fatalf("with merges: %d merges within the merge delay, %d merged routes split within the cooldown", on.DelayViolations, on.CooldownViolations)
	case on.InitialBoundariesMerged == 0:
		t.Fatal("with merges: the initial routes stand for automatic splits' pieces, yet no merge removed one of their boundaries")
	case onS.SplitsAfterCap == 0 || onS.RelievedAfterCap <= offS.RelievedAfterCap:
		t.Fatalf("with merges: %d splits after column %d, relieved %.0f%% (without merges %.0f%%)", onS.SplitsAfterCap, capAt,
			100*onS.RelievedAfterCap, 100*offS.RelievedAfterCap)
	}
	if !testing.Short() {
		if err := WriteShiftTable(os.Stdout, []ShiftRow{{MergeSettings()[0], off}, {DefaultMergeSetting(), on}}, sc); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShiftKeepsAnOperatorsLayout: the same shift run with the initial
// routes an operator's pre-split (ShiftScale.PinnedSlices): automatic
// merges never remove one of the operator's boundaries, yet they still
// merge the pieces the moving hotspot leaves behind, hotspots are still
// split, and the merge delay and cooldown hold.
func TestShiftKeepsAnOperatorsLayout(t *testing.T) {
	sc := FullShift
	if testing.Short() {
		sc = ShortShift
	}
	sc.PinnedSlices = true
	r, err := RunShift(DefaultMergeSetting(), sc, 1)
	if err != nil {
		t.Fatal(err)
	}
	initial := sc.Slices + 2
	t.Logf("operator's %d routes: %d merges, %d of an initial boundary, %d splits, at most %d routes (%d at the end, cap %d), %d route_cap columns",
		initial, r.Merges, r.InitialBoundariesMerged, r.Splits, r.MaxRoutes, r.Routes, sc.RouteCap, r.RouteCapColumns)
	switch {
	case r.InitialBoundariesMerged != 0 || r.Routes < initial:
		t.Fatalf("%d merges removed an operator's boundary; %d routes at the end, %d initial", r.InitialBoundariesMerged, r.Routes, initial)
	case r.Merges == 0 || r.Splits == 0:
		t.Fatalf("%d merges, %d splits: the automatic pieces must still come and go", r.Merges, r.Splits)
	case r.DelayViolations != 0 || r.CooldownViolations != 0:
		t.Fatalf("%d merges within the merge delay, %d merged routes split within the cooldown", r.DelayViolations, r.CooldownViolations)
	}
}
