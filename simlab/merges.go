package simlab

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/sim"
)

// The merge comparison (docs/benchmarks.md "Merges"): shift's hot range
// moves every MergeShiftEvery and leaves split routes behind. At the
// production step and cooldown (60 s, 10 min), with a route cap the run
// without merges reaches within a few hours (ShiftScale), from then on no
// hotspot is split; the runs with merges give the routes the hotspot left
// back and keep splitting. Each candidate setting is one row; the defaults
// (detector.DefaultMerge*) were chosen from this table.

// The comparison's scale: the production step and cooldown, a hot range
// moving every MergeShiftEvery.
const (
	MergeStepMs     = 60_000
	MergeCooldownMs = 10 * 60_000
	MergeShiftEvery = 20 * time.Minute
	// mergeLoad is the workload in thresholds: 80% of it in the hot range
	// (2.4 thresholds: a few splits per position), the rest uniform (0.6
	// over every route: each stays cold).
	mergeLoad = 3
)

// ShiftScale is the size of a comparison run.
type ShiftScale struct {
	Hours float64
	// Threshold is the split threshold (0: the production 50000). The
	// load is given in thresholds, so a lower one means proportionally
	// fewer operations per column at the same shape.
	Threshold uint64
	// Slices cuts the key space into equal bootstrap routes (sim's
	// SplitKeys: Slices+2 routes with the empty ones before and after the
	// keys); RouteCap is max_auto_routes.
	Slices   int
	RouteCap uint32
	// PinnedSlices makes the bootstrap routes an operator's pre-split,
	// which automatic merges keep. Without it (the comparison) they stand
	// for routes automatic splits made before the run — the route count a
	// grown cluster starts from — and merge like any automatic split's.
	PinnedSlices bool
}

// FullShift is the acceptance run (the long suite and docs/benchmarks.md):
// 6 simulated hours at production settings, 18 initial routes, a cap of 40,
// which the run without merges reaches after about 2.5 hours.
var FullShift = ShiftScale{Hours: 6, Slices: 16, RouteCap: 40}

// ShortShift is CI's subset (-short): 2 simulated hours (120 columns,
// 7200 s), a threshold of 2500 (a twentieth of the operations, the same
// load in thresholds), a cap of 26, which the run without merges reaches
// after about an hour.
var ShortShift = ShiftScale{Hours: 2, Threshold: 2500, Slices: 16, RouteCap: 26}

// MergeSetting is one row of the comparison: the merge settings, or Off
// (max_merges_per_cycle 0).
type MergeSetting struct {
	Name        string
	Off         bool
	ThresholdBP uint32
	Windows     uint32
	DelayMs     uint64
	PerCycle    uint32
	MarginBP    uint32
}

// DefaultMergeSetting is the detector's defaults as a row.
func DefaultMergeSetting() MergeSetting {
	return MergeSetting{Name: "default", ThresholdBP: detector.DefaultMergeThresholdBP, Windows: detector.DefaultMergeWindows,
		DelayMs: detector.DefaultMergeDelayMs, PerCycle: detector.DefaultMaxMergesPerCycle, MarginBP: detector.DefaultMergeMarginBP}
}

// MergeSettings are the rows compared: no merges, the defaults, and
// candidates around them (quicker, slower, a lower cold threshold, more
// merges per column).
func MergeSettings() []MergeSetting {
	d := DefaultMergeSetting()
	with := func(name string, edit func(*MergeSetting)) MergeSetting {
		s := d
		s.Name = name
		edit(&s)
		return s
	}
	return []MergeSetting{
		{Name: "off", Off: true},
		d,
		with("quick: 5 cols, 10 min", func(s *MergeSetting) { s.Windows, s.DelayMs = 5, 10*60_000 }),
		with("slow: 30 cols, 60 min", func(s *MergeSetting) { s.Windows, s.DelayMs = 30, 60*60_000 }),
		with("cold < 10%", func(s *MergeSetting) { s.ThresholdBP = 1000 }),
		with("4 per column", func(s *MergeSetting) { s.PerCycle = 4 }),
	}
}

// config is the bootstrap config of a row at scale sc.
func (s MergeSetting) config(sc ShiftScale) *api.Config {
	c := &api.Config{StepMs: MergeStepMs, CooldownMs: MergeCooldownMs, GraceMs: MergeStepMs / 2, MaxAutoRoutes: sc.RouteCap, Threshold: sc.Threshold}
	if s.Off {
		c.MaxMergesPerCycle = proto.Uint32(0)
		return c
	}
	c.MergeThresholdBp, c.MergeWindows, c.MergeDelayMs = proto.Uint32(s.ThresholdBP), proto.Uint32(s.Windows), proto.Uint64(s.DelayMs)
	c.MaxMergesPerCycle, c.MergeMarginBp = proto.Uint32(s.PerCycle), proto.Uint32(s.MarginBP)
	return c
}

