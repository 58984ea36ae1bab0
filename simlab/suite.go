package simlab

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/sim"
)

// The comparison suite: every sim workload under the split rules of a
// cluster version, over fixed seeds, summed up in one table
// (docs/benchmarks.md; `go run ./cmd/simtable`).
//
// Scale: a 10 s step with a 100 s cooldown (the production ratio of 60 s
// and 10 min, six times cheaper to simulate) and the production threshold,
// candidate windows, buckets, top-K and 1-in-16 sampling. Every run starts
// from one route covering the whole key space, as a fresh cluster does.

// SuiteStepMs and SuiteCooldownMs are the suite's step and cooldown.
const (
	SuiteStepMs     = 10_000
	SuiteCooldownMs = 100_000
)

// SuiteConfig is the bootstrap config of the suite's runs.
func SuiteConfig() *api.Config {
	return &api.Config{StepMs: SuiteStepMs, CooldownMs: SuiteCooldownMs, GraceMs: SuiteStepMs / 2}
}

// Case is one workload of the suite.
type Case struct {
	Name string
	// Workload is the sim workload (default: Name).
	Workload string
	// Load is the workload's load in thresholds; Columns the run length.
	Load    float64
	Columns int
	// MinBalanceSplits: seeds are added (up to MaxSeeds) until the runs
	// hold this many median or balance splits, so the empty-children share
	// rests on enough splits.
	MinBalanceSplits int
	MaxSeeds         int
	// Edit adjusts the workload options; Config the bootstrap config.
	Edit   func(*sim.WorkloadOptions)
	Config func() *api.Config
	// PhaseEvery is how often the workload changes shape (shift).
	PhaseEvery time.Duration
	// SampleRate is the reporters' sample rate (0: keyviz's, 1 in 16).
	SampleRate uint32
	// Make builds a workload the sim package does not know (few keys);
	// Workload and Edit are then unused.
	Make func() (sim.Workload, error)
}

// Suite returns the workloads of the comparison table. Case names are
// workload names, with a suffix where one workload appears twice.
func Suite() []Case {
	return []Case{
		{Name: sim.Uniform, Load: 8, Columns: 60},
		{Name: sim.Zipf, Load: 8, Columns: 60},
		{Name: sim.HotRange, Load: 8, Columns: 60},
		{Name: sim.HotKey, Load: 30, Columns: 30, MaxSeeds: 160},
		{Name: sim.Shift, Load: 8, Columns: 100, PhaseEvery: 500 * time.Second,
			Edit: func(o *sim.WorkloadOptions) { o.ShiftEvery = 500 * time.Second }},
		{Name: sim.Narrow, Load: 3, Columns: 40, MaxSeeds: 160},
		{Name: sim.Pair, Load: 4, Columns: 30, MaxSeeds: 160},
		incidentalCase(0.8),
		incidentalCase(2),
		{Name: sim.Oscillate, Load: 8, Columns: 60,
			Edit: func(o *sim.WorkloadOptions) { o.OscillateEvery = SuiteStepMs * time.Millisecond }},
	}
}

// FewKeysSuite returns the few-keys workloads (FewKeysShapes) at the
// suite's scale, sampled 1 in 16 and 1 in 1.
func FewKeysSuite() []Case {
	var out []Case
	for _, rate := range []uint32{16, 1} {
		for _, sh := range FewKeysShapes() {
			name := sh.Name
			if rate != 16 {
				name += fmt.Sprintf("@%d", rate)
			}
			out = append(out, Case{Name: name, Load: sh.Load, Columns: 40, MinBalanceSplits: 40, MaxSeeds: 20,
				SampleRate: rate, Make: func() (sim.Workload, error) { return sh.Workload() }})
		}
	}
	return out
}

// SparseSuite returns narrow-sparse: narrow at a 1 s step (10 s
// cooldown), where each reporter samples about 20 of the route's
// operations a column, and under ten per route after the first split.
func SparseSuite() []Case {
	return []Case{{Name: "narrow-sparse", Workload: sim.Narrow, Load: 3, Columns: 120, MaxSeeds: 40,
		Config: func() *api.Config {
			return &api.Config{StepMs: sparseStepMs, CooldownMs: 10 * sparseStepMs, GraceMs: sparseStepMs / 2}
		}}}
}

