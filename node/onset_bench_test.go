package node

import (
	"slices"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/sim"
)

// BenchmarkAutoSplitOnset measures, over 20 runs per workload, the time from
// the first hot column to the first automatic split applied (in steps), and
// the load imbalance (hottest route / mean of the routes with load) in the
// first hot column and in the last column of the run. Run:
//
//	go test -run '^$' -bench AutoSplitOnset -benchtime 1x -timeout 30m ./node/
func BenchmarkAutoSplitOnset(b *testing.B) {
	for _, w := range []string{sim.HotKey, sim.HotRange} {
		b.Run(w, func(b *testing.B) {
			var took, before, after, shareBefore, shareAfter []float64
			for run := range 20 {
				t, first, last := onsetRun(b, w, uint64(run+1))
				took = append(took, t)
				sb, ib := imbalance(first)
				sa, ia := imbalance(last)
				before, after = append(before, ib), append(after, ia)
				shareBefore, shareAfter = append(shareBefore, sb), append(shareAfter, sa)
			}
			slices.Sort(took)
			b.ReportMetric(took[0], "min-steps")
			b.ReportMetric(took[len(took)/2], "median-steps")
			b.ReportMetric(took[len(took)-1], "max-steps")
			b.Logf("%s: onset to first split applied, steps: min %.1f median %.1f max %.1f (20 runs)", w, took[0], took[len(took)/2], took[len(took)-1])
			b.Logf("%s: hottest route's share of all load: before median %.0f%%, after median %.0f%%", w, 100*median(shareBefore), 100*median(shareAfter))
			b.Logf("%s: hottest / mean of routes with load: before median %.2f (%s), after median %.2f", w, median(before), "one loaded route", median(after))
		})
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// imbalance returns the hottest route's share of all weighted load and the
// hottest route / mean over routes with load, from a committed column.
func imbalance(col *api.ObserveColumn) (share, ratio float64) {
	var loads []float64
	for _, r := range col.Rows {
		if l := float64(4*r.Writes + r.Reads); l > 0 {
			loads = append(loads, l)
		}
	}
	if len(loads) == 0 {
		return 0, 0
	}
	var sum, hi float64
	for _, l := range loads {
		sum += l
		hi = max(hi, l)
	}
	return hi / sum, hi / (sum / float64(len(loads)))
}

func onsetRun(b *testing.B, workload string, seed uint64) (steps float64, first, last *api.ObserveColumn) {
	const rate, stepMs = 4000, 200
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 5 * stepMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10}
	dir := b.TempDir()
	ks, _ := sim.NewKeySpace(sim.DefaultKeySpace)
	on := true
	c := newTestClusterIn(b, dir, 3, func(n *Config) {
		n.AutoSplit, n.BootstrapConfig, n.InitialSplits = &on, cfg, ks.SplitKeys(1)
	})
	defer c.stopAll()
	run := c.startSimSampled(b, workload, sim.DefaultWorkloadOptions(), rate, 5*time.Second, seed, 1)
	<-run.done
	run.done <- nil
	log := commands(b, c.leaderNode())
	var splitMs uint64
	for _, e := range log {
		if col := e.cmd.GetObserveColumn(); col != nil && len(col.Rows) > 0 {
			if first == nil {
				first = col
			}
			last = col
		}
		if s := e.cmd.GetSplitRange(); s != nil && s.OpId != 0 && splitMs == 0 {
			splitMs = hlc.Physical(e.cmd.Hlc)
		}
	}
	if first == nil || splitMs == 0 {
		b.Fatalf("%s seed %d: no hot column or no split", workload, seed)
	}
	return float64(splitMs-first.WindowStartMs) / stepMs, first, last
}
