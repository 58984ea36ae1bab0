package node

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/node/pagesource"
	"github.com/hotsplit/hotsplit/webui"
)

// pageFSM is a state machine the page reads directly, entries applied by
// hand.
type pageFSM struct {
	t     *testing.T
	f     *fsm.FSM
	index uint64
	ms    uint64
}

const pageStartMs = 1_700_000_000_000

func (p *pageFSM) apply(c *api.Command) *api.CommandResult {
	p.t.Helper()
	p.index++
	p.ms += 10
	c.Hlc = hlc.Make(p.ms, 0)
	b, err := fsm.EncodeCommand(c)
	if err != nil {
		p.t.Fatal(err)
	}
	res := p.f.Apply(&raft.Log{Index: p.index, Data: b}).(*fsm.Result)
	if res.Code != api.ResultCode_RESULT_CODE_OK {
		p.t.Fatalf("apply %T: %v %s", c.GetBody(), res.Code, res.Message)
	}
	return res.CommandResult
}

func (p *pageFSM) column(i uint64, loads []api.RouteLoad, rows ...*api.ColumnRow) {
	p.t.Helper()
	start := pageStartMs + i*1000
	c := &api.ObserveColumn{WindowStartMs: start, AtMs: start + 1000, StepMs: 1000, Rows: rows, Reporters: []string{"dn1"}}
	if loads != nil {
		c.RouteLoads = api.NewRouteLoads(loads)
	}
	p.apply(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: c}})
}

// heatmap answers GET /api/v1/heatmap over the page source.
func (p *pageFSM) heatmap() webui.HeatmapAnswer {
	p.t.Helper()
	src := pagesource.Source{
		Read: func() (*fsm.State, *api.ReadInfo) {
			st := p.f.State()
			return st, &api.ReadInfo{AppliedIndex: st.Index(), ServedBy: "n1"}
		},
		NowMs:        func() uint64 { return p.ms },
		ExplainRoute: func(context.Context, uint64) (*api.ExplainResponse, error) { return &api.ExplainResponse{}, nil },
	}
	mux := http.NewServeMux()
	webui.New(src).Register(mux, nil)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/api/v1/heatmap?from=0", nil))
	if w.Code != http.StatusOK {
		p.t.Fatalf("heatmap: %d %s", w.Code, w.Body)
	}
	var a webui.HeatmapAnswer
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil {
		p.t.Fatal(err)
	}
	return a
}

// What the page shows of columns committed without route_loads — at
// cluster version 2, or assembled just before the cluster rose to 3: no
// bands. Their rows list only the hottest routes, so bands drawn from them
// would paint every other route cold; the API answers the live routes
// (their boundaries) and no cell, and says why. From the first column
// with route_loads on, the cells are there.
func TestPageShowsNoBandsForColumnsWithoutRouteLoads(t *testing.T) {
	p := &pageFSM{t: t, f: fsm.New(fsm.Options{Logger: quietLogger(), Halt: func(err error) { t.Error(err) }}), ms: pageStartMs}
	p.apply(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1", InitialSplits: [][]byte{[]byte("m")},
		GroupId: 1, Config: &api.Config{StepMs: 1000}, ClusterVersion: clusterversion.Version2}}})
	p.apply(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: clusterversion.Version2}}}})
	p.column(0, nil, &api.ColumnRow{RouteId: 2, Writes: 5000})

	a := p.heatmap()
	if a.History.Enabled || !strings.Contains(a.History.Reason, "version 2") || !strings.Contains(a.History.Reason, "cluster version 3") {
		t.Fatalf("history at version 2: %+v", a.History)
	}
	if len(a.Cells) != 0 || len(a.Marks) != 0 || len(a.Routes) != 2 || a.Routes[1].Start != "m" {
		t.Fatalf("at version 2: %d cells, %d marks, routes %+v; want no cell and both routes", len(a.Cells), len(a.Marks), a.Routes)
	}

	// The cluster rises to 3; a column assembled before it (no
	// route_loads) still adds no band.
	p.apply(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: clusterversion.Version3}}}})
	p.column(1, nil, &api.ColumnRow{RouteId: 2, Writes: 5000})
	a = p.heatmap()
	if !a.History.Enabled || a.History.Reason != "" || a.History.Columns != 0 || len(a.Cells) != 0 {
		t.Fatalf("at version 3 before a column with route_loads: %+v, %d cells", a.History, len(a.Cells))
	}
	p.column(2, []api.RouteLoad{{RouteID: 2, Writes: 5000}})
	a = p.heatmap()
	if a.History.Columns != 1 || len(a.Cells) != 1 || a.History.FromMs != pageStartMs+2000 {
		t.Fatalf("after a column with route_loads: %+v, %d cells", a.History, len(a.Cells))
	}
	hot, ok := 0, false
	for j, r := range a.Rows(0) {
		if a.Keys[r] == "m" {
			hot, ok = j, true
		}
	}
	if !ok || a.Cells[0].Values[hot] != 4*5000 {
		t.Fatalf("the loaded route's band: keys %q cell %+v", a.Keys, a.Cells[0])
	}
}
