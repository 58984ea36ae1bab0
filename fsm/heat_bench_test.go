package fsm

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/heatmap"
	"github.com/hotsplit/hotsplit/hlc"
)

// heatBenchRoutes is the catalog size of the heat history benchmarks
// (docs/design.md's bound figures use the same).
const heatBenchRoutes = 10_000

// heatBenchState is a version 3 state of 10,000 routes whose heat history
// holds span ms of columns of stepMs — every route loaded with ±30% noise,
// a hotspot that moves every 60 columns — installed through a snapshot.
func heatBenchState(b *testing.B, stepMs, span uint64) *harness {
	b.Helper()
	splits := make([][]byte, heatBenchRoutes-1)
	for i := range splits {
		splits[i] = fmt.Appendf(nil, "tenant:%04d:user:%08d", i/97, i*1000)
	}
	h := bootstrappedAt(b, clusterversion.Version3, splits, &api.Config{StepMs: stepMs})
	cat := h.state().Catalog()
	rng := rand.New(rand.NewPCG(1, 7))
	base := make([]uint64, heatBenchRoutes+1)
	for i := range base {
		base[i] = 1 + uint64(1000/(1+rng.IntN(200)))
	}
	hist := heatmap.New()
	start := uint64(startMs) - span
	for c, at := uint64(0), start; at < startMs; c, at = c+1, at+stepMs {
		loads := make([]heatmap.RouteLoad, 0, heatBenchRoutes)
		hot := 1 + (c/60*7919)%heatBenchRoutes
		for id := uint64(1); id <= heatBenchRoutes; id++ {
			r := base[id] * uint64(70+rng.IntN(61)) / 100
			if id == hot {
				r *= 500
			}
			loads = append(loads, heatmap.RouteLoad{RouteID: id, Reads: r, Writes: r / 4, ReadBytes: r * 180, WriteBytes: r * 60})
		}
		var err error
		if hist, err = hist.AddColumn(heatmap.ColumnInput{WindowStartMs: at, AtMs: at + stepMs, Weights: heatmap.Weights{Read: 1, Write: 4},
			Catalog: cat, Loads: loads}); err != nil {
			b.Fatal(err)
		}
		if c%30 == 0 {
			if hist, err = hist.AddMark(heatmap.Mark{AtHLC: hlc.Make(at+1, 0), Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT,
				SplitOrigin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE, Keys: [][]byte{fmt.Appendf(nil, "tenant:%04d:user:%08d/x", c%97, c)}, RouteID: hot}); err != nil {
				b.Fatal(err)
			}
		}
	}
	h.editState(func(p *api.StateSnapshot) { p.HeatHistory = hist.ToProto() })
	return h
}

// BenchmarkHeatHistorySnapshot: the cost the heat history adds to a state
// of 10,000 routes, for 24 h at the 60 s step and 1 h at the 1 s step —
// Persist (ToProto, paging, deterministic encoding), Restore (strict
// decode, heatmap.FromProto's validation, every invariant), Hash (what a
// state check pays), and applying one more column of 10,000 route loads
// (detector and history together).
func BenchmarkHeatHistorySnapshot(b *testing.B) {
	for _, c := range []struct {
		name         string
		stepMs, span uint64
	}{{"24h@60s", 60_000, 24 * 3_600_000}, {"1h@1s", 1000, 3_600_000}} {
		h := heatBenchState(b, c.stepMs, c.span)
		st := h.state()
		var buf bytes.Buffer
		if err := writeSnapshot(&buf, st); err != nil {
			b.Fatal(err)
		}
		data := buf.Bytes()
		b.Run(c.name+"/persist", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for range b.N {
				if err := writeSnapshot(io.Discard, st); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/restore", func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			for range b.N {
				if _, err := readSnapshot(bytes.NewReader(data), h.f.limits()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/hash", func(b *testing.B) {
			for range b.N {
				st.Hash()
			}
		})
		b.Run(c.name+"/apply-column", func(b *testing.B) {
			loads := make([]api.RouteLoad, heatBenchRoutes)
			for i := range loads {
				loads[i] = api.RouteLoad{RouteID: uint64(i + 1), Reads: uint64(i%50 + 1), Writes: 2}
			}
			for i := range b.N {
				b.StopTimer()
				f := newQuiet(Options{})
				if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
					b.Fatal(err)
				}
				cmd := loadsColumn(startMs, startMs+c.stepMs, loads)
				cmd.Hlc = hlc.Make(startMs+c.stepMs+uint64(i), 0)
				entry, _ := EncodeCommand(cmd)
				b.StartTimer()
				if r := f.Apply(&raft.Log{Index: st.Index() + 1, Data: entry}).(*Result); r.Code != api.ResultCode_RESULT_CODE_OK {
					b.Fatalf("%v %s", r.Code, r.Message)
				}
			}
		})
		b.Logf("%s: snapshot %d bytes (%d of it the heat history's frames), history %d columns, Size %.1f MiB", c.name, len(data),
			len(data)-heatlessSize(b, st), st.HeatHistory().Columns(), float64(st.HeatHistory().Size())/(1<<20))
	}
}

// heatlessSize is the size of s's snapshot without its heat history.
func heatlessSize(b *testing.B, s *State) int {
	n := *s
	n.heat = nil
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, &n); err != nil {
		b.Fatal(err)
	}
	return buf.Len()
}
