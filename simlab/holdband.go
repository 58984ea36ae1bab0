package simlab

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/hotsplit/hotsplit/sim"
)

// The hold-band comparison (OQ-2): one route carrying a hot range whose
// load alternates ±Amplitude around Level × the threshold, every Every
// columns, under each hold band. A route whose load sits at or above the
// threshold on average should split within a few columns; one whose
// average stays below it should not.

// HoldScenario is one load shape of the comparison.
type HoldScenario struct {
	Level, Amplitude float64
	Every            int // columns per phase
}

// HoldScenarios are the shapes compared: oscillating around the
// threshold, above and below it, and a load that comes back after cooling
// into the band (two hot columns, two cool ones).
func HoldScenarios() []HoldScenario {
	return []HoldScenario{
		{1.05, 0.10, 1}, {1.00, 0.10, 1}, {1.00, 0.10, 2}, {0.95, 0.10, 1}, {0.95, 0.10, 2}, {0.92, 0.10, 1}, {0.90, 0.10, 1},
	}
}

// HoldBands are the bands compared (basis points; 0 = strict).
var HoldBands = []uint32{0, 8000, 9000, 9500}

// HoldResult is one scenario under one band: the splits in holdColumns
// columns and the column of the first (-1: none).
type HoldResult struct {
	Scenario   HoldScenario
	HoldBandBP uint32
	Splits     int
	FirstSplit int
}

const holdColumns = 30

// RunHold runs scenario sc under hold band bp for the given columns.
func RunHold(sc HoldScenario, bp uint32, seed uint64, columns int) (HoldResult, error) {
	o := sim.DefaultWorkloadOptions()
	o.Amplitude = sc.Amplitude
	o.OscillateEvery = time.Duration(sc.Every) * SuiteStepMs * time.Millisecond
	w, err := sim.ParseWorkload(sim.Oscillate, o)
	if err != nil {
		return HoldResult{}, err
	}
	lo, hi, _ := w.Hotspot(0)
	cfg := SuiteConfig()
	cfg.HoldBandBp = &bp
	// The range gets its own route, so its load is the range's alone: the
	// range takes the default 80% of the operations, all of mean weight.
	res, err := Run(Spec{Workload: w, Config: cfg, Load: sc.Level / 0.8, Columns: columns, Seed: seed,
		InitialSplits: [][]byte{w.Keys().Key(lo), w.Keys().Key(hi)}})
	if err != nil {
		return HoldResult{}, err
	}
	return HoldResult{Scenario: sc, HoldBandBP: bp, Splits: res.Splits, FirstSplit: res.FirstSplitColumn}, nil
}

// WriteHoldTable runs every scenario under every band and prints one row
// per scenario.
func WriteHoldTable(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "load (× threshold)\tphase\t")
	for _, bp := range HoldBands {
		fmt.Fprintf(tw, "hold %d\t", bp)
	}
	fmt.Fprintln(tw)
	for _, sc := range HoldScenarios() {
		fmt.Fprintf(tw, "%.2f ± %.2f\t%d col\t", sc.Level, sc.Amplitude, sc.Every)
		for _, bp := range HoldBands {
			r, err := RunHold(sc, bp, 1, holdColumns)
			if err != nil {
				return err
			}
			if r.Splits == 0 {
				fmt.Fprint(tw, "no split\t")
			} else {
				fmt.Fprintf(tw, "split at col %d\t", r.FirstSplit)
			}
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}