// RunShift runs shift under setting s at scale sc.
func RunShift(s MergeSetting, sc ShiftScale, seed uint64) (Result, error) {
	o := sim.DefaultWorkloadOptions()
	o.ShiftEvery = MergeShiftEvery
	w, err := sim.ParseWorkload(sim.Shift, o)
	if err != nil {
		return Result{}, err
	}
	columns := int(sc.Hours * 3600_000 / MergeStepMs)
	return Run(Spec{Workload: w, Config: s.config(sc), Load: mergeLoad, Columns: columns, Seed: seed,
		InitialSplits: w.Keys().SplitKeys(sc.Slices), InitialRoutesAutomatic: !sc.PinnedSlices, PhaseEvery: MergeShiftEvery})
}

// ShiftRow is one setting's run beside the run without merges.
type ShiftRow struct {
	Setting MergeSetting
	Result  Result
}

// ShiftSummary is what the comparison reads off a run, measured from the
// column at which the run without merges first hit the cap (capColumn).
type ShiftSummary struct {
	SplitsAfterCap int
	// MeanHottestAfterCap is the mean of each column's hottest route load
	// from capColumn on (× threshold); RelievedAfterCap the share of hot
	// range positions wholly after capColumn whose last column left every
	// route below the threshold.
	MeanHottestAfterCap float64
	RelievedAfterCap    float64
}

// Summarize measures r from capColumn on (capColumn < 0: from the start).
func Summarize(r Result, capColumn int) ShiftSummary {
	capColumn = max(capColumn, 0)
	var s ShiftSummary
	for _, c := range r.SplitColumns {
		if c >= capColumn {
			s.SplitsAfterCap++
		}
	}
	var sum float64
	n := 0
	for c := capColumn; c < len(r.HottestPerColumn); c++ {
		sum += r.HottestPerColumn[c]
		n++
	}
	if n > 0 {
		s.MeanHottestAfterCap = sum / float64(n)
	}
	per := int(MergeShiftEvery.Milliseconds() / MergeStepMs)
	phases, relieved := 0, 0
	for start := (capColumn + per - 1) / per * per; start+per <= len(r.HottestPerColumn); start += per {
		phases++
		if r.HottestPerColumn[start+per-1] < 1 {
			relieved++
		}
	}
	if phases > 0 {
		s.RelievedAfterCap = float64(relieved) / float64(phases)
	}
	return s
}

// WriteShiftTable prints the rows (run at scale sc), each measured from
// the column at which the first row (no merges) hit the cap.
func WriteShiftTable(out io.Writer, rows []ShiftRow, sc ShiftScale) error {
	if len(rows) == 0 {
		return nil
	}
	capColumn := rows[0].Result.RouteCapColumn
	threshold := sc.Threshold
	if threshold == 0 {
		threshold = 50_000
	}
	fmt.Fprintf(out, "shift at a 60 s step, cooldown 10 min, threshold %d, hot range moving every %v, %d initial routes, max_auto_routes %d, %g h\n",
		threshold, MergeShiftEvery, sc.Slices+2, sc.RouteCap, sc.Hours)
	fmt.Fprintf(out, "without merges the cap is first hit at column %d (%s); \"after cap\" columns count from there\n\n",
		capColumn, time.Duration(max(capColumn, 0))*time.Minute)
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "merges\tthreshold\twindows\tdelay\tper col\tsplits\tmerges\tmax routes\troutes at end\tcap cols\tsplits after cap\tmean hottest after cap\trelieved after cap\tresplit < 1 h\tsame-phase resplit\tdelay viol.\tcooldown viol.\t")
	for _, row := range rows {
		s, r := row.Setting, row.Result
		sum := Summarize(r, capColumn)
		th, win, delay, per := "-", "-", "-", "0"
		if !s.Off {
			th = fmt.Sprintf("%.0f%%", float64(s.ThresholdBP)/100)
			win, delay, per = fmt.Sprint(s.Windows), (time.Duration(s.DelayMs) * time.Millisecond).String(), fmt.Sprint(s.PerCycle)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.0f%%\t%d\t%d\t%d\t%d\t\n",
			s.Name, th, win, delay, per, r.Splits, r.Merges, r.MaxRoutes, r.Routes, r.RouteCapColumns,
			sum.SplitsAfterCap, sum.MeanHottestAfterCap, 100*sum.RelievedAfterCap, r.Resplits, r.Thrash, r.DelayViolations, r.CooldownViolations)
	}
	return tw.Flush()
}
