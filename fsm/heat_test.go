package fsm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/heatmap"
	"github.com/hotsplit/hotsplit/hlc"
)

// heatWindow is column i's window of 1 s, starting at the harness's clock.
func heatWindow(i uint64) (start, at uint64) {
	return startMs + i*1000, startMs + (i+1)*1000
}

// weightedBands answers the whole history's weighted load per key row.
func weightedBands(t *testing.T, h *heatmap.History) (*heatmap.Matrix, error) {
	t.Helper()
	if h == nil {
		return nil, fmt.Errorf("no heat history")
	}
	m, err := h.Query(heatmap.Query{FromMs: 0, ToMs: ^uint64(0) >> 1, Metric: heatmap.MetricWeighted})
	return &m, err
}

// A column with route_loads adds its load to the history with the
// weights in force: the route holding the load is the hot band.
func TestHeatHistoryTakesColumnsWithRouteLoads(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, &api.Config{StepMs: 1000, WriteWeight: proto.Uint32(4), ReadWeight: proto.Uint32(1)})
	if h.state().HeatHistory() != nil || h.state().Proto().HeatHistory != nil {
		t.Fatal("a history before any column")
	}
	for i := range uint64(3) {
		start, at := heatWindow(i)
		wantCode(t, h.run(loadsColumn(start, at, []api.RouteLoad{{RouteID: 2, Reads: 10, Writes: 5, ReadBytes: 7, WriteBytes: 3}})), api.ResultCode_RESULT_CODE_OK)
	}
	hist := h.state().HeatHistory()
	if hist.Columns() != 3 {
		t.Fatalf("%d columns, want 3", hist.Columns())
	}
	m, err := weightedBands(t, hist)
	if err != nil {
		t.Fatal(err)
	}
	row, ok := m.Row([]byte("m"))
	if !ok {
		t.Fatalf("no row for m in %q", m.Keys)
	}
	for _, c := range m.Cells {
		var got uint64
		for j, r := range c.Rows {
			if int(r) == row {
				got = c.Values[j]
			}
		}
		// 4 per write, 1 per read, for each column summed in the cell.
		if want := c.Columns * (4*5 + 10); got != want {
			t.Fatalf("cell %d–%d: weighted %d at m, want %d (%v)", c.StartMs, c.EndMs, got, want, c)
		}
	}
	if p := h.state().Proto().HeatHistory; p == nil || len(p.GetLevels()) != 1 {
		t.Fatalf("the state proto lacks the history: %v", p)
	}
}

// A column without route_loads — committed at version 2, or assembled just
// before the cluster rose to 3 — adds nothing: its rows hold only the
// hottest routes, so bands drawn from them would call the others cold.
func TestHeatHistorySkipsColumnsWithoutRouteLoads(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, &api.Config{StepMs: 1000})
	start, at := heatWindow(0)
	wantCode(t, h.run(column(start, at, &api.ColumnRow{RouteId: 1, Writes: 500})), api.ResultCode_RESULT_CODE_OK)
	if h.state().HeatHistory() != nil {
		t.Fatal("a column without route_loads started a history")
	}
	start, at = heatWindow(1)
	wantCode(t, h.run(loadsColumn(start, at, []api.RouteLoad{{RouteID: 1, Writes: 5}})), api.ResultCode_RESULT_CODE_OK)
	start, at = heatWindow(2)
	wantCode(t, h.run(column(start, at, &api.ColumnRow{RouteId: 1, Writes: 500})), api.ResultCode_RESULT_CODE_OK)
	hist := h.state().HeatHistory()
	if from, to, _ := hist.Span(); hist.Columns() != 1 || from != startMs+1000 || to != startMs+2000 {
		t.Fatalf("history of %d columns over [%d, %d), want the one column with route_loads", hist.Columns(), from, to)
	}
}

