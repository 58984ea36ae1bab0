package fsm

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// loadsColumn is a column whose route_loads list loads and whose rows are
// the evidence rows given.
func loadsColumn(start, at uint64, loads []api.RouteLoad, rows ...*api.ColumnRow) *api.Command {
	c := column(start, at, rows...)
	c.GetObserveColumn().RouteLoads = api.NewRouteLoads(loads)
	return c
}

func loadOf(r *api.ColumnRow) api.RouteLoad {
	return api.RouteLoad{RouteID: r.GetRouteId(), Reads: r.GetReads(), Writes: r.GetWrites(), ReadBytes: r.GetReadBytes(), WriteBytes: r.GetWriteBytes()}
}

func TestRouteLoadsNeedVersion3(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version2, [][]byte{[]byte("m")}, &api.Config{StepMs: 1000})
	before := h.state()
	r := h.run(loadsColumn(1000, 2000, []api.RouteLoad{{RouteID: 1, Writes: 5}}))
	wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
	if !strings.Contains(r.Message, "route_loads: needs cluster version 3") {
		t.Fatalf("message %q", r.Message)
	}
	assertUnchanged(t, before, h.state())
}

func TestRouteLoadsRejections(t *testing.T) {
	hot := hotRow(1, "k")
	tests := []struct {
		name string
		edit func(c *api.ObserveColumn)
		msg  string
	}{
		{"lists of different lengths", func(c *api.ObserveColumn) { c.RouteLoads.Writes = c.RouteLoads.Writes[:1] }, "route_loads.writes: 1 entries, route_id_deltas has 2"},
		{"a zero delta", func(c *api.ObserveColumn) { c.RouteLoads.RouteIdDeltas[1] = 0 }, "route_loads.route_id_deltas[1]: 0"},
		{"route id 0", func(c *api.ObserveColumn) { c.RouteLoads.RouteIdDeltas[0] = 0 }, "route_loads.route_id_deltas[0]: 0"},
		{"an overflowing id", func(c *api.ObserveColumn) { c.RouteLoads.RouteIdDeltas[1] = ^uint64(0) }, "route_id_deltas[1]: route id overflows"},
		{"a row not listed", func(c *api.ObserveColumn) { c.Rows = append(c.Rows, &api.ColumnRow{RouteId: 3}) }, "rows[1]: route 3 is not in route_loads"},
		{"a row's counts differ", func(c *api.ObserveColumn) { c.Rows[0].Reads++ }, "rows[0]: counts of route 1 differ from route_loads"},
		{"rows out of order", func(c *api.ObserveColumn) {
			c.Rows = []*api.ColumnRow{{RouteId: 2, Writes: 7}, hot}
		}, "rows[1]: route 1 is not in route_loads, or rows are not sorted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, hotConfig())
			c := loadsColumn(1000, 2000, []api.RouteLoad{loadOf(hot), {RouteID: 2, Writes: 7}}, proto.CloneOf(hot))
			tc.edit(c.GetObserveColumn())
			before := h.state()
			r := h.run(c)
			wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
			if !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("message %q does not say %q", r.Message, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
}

// A column that lists every route's counts in route_loads and carries
// evidence rows only for some decides exactly as the same column with one
// row per route: the replicated state after a run of such columns is
// equal, whatever the loads, evidence and which routes carry it. (With
// automatic merges off: a complete column also feeds the merge rule's
// cold state, which a column of rows alone cannot.)
func TestRouteLoadsDecideAsRows(tt *testing.T) {
	rapid.Check(tt, func(t *rapid.T) {
		// The harnesses report to tt: they fail only on a broken setup.
		splits := [][]byte{[]byte("f"), []byte("m"), []byte("t")}
		cfg := hotConfig()
		cfg.MaxMergesPerCycle = proto.Uint32(0)
		asRows := bootstrappedAt(tt, clusterversion.Version3, splits, cfg)
		asLoads := bootstrappedAt(tt, clusterversion.Version3, splits, cfg)
		columns := rapid.IntRange(1, 6).Draw(t, "columns")
		for c := range columns {
			var rows, evidence []*api.ColumnRow
			var loads []api.RouteLoad
			for id := uint64(1); id <= 4; id++ {
				if !rapid.Bool().Draw(t, fmt.Sprintf("c%d r%d reported", c, id)) {
					continue
				}
				row := &api.ColumnRow{RouteId: id,
					Reads:  rapid.Uint64Range(0, 20_000).Draw(t, "reads"),
					Writes: rapid.Uint64Range(0, 20_000).Draw(t, "writes")}
				if rapid.Bool().Draw(t, "evidence") {
					key := []byte{"fmtz"[id-1], 'k'}
					row.TopKeys = []*api.KeyEstimate{{Key: key, Lower: 3 * row.Writes, Upper: 4 * row.Writes}}
					evidence = append(evidence, row)
				}
				rows = append(rows, row)
				loads = append(loads, loadOf(row))
			}
			start := uint64(1000 * (c + 1))
			a := asRows.run(column(start, start+1000, rows...))
			b := asLoads.run(loadsColumn(start, start+1000, loads, evidence...))
			if a.Code != api.ResultCode_RESULT_CODE_OK || b.Code != api.ResultCode_RESULT_CODE_OK {
				t.Fatalf("column %d: %v %s / %v %s", c, a.Code, a.Message, b.Code, b.Message)
			}
		}
		// Only columns with route_loads feed the heat history: everything
		// else must be equal.
		rowsState, loadsState := asRows.state().Proto(), asLoads.state().Proto()
		if rowsState.HeatHistory != nil {
			t.Fatalf("columns without route_loads kept a heat history: %v", rowsState.HeatHistory)
		}
		loadsState.HeatHistory = nil
		if hashOf(rowsState) != hashOf(loadsState) {
			t.Fatalf("states differ:\nrows  %v\nloads %v", rowsState.GetTracked(), loadsState.GetTracked())
		}
	})
}