// sparseStepMs is narrow-sparse's step.
const sparseStepMs = 1000

// Incidental's scale: a 1 s step (as the three-process test), where
// a key near the floor is worth a dozen sampled events a column, and a
// floor pinned at 1.25× the threshold, so a route the key dominates is hot
// and only the floor stands between it and isolation.
const (
	incidentalStepMs = 1000
	incidentalFloor  = 62_500
)

// incidentalCase is incidental with its written key at mult × the floor.
func incidentalCase(mult float64) Case {
	name := fmt.Sprintf("%s-%gx", sim.Incidental, mult)
	return Case{Name: name, Workload: sim.Incidental, Load: 8, Columns: 120, MaxSeeds: 20,
		Edit: func(o *sim.WorkloadOptions) {
			o.IncidentalShare = incidentalShare(mult*incidentalFloor/(8*50_000), o.HotShare, o.WriteFraction)
		},
		Config: func() *api.Config {
			return &api.Config{StepMs: incidentalStepMs, CooldownMs: 10 * incidentalStepMs, GraceMs: incidentalStepMs / 2,
				TopKeyAbsoluteFloor: incidentalFloor}
		}}
}

// incidentalShare is the share of operations that gives incidental's key
// the weighted load share q (weights 4 and 1): the range reads (hotShare,
// or the default), the key writes (s), the rest mixed at writeFrac.
func incidentalShare(q, hotShare, writeFrac float64) float64 {
	if hotShare == 0 {
		hotShare = sim.DefaultHotRangeShare
	}
	const ww, wr = 4.0, 1.0
	b := writeFrac*ww + (1-writeFrac)*wr
	a := hotShare*wr + (1-hotShare)*b
	return q * a / (ww - q*(ww-b))
}

// Row sums up one case's runs.
type Row struct {
	Case           string
	ClusterVersion uint32
	Seeds          int
	Runs           []Result
}

// Sum adds up the runs' counters.
func (r Row) Sum() (splits, balance, empty, relieved int) {
	for _, x := range r.Runs {
		splits += x.Splits
		balance += x.BalanceSplits
		empty += x.EmptyChildren
		if x.ReliefColumn >= 0 {
			relieved++
		}
	}
	return
}

// noCutSeeds is how many seeds without a single balance split end a case.
const noCutSeeds = 20

// sharesTolerance is how far (basis points) a recorded side share may lie
// from the true one: ten points.
const sharesTolerance = 1000

// SharesWithin counts the runs' balance cuts whose recorded left share
// lies within tol basis points of the true one, and the cuts.
func (r Row) SharesWithin(tol uint32) (within, cuts int) {
	for _, x := range r.Runs {
		for _, c := range x.Cuts {
			cuts++
			if c.Error() <= tol {
				within++
			}
		}
	}
	return within, cuts
}

// IntervalsCover counts the runs' balance cuts that recorded an interval
// (cluster version 3) and those whose interval holds the true left share.
func (r Row) IntervalsCover() (covered, recorded int) {
	for _, x := range r.Runs {
		for _, c := range x.Cuts {
			if c.Evidence == "" {
				continue
			}
			recorded++
			if c.LoBP <= c.True && c.True <= c.HiBP {
				covered++
			}
		}
	}
	return covered, recorded
}

// RunCase runs c under cluster version v from seed 1 on, until it holds
// c.MinBalanceSplits balance splits (default 100) or c.MaxSeeds seeds
// (default 64) ran; at least minSeeds run. A workload the rules relieve
// without any cut (pair under version 3 isolates both keys by their load)
// stops after noCutSeeds seeds.
func RunCase(c Case, v uint32, minSeeds int) (Row, error) {
	row := Row{Case: c.Name, ClusterVersion: v}
	need, maxSeeds := c.MinBalanceSplits, c.MaxSeeds
	if need == 0 {
		need = 100
	}
	if maxSeeds == 0 {
		maxSeeds = 64
	}
	w, err := c.workload()
	if err != nil {
		return row, err
	}
	cfg := SuiteConfig()
	if c.Config != nil {
		cfg = c.Config()
	}
	watch := watchKeys(w)
	for seed := uint64(1); int(seed) <= maxSeeds; seed++ {
		res, err := Run(Spec{Workload: w, Config: cfg, ClusterVersion: v, Load: c.Load, Columns: c.Columns,
			Seed: seed, PhaseEvery: c.PhaseEvery, Watch: watch, SampleRate: c.SampleRate})
		if err != nil {
			return row, fmt.Errorf("%s seed %d: %w", c.Name, seed, err)
		}
		row.Runs = append(row.Runs, res)
		row.Seeds++
		_, balance, _, _ := row.Sum()
		if (balance >= need && row.Seeds >= minSeeds) || (balance == 0 && row.Seeds >= noCutSeeds) {
			break
		}
	}
	return row, nil
}

