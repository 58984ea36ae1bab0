package fsm

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func testutilCounter(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	return testutil.ToFloat64(c)
}

func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	h := newHarness(t, Options{Metrics: m})
	h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", AutoSplit: true, Config: hotConfig()}}})
	h.run(column(1000, 2000, hotRow(1, "user42")))
	h.run(column(2000, 3000, hotRow(1, "user42")))
	h.run(split(1, "m"))
	fenced := split(2, "x")
	fenced.Hlc = 1
	h.run(fenced)
	h.run(operatorSwitch(false))
	h.run(abort(1, "x"))
	checks := []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"manual splits", m.splits.WithLabelValues("manual"), 1},
		{"fence violations", m.fence, 1},
		{"columns", m.columns, 2},
		{"ops planned", m.opsPlanned, 1},
		{"ops paused", m.opsPaused, 1},
		{"ops aborted by operator", m.opsAborted.WithLabelValues("operator"), 1},
		{"live routes", m.liveRoutes, 2},
		{"live ops", m.liveOps, 0},
		{"switch", m.switchOn, 0},
	}
	for _, c := range checks {
		if got := testutil.ToFloat64(c.c); got != c.want {
			t.Errorf("%s = %v, want %v", c.name, got, c.want)
		}
	}
	if n := testutil.CollectAndCount(m.applySeconds); n != len(commandKinds) {
		t.Errorf("%d apply histograms, want one per command kind (%d)", n, len(commandKinds))
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if name := mf.GetName(); len(name) < 9 || name[:9] != "hotsplit_" {
			t.Errorf("metric %s lacks the hotsplit_ prefix", name)
		}
	}
	// A nil *Metrics records nothing and does not panic.
	var nilM *Metrics
	nilM.split(api.SplitOrigin_SPLIT_ORIGIN_MANUAL)
	nilM.observeState(h.state())
}