// At version 2 nothing is kept: no history, no mark, nothing in the proto
// (so the state hashes as the version 2 release's; the golden tests pin
// that).
func TestHeatHistoryAbsentAtVersion2(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version2, [][]byte{[]byte("m")}, hotConfig())
	start, at := heatWindow(0)
	wantCode(t, h.run(column(start, at, hotRow(1, "k"))), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(split(2, "t")), api.ResultCode_RESULT_CODE_OK)
	if h.state().HeatHistory() != nil || h.state().Proto().HeatHistory != nil {
		t.Fatal("version 2 kept a heat history")
	}
	// Raised to 3, the history starts empty and the next column starts it.
	wantCode(t, h.run(member("n1", clusterversion.Version3)), api.ResultCode_RESULT_CODE_OK)
	if v := h.state().ClusterVersion(); v != clusterversion.Version3 {
		t.Fatalf("cluster version %d", v)
	}
	if h.state().HeatHistory() != nil {
		t.Fatal("the raise made a history")
	}
	start, at = heatWindow(1)
	wantCode(t, h.run(loadsColumn(start, at, []api.RouteLoad{{RouteID: 1, Writes: 5}})), api.ResultCode_RESULT_CODE_OK)
	if hist := h.state().HeatHistory(); hist == nil || hist.Columns() != 1 || hist.MarkCount() != 0 {
		t.Fatalf("after the raise: %v", hist)
	}
}

// opStateAt3 is opState at cluster version 3.
func opStateAt3(t *testing.T, ops ...*api.Op) *harness {
	t.Helper()
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, &api.Config{CooldownMs: 60_000, OpTtlMs: 30_000})
	h.editState(func(p *api.StateSnapshot) {
		p.Ops = ops
		p.NextOpId = uint64(len(ops)) + 1
	})
	return h
}

func marksOf(s *State) []heatmap.Mark {
	h := s.HeatHistory()
	if h == nil {
		return nil
	}
	return h.Marks(0, ^uint64(0)>>1, nil, nil)
}

func keysOf(m heatmap.Mark) string {
	var ks []string
	for _, k := range m.Keys {
		ks = append(ks, string(k))
	}
	return strings.Join(ks, ",")
}

// Splits are marks at their commit HLC: a manual split with its key, a
// two-step isolation as one mark with both keys once its last step
// applied, an op aborted after a step with the keys that did apply.
func TestHeatHistoryMarksSplits(t *testing.T) {
	h := opStateAt3(t, compoundOp(1))
	wantCode(t, h.run(split(2, "t")), api.ResultCode_RESULT_CODE_OK)
	manualAt := h.state().LastHLC()
	wantCode(t, h.run(step(1, 1, 1, []byte("k"))), api.ResultCode_RESULT_CODE_OK)
	if n := len(marksOf(h.state())); n != 1 {
		t.Fatalf("%d marks after the first of two steps, want only the manual split's", n)
	}
	wantCode(t, h.run(step(1, 2, 6, []byte("k\x00"))), api.ResultCode_RESULT_CODE_OK)
	doneAt := h.state().LastHLC()
	marks := marksOf(h.state())
	if len(marks) != 2 {
		t.Fatalf("marks %v", marks)
	}
	manual, iso := marks[0], marks[1]
	if manual.Kind != api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT || manual.SplitOrigin != api.SplitOrigin_SPLIT_ORIGIN_MANUAL ||
		keysOf(manual) != "t" || manual.RouteID != 2 || manual.OpID != 0 || manual.AtHLC != manualAt {
		t.Fatalf("manual split mark %+v", manual)
	}
	if iso.SplitOrigin != api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND || keysOf(iso) != "k,k\x00" || iso.OpID != 1 ||
		iso.RouteID != 2 || iso.AtHLC != doneAt {
		t.Fatalf("isolation mark %+v", iso)
	}
	if hlc.Physical(iso.AtHLC) != iso.AtMs() {
		t.Fatal("mark time is not its HLC's physical part")
	}
}

