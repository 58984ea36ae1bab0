package model

import (
	"strings"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func TestCheckSplits(t *testing.T) {
	const cool = 1000
	at := func(msv uint64) uint64 { return msv * ms }
	parent := Route{ID: 2, SplitAtHLC: at(5000)} // cooling down until 6000 ms
	initial := Route{ID: 1}                      // never split: no cooldown
	on := func(uint64) bool { return true }
	offAt7 := func(idx uint64) bool { return idx != 7 }
	for _, tc := range []struct {
		name    string
		splits  []SplitEvent
		enabled func(uint64) bool
		want    string // "" = no violation
	}{
		{"clean", []SplitEvent{
			{Version: 2, HLC: at(6000), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool, Index: 3},
			{Version: 3, HLC: at(6001), Parent: Route{ID: 9, SplitAtHLC: at(6000)}, OpID: 1, Step: 2, Middle: true, CooldownMs: cool, Index: 4},
			{Version: 4, HLC: at(6002), Parent: initial, RequestID: "m", Index: 5},
		}, on, ""},
		{"version jump", []SplitEvent{{Version: 2, HLC: 1, Parent: initial}, {Version: 4, HLC: 2, Parent: initial}}, on, "jump"},
		{"HLC not increasing", []SplitEvent{{Version: 2, HLC: 5, Parent: initial}, {Version: 3, HLC: 5, Parent: initial}}, on, "strictly increasing"},
		{"step applied twice", []SplitEvent{
			{Version: 2, HLC: at(7000), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool},
			{Version: 3, HLC: at(7001), Parent: initial, OpID: 1, Step: 1, CooldownMs: cool},
		}, on, "applied twice"},
		{"step while off", []SplitEvent{{Version: 2, HLC: at(7000), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool, Index: 7}}, offAt7, "switch was off"},
		{"cooldown", []SplitEvent{{Version: 2, HLC: at(5999), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool}}, on, "before its cooldown ended"},
		{"manual splits have no cooldown rule", []SplitEvent{{Version: 2, HLC: at(5001), Parent: parent, RequestID: "m"}}, on, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := CheckSplits(tc.splits, tc.enabled)
			if tc.want == "" {
				if len(errs) > 0 {
					t.Fatal(errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tc.want) {
				t.Fatalf("errors %v, want one containing %q", errs, tc.want)
			}
		})
	}
}

func TestCheckCatalogsFindsAReusedID(t *testing.T) {
	b := newLog()
	b.manual("a", 1, "m")
	r := b.run(t)
	if errs := r.CheckCatalogs(); len(errs) > 0 {
		t.Fatal(errs)
	}
	r.Splits = append(r.Splits, SplitEvent{Version: 3, Children: [2]Route{{ID: 2}, {ID: 9}}})
	if errs := r.CheckCatalogs(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "reuses route id 2") {
		t.Fatalf("errors %v", errs)
	}
	r.Catalogs = append(r.Catalogs, newCatalog(7, r.Catalogs[1].NextID, r.Catalogs[1].Routes))
	if errs := r.CheckCatalogs(); len(errs) != 2 || !strings.Contains(errs[0].Error(), "not contiguous") {
		t.Fatalf("errors %v", errs)
	}
}

func TestApplyDelta(t *testing.T) {
	c, _ := Initial([][]byte{[]byte("m")}, 1)
	d := &api.CatalogDelta{Version: 2, RemovedRouteIds: []uint64{2}, CommitHlc: 9, Added: []*api.RouteDescriptor{
		{RouteId: 3, Start: []byte("m"), End: []byte("t"), GroupId: 1, State: active, ParentRouteId: 2, SplitAtHlc: 9},
		{RouteId: 4, Start: []byte("t"), GroupId: 1, State: active, ParentRouteId: 2, SplitAtHlc: 9},
	}}
	next, err := ApplyDelta(c, d)
	if err != nil {
		t.Fatal(err)
	}
	want, _, _ := c.Split(2, []byte("t"), 9)
	if next.Hash() != want.Hash() || next.Version != 2 || next.NextID != 5 {
		t.Fatalf("ApplyDelta gave v%d %v, want %v", next.Version, next.Routes, want.Routes)
	}
	if _, err := ApplyDelta(c, &api.CatalogDelta{Version: 2, RemovedRouteIds: []uint64{7}}); err == nil {
		t.Fatal("ApplyDelta removed a route that is not live")
	}
}