// workload builds the case's workload.
func (c Case) workload() (sim.Workload, error) {
	if c.Make != nil {
		return c.Make()
	}
	opts := sim.DefaultWorkloadOptions()
	if c.Edit != nil {
		c.Edit(&opts)
	}
	name := c.Workload
	if name == "" {
		name = c.Name
	}
	return sim.ParseWorkload(name, opts)
}

// watchKeys are the keys whose isolation a workload is about: pair's two
// keys, hotkey's key, incidental's written key. (A few keys need not be
// isolated: they are not watched.)
func watchKeys(w sim.Workload) [][]byte {
	if k, ok := sim.IncidentalKey(w); ok {
		return [][]byte{k}
	}
	switch w.Name() {
	case sim.Pair, sim.HotKey:
		lo, hi, _ := w.Hotspot(0)
		var out [][]byte
		for k := lo; k < hi; k++ {
			out = append(out, w.Keys().Key(k))
		}
		return out
	}
	return nil
}

// WriteTable prints rows as the comparison table: per case and cluster
// version, the seeds run, splits per run, runs relieved and the median
// columns and splits to relief, the empty children of median/balance
// splits, the balance cuts whose recorded left share lies within ten
// points of the true one and (version 3) whose interval holds it, the
// hottest and mean route load at the end (× threshold, medians), and the
// watched keys' isolation.
func WriteTable(out io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\trules\tseeds\tsplits/run\trelieved\tcols to relief\tsplits to relief\tbalance splits\tempty children\tshares ±10\tin interval\thottest after\tmean after\tisolated (col)\t")
	for _, r := range rows {
		splits, balance, empty, relieved := r.Sum()
		var cols, toRelief, hot, mean []float64
		var iso []string
		for _, x := range r.Runs {
			if x.ReliefColumn >= 0 {
				cols = append(cols, float64(x.ReliefColumn))
				toRelief = append(toRelief, float64(x.SplitsToRelief))
			}
			hot = append(hot, x.Hottest)
			mean = append(mean, x.Mean)
		}
		if len(r.Runs) > 0 {
			for i := range r.Runs[0].IsolatedAt {
				var at []float64
				plans := 0
				for _, x := range r.Runs {
					plans += x.IsolationPlans[i]
					if x.IsolatedAt[i] >= 0 {
						at = append(at, float64(x.IsolatedAt[i]))
					}
				}
				iso = append(iso, fmt.Sprintf("%d/%d (%s) %d plans", len(at), len(r.Runs), median(at), plans))
			}
		}
		emptyPct := "-"
		if balance > 0 {
			emptyPct = fmt.Sprintf("%d/%d %.1f%%", empty, 2*balance, 100*float64(empty)/float64(2*balance))
		}
		shares, covers := "-", "-"
		if within, cuts := r.SharesWithin(sharesTolerance); cuts > 0 {
			shares = fmt.Sprintf("%d/%d", within, cuts)
		}
		if covered, recorded := r.IntervalsCover(); recorded > 0 {
			covers = fmt.Sprintf("%d/%d", covered, recorded)
		}
		fmt.Fprintf(tw, "%s\tv%d\t%d\t%.2f\t%d/%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			r.Case, r.ClusterVersion, r.Seeds, float64(splits)/float64(max(r.Seeds, 1)), relieved, r.Seeds,
			median(cols), median(toRelief), balance, emptyPct, shares, covers, median(hot), median(mean), orDash(strings.Join(iso, "; ")))
	}
	return tw.Flush()
}

func median(xs []float64) string {
	if len(xs) == 0 {
		return "-"
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if m == float64(int(m)) {
		return fmt.Sprintf("%d", int(m))
	}
	return fmt.Sprintf("%.2f", m)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Versions are the rule sets the table compares: every cluster version
// this build supports.
var Versions = clusterversion.Versions()