func TestHeatHistoryMarksAnAbortedOpsAppliedStep(t *testing.T) {
	op := compoundOp(1)
	op.SplitKeys = [][]byte{[]byte("k\x00"), []byte("k")} // marks sort them
	op.TargetRouteId, op.TargetStart, op.TargetEnd = 1, nil, []byte("m")
	h := opStateAt3(t, op)
	wantCode(t, h.run(step(1, 1, 1, []byte("k\x00"))), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(abort(1, "enough")), api.ResultCode_RESULT_CODE_OK)
	marks := marksOf(h.state())
	if len(marks) != 1 || keysOf(marks[0]) != "k\x00" || marks[0].OpID != 1 {
		t.Fatalf("marks %+v, want the one applied key", marks)
	}
	// An op aborted before any step leaves no mark.
	h = opStateAt3(t, compoundOp(1))
	wantCode(t, h.run(abort(1, "before")), api.ResultCode_RESULT_CODE_OK)
	if marks := marksOf(h.state()); len(marks) != 0 {
		t.Fatalf("marks %+v after an abort before step 1", marks)
	}
}

// A merge is a mark at its commit HLC with the boundary it removed and
// the left route; a refused merge marks nothing.
func TestHeatHistoryMarksMerges(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, nil)
	wantCode(t, h.run(split(2, "t")), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(merge(1, 3)), api.ResultCode_RESULT_CODE_OK)
	mergedAt := h.state().LastHLC()
	marks := marksOf(h.state())
	if len(marks) != 2 {
		t.Fatalf("marks %+v", marks)
	}
	m := marks[1]
	if m.Kind != api.HeatmapMarkKind_HEATMAP_MARK_KIND_MERGE || m.MergeOrigin != api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_MANUAL ||
		m.SplitOrigin != api.SplitOrigin_SPLIT_ORIGIN_UNSPECIFIED || keysOf(m) != "m" || m.RouteID != 1 || m.AtHLC != mergedAt {
		t.Fatalf("merge mark %+v", m)
	}
	before := len(marksOf(h.state()))
	h.run(merge(1, 4)) // route 1 is gone: refused
	if n := len(marksOf(h.state())); n != before {
		t.Fatalf("a refused merge left a mark: %d marks, was %d", n, before)
	}
	// markMerge, as an automatic merge's apply will call it.
	cur := h.state()
	ns := *cur
	(&applier{f: h.f, s: &ns, nowHLC: cur.LastHLC() + 1}).markMerge(5, []byte("t"), api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_AUTOMATIC)
	if ms := marksOf(&ns); len(ms) != 3 || ms[2].MergeOrigin != api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_AUTOMATIC || len(marksOf(cur)) != 2 {
		t.Fatalf("automatic merge mark: %+v (the published state must keep %d)", ms, len(marksOf(cur)))
	}
	// Below version 3, nothing.
	h2 := bootstrappedAt(t, clusterversion.Version2, [][]byte{[]byte("m")}, nil)
	ns2 := *h2.state()
	(&applier{f: h2.f, s: &ns2, nowHLC: ns2.LastHLC() + 1}).markMerge(1, []byte("m"), api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_MANUAL)
	if ns2.heat != nil {
		t.Fatal("a merge mark at version 2")
	}
}

// heatState is a small version 3 state with a heat history: columns of a
// moving hot route, and a manual split (a mark) every tenth column.
func heatState(t testing.TB, routes, columns int) *harness {
	t.Helper()
	var splits [][]byte
	for i := range routes - 1 {
		splits = append(splits, fmt.Appendf(nil, "k%06d", i))
	}
	h := bootstrappedAt(t, clusterversion.Version3, splits, &api.Config{StepMs: 1000})
	for i := range uint64(columns) {
		start, at := heatWindow(i)
		var loads []api.RouteLoad
		for id := uint64(1); id <= uint64(routes); id++ {
			// A hot route that moves, on a floor of load everywhere.
			w := 1 + id%7
			if id == 1+(i*37)%uint64(routes) {
				w = 10_000
			}
			loads = append(loads, api.RouteLoad{RouteID: id, Writes: w, Reads: 2 * w})
		}
		wantCode(t, h.run(loadsColumn(start, at, loads)), api.ResultCode_RESULT_CODE_OK)
		if i%10 == 5 {
			h.ms = max(h.ms, at+1)
			last := h.state().Catalog().Lookup([]byte("z999"))
			wantCode(t, h.run(split(last.ID, fmt.Sprintf("z%03d", i))), api.ResultCode_RESULT_CODE_OK)
		}
	}
	return h
}

