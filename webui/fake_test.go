package webui

import (
	"context"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/heatmap"
	"github.com/hotsplit/hotsplit/hlc"
)

// hostile are key bytes a reporter could make us draw: HTML, quotes,
// control and non-UTF-8 bytes.
var hostile = []byte("<script>alert(\"x\")</script>\x00\xff'&\n")

// fakeSource serves a fixed snapshot: routes [, 0) [0, hostile) [hostile,
// hostile·0x00) [hostile·0x00, +inf) with two minutes of columns, the
// isolation of the hostile key as a mark, a tracked hot route and a
// decision.
type fakeSource struct {
	snap       *Snapshot
	err        error
	explainErr error
	explained  uint64
}

const fakeNowMs = 1_700_000_120_000

func newFakeSource(t *testing.T) *fakeSource {
	t.Helper()
	iso := append(append([]byte(nil), hostile...), 0)
	cat, err := catalog.New([][]byte{[]byte("0"), hostile, iso}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		ids = append(ids, r.ID)
		return true
	})
	h := heatmap.New()
	for i := range uint64(12) {
		start := uint64(fakeNowMs - 120_000 + i*10_000)
		loads := []heatmap.RouteLoad{
			{RouteID: ids[0], Reads: 10, Writes: 1},
			{RouteID: ids[2], Reads: 5000 + i, Writes: 100, ReadBytes: 1 << 20},
		}
		if h, err = h.AddColumn(heatmap.ColumnInput{WindowStartMs: start, AtMs: start + 10_000,
			Weights: heatmap.Weights{Read: 1, Write: 1}, Catalog: cat, Loads: loads}); err != nil {
			t.Fatal(err)
		}
	}
	mark := heatmap.Mark{AtHLC: hlc.Make(fakeNowMs-60_000, 0), Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT,
		SplitOrigin: api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, Keys: [][]byte{hostile, iso}, RouteID: ids[1], OpID: 7}
	if h, err = h.AddMark(mark); err != nil {
		t.Fatal(err)
	}
	return &fakeSource{snap: &Snapshot{
		Read:    &api.ReadInfo{AppliedIndex: 42, CatalogVersion: cat.Version(), ServedBy: "n1"},
		NowMs:   fakeNowMs,
		History: h,
		Catalog: cat,
		Config:  &api.Config{StepMs: 10_000},
		Switch: &api.AutoSplitSwitch{Enabled: false, Actor: "admin:ops", Reason: "<b>maintenance</b>",
			Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR, ChangedAtHlc: hlc.Make(fakeNowMs-5000, 0)},
		Tracked: []*api.TrackedRoute{{RouteId: ids[2], ConsecutiveOver: 3, LastScore: 30_600, CooldownUntilMs: fakeNowMs + 45_000}},
		Decisions: []*api.Decision{
			{Seq: 1, AtHlc: hlc.Make(fakeNowMs-90_000, 0), Kind: api.DecisionKind_DECISION_KIND_PLANNED, RouteId: ids[1], OpId: 7,
				Origin: api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, Reason: api.Reason_REASON_PLANNED, SplitKeys: [][]byte{hostile, iso}},
			{Seq: 2, AtHlc: hlc.Make(fakeNowMs-5000, 0), Kind: api.DecisionKind_DECISION_KIND_SWITCH, Actor: "admin:ops"},
		},
	}}
}

func (f *fakeSource) Snapshot(context.Context) (*Snapshot, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.snap, nil
}

func (f *fakeSource) Explain(_ context.Context, id uint64) (*api.ExplainResponse, error) {
	f.explained = id
	if f.explainErr != nil {
		return nil, f.explainErr
	}
	r, ok := f.snap.Catalog.Route(id)
	resp := &api.ExplainResponse{Read: f.snap.Read, NowMs: f.snap.NowMs, LastColumnAtMs: fakeNowMs, AutoSplitEnabled: false,
		Decisions: f.snap.Decisions[:1],
		Ops: []*api.Op{{OpId: 7, ParentRouteId: id, SplitKeys: [][]byte{hostile}, Origin: api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND,
			State: api.OpState_OP_STATE_DONE, NextStep: 3}}}
	if ok {
		resp.Route = r.ToProto()
	}
	if tr := tracked(f.snap.Tracked, id); tr != nil {
		resp.Tracked = tr
	}
	return resp, nil
}
