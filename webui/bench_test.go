package webui

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/heatmap"
	"github.com/hotsplit/hotsplit/hlc"
)

// history1h1000Routes is the last hour before nowMs of 1000 loaded routes
// at stepMs, with ±30% noise per column (so layouts move) and a manual
// split mark every 5 minutes.
func history1h1000Routes(tb testing.TB, stepMs, nowMs uint64) (*heatmap.History, *catalog.Catalog) {
	tb.Helper()
	splits := make([][]byte, 999)
	for i := range splits {
		splits[i] = fmt.Appendf(nil, "user:%06d", (i+1)*100)
	}
	cat, err := catalog.New(splits, 1)
	if err != nil {
		tb.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	h := heatmap.New()
	for at := nowMs - 3_600_000; at < nowMs; at += stepMs {
		var loads []heatmap.RouteLoad
		cat.Ascend(func(r *catalog.RouteDescriptor) bool {
			base := 100 + r.ID%50*20
			loads = append(loads, heatmap.RouteLoad{RouteID: r.ID, Reads: base * uint64(70+rng.IntN(61)) / 100, Writes: base / 10})
			return true
		})
		if h, err = h.AddColumn(heatmap.ColumnInput{WindowStartMs: at, AtMs: at + stepMs, Weights: heatmap.Weights{Read: 1, Write: 1},
			Catalog: cat, Loads: loads}); err != nil {
			tb.Fatal(err)
		}
		if (at/stepMs)%(300_000/stepMs) == 0 {
			key := fmt.Appendf(nil, "user:%06d", 50+rng.IntN(99_900))
			if h, err = h.AddMark(heatmap.Mark{AtHLC: hlc.Make(at+stepMs, 0), Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT,
				SplitOrigin: api.SplitOrigin_SPLIT_ORIGIN_MANUAL, Keys: [][]byte{key}, RouteID: 1}); err != nil {
				tb.Fatal(err)
			}
		}
	}
	return h, cat
}

// BenchmarkHeatmapAPI1h1000Routes: GET /api/v1/heatmap for the last hour
// of 1000 loaded routes (with ±30% noise per column, so layouts move),
// query and JSON included, at the 60 s and the 1 s step.
func BenchmarkHeatmapAPI1h1000Routes(b *testing.B) {
	for _, stepMs := range []uint64{60_000, 1000} {
		b.Run(fmt.Sprintf("step=%dms", stepMs), func(b *testing.B) {
			const now = 1_700_000_000_000
			h, cat := history1h1000Routes(b, stepMs, now)
			src := &fakeSource{snap: &Snapshot{Read: &api.ReadInfo{ServedBy: "n1"}, NowMs: now, History: h, Catalog: cat,
				Config: &api.Config{StepMs: stepMs}, Switch: &api.AutoSplitSwitch{Enabled: true}}}
			handler := New(src)
			target := fmt.Sprintf("/api/v1/heatmap?from=%d&to=%d", now-3_600_000, now)
			var size int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				rec := httptest.NewRecorder()
				handler.heatmap(rec, httptest.NewRequest("GET", target, nil))
				if rec.Code != 200 {
					b.Fatalf("%d %s", rec.Code, rec.Body)
				}
				n, _ := io.Copy(io.Discard, rec.Body)
				size = int(n)
			}
			b.ReportMetric(float64(size), "bytes/answer")
		})
	}
}