// pagedHistory spans several pages of boundaries and of columns: every
// column has its own catalog of 200 routes, so no boundary repeats.
func pagedHistory(t *testing.T) *heatmap.History {
	t.Helper()
	h := heatmap.New()
	for c := range uint64(2*heatColumnPage + 5) {
		keys := make([][]byte, 200)
		for i := range keys {
			keys[i] = fmt.Appendf(nil, "c%03d-%04d", c, i)
		}
		cat, err := catalog.New(keys, 1)
		if err != nil {
			t.Fatal(err)
		}
		start := startMs - 100_000 + c*1000
		if h, err = h.AddColumn(heatmap.ColumnInput{WindowStartMs: start, AtMs: start + 1000, Weights: heatmap.Weights{Read: 1, Write: 4}, Catalog: cat,
			Loads: []heatmap.RouteLoad{{RouteID: 1 + c%200, Writes: 50, Reads: c}}}); err != nil {
			t.Fatal(err)
		}
		if c%7 == 3 {
			if h, err = h.AddMark(heatmap.Mark{AtHLC: hlc.Make(start+500, 0), Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT,
				SplitOrigin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE, Keys: [][]byte{keys[c%200]}, RouteID: 1}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}

// The history goes into snapshots in pages (boundaries, then each level's
// columns) and comes back equal: same hash, same content, and the
// restored replica goes on exactly like the original.
func TestHeatHistorySnapshotPages(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, &api.Config{StepMs: 1000})
	p := pagedHistory(t).ToProto()
	h.editState(func(s *api.StateSnapshot) { s.HeatHistory = p })
	src := h.state()
	if len(p.GetBoundaries()) <= heatBoundaryPage || len(p.GetLevels()[0].GetColumns()) <= heatColumnPage || len(p.GetMarks()) == 0 {
		t.Fatalf("the history does not span pages: %d boundaries, %d columns, %d marks",
			len(p.GetBoundaries()), len(p.GetLevels()[0].GetColumns()), len(p.GetMarks()))
	}
	if !proto.Equal(src.Proto().HeatHistory, p) {
		t.Fatal("the installed history differs")
	}
	b := persist(t, h.f)
	f2 := newQuiet(Options{})
	if err := restore(f2, b); err != nil {
		t.Fatal(err)
	}
	got := f2.State()
	if got.Hash() != src.Hash() || !proto.Equal(got.Proto().HeatHistory, p) {
		t.Fatal("the restored history differs")
	}
	for _, f := range []*FSM{h.f, f2} {
		c := loadsColumn(startMs, startMs+1000, []api.RouteLoad{{RouteID: 1, Writes: 9}, {RouteID: 2, Reads: 4}})
		c.Hlc = hlc.Make(startMs+1010, 0)
		b, _ := EncodeCommand(c)
		f.Apply(&raft.Log{Index: src.Index() + 1, Data: b})
	}
	if h.f.State().Hash() != f2.State().Hash() || h.f.State().HeatHistory().Columns() != len(p.GetLevels()[0].GetColumns())+1 {
		t.Fatal("original and restored diverge on the next column")
	}
	// WriteSnapshot (tools) pages the same way.
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, src.Index(), src.Proto()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), b) {
		t.Fatal("WriteSnapshot of the state's proto differs from Persist")
	}
}

// Restore refuses a heat history it could not have produced.
func TestRestoreRefusesBadHeatHistory(t *testing.T) {
	h := heatState(t, 8, 8)
	good := h.state().Proto()
	for _, tc := range []struct {
		name string
		edit func(p *api.StateSnapshot)
		want string
	}{
		// (Without the other version 3 state, which restore would refuse
		// first.)
		{"at version 2", func(p *api.StateSnapshot) {
			p.ClusterVersion = clusterversion.Version2
			clearMerge(p.Config)
			p.Cold = nil
			unmarkStarts(p)
		}, "heat_history at cluster version 2"},
		{"empty", func(p *api.StateSnapshot) { p.HeatHistory = &api.HeatmapHistory{FormatVersion: heatmap.FormatVersion} }, "heat_history: empty"},
		{"another format", func(p *api.StateSnapshot) { p.HeatHistory.FormatVersion = 9 }, "heat_history: heatmap: invalid history: format_version: 9"},
		{"unsorted boundaries", func(p *api.StateSnapshot) {
			b := p.HeatHistory.Boundaries
			b[0], b[1] = b[1], b[0]
		}, "boundaries[1]: not above boundaries[0]"},
		{"a back-dated mark", func(p *api.StateSnapshot) {
			m := p.HeatHistory.Marks
			m = append(m, proto.CloneOf(m[0]))
			m[len(m)-1].AtHlc = m[0].AtHlc - 1
			p.HeatHistory.Marks = m
		}, "is before the mark before it"},
		{"not bootstrapped", func(p *api.StateSnapshot) {
			heat := p.HeatHistory
			proto.Reset(p)
			p.FormatVersion, p.NextOpId, p.NextDecisionSeq, p.NextRequestSeq, p.HeatHistory = snapshotFormatVersion, 1, 1, 1, heat
		}, "not bootstrapped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := proto.CloneOf(good)
			tc.edit(p)
			f := newQuiet(Options{})
			err := restore(f, encodeProto(t, p, 9))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	// stateFromProto (reseeding, installs) refuses paging fields.
	p := proto.CloneOf(good)
	p.HeatHistoryPages = &api.HeatmapPages{}
	if _, err := stateFromProto(p, h.f.limits()); err == nil || !strings.Contains(err.Error(), "heat_history_pages outside") {
		t.Fatalf("heat_history_pages in a state: %v", err)
	}
}

// The frames after the requests must be exactly the pages announced.
func TestRestoreRefusesBadHeatPages(t *testing.T) {
	h := heatState(t, 8, 4)
	b := persist(t, h.f)
	if err := restore(newQuiet(Options{}), b); err != nil {
		t.Fatal(err)
	}
	if err := restore(newQuiet(Options{}), b[:len(b)-3]); err == nil || !strings.Contains(err.Error(), "heat columns frame") {
		t.Fatalf("truncated heat column frame: %v", err)
	}
	p := h.state().Proto()
	heat := p.HeatHistory
	for _, tc := range []struct {
		name  string
		parts func(parts *snapshotParts)
		want  string
	}{
		{"pages without a history", func(parts *snapshotParts) {
			parts.heat = nil
			parts.core.HeatHistoryPages = &api.HeatmapPages{Boundaries: 1}
		}, "heat_history_pages without heat_history"},
		{"a history without pages", func(parts *snapshotParts) {
			parts.heat = nil
			parts.core.HeatHistory = heat
		}, "heat_history without heat_history_pages"},
		{"too many levels", func(parts *snapshotParts) {
			parts.heat = proto.CloneOf(heat)
			for range heatmap.Levels {
				parts.heat.Levels = append(parts.heat.Levels, &api.HeatmapLevel{})
			}
		}, "level_columns: 5 levels above 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := proto.CloneOf(p)
			q.HeatHistory = nil
			parts := snapshotParts{index: 9, core: q, heat: heat}
			cat := q.Catalog
			q.Catalog = &api.CatalogSnapshot{Version: cat.Version, NextRouteId: cat.NextRouteId}
			parts.routes = len(cat.Routes)
			parts.ascend = func(fn func(*api.RouteDescriptor) bool) {
				for _, r := range cat.Routes {
					fn(r)
				}
			}
			parts.tracked, parts.requests = q.Tracked, q.Requests
			q.Tracked, q.Requests = nil, nil
			tc.parts(&parts)
			var buf bytes.Buffer
			if err := writeParts(&buf, parts); err != nil {
				t.Fatal(err)
			}
			if err := restore(newQuiet(Options{}), buf.Bytes()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("restore: %v, want %q", err, tc.want)
			}
		})
	}
}
