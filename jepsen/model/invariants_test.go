package model

import (
	"strings"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func TestCheckChanges(t *testing.T) {
	const cool = 1000
	at := func(msv uint64) uint64 { return msv * ms }
	parent := Route{ID: 2, SplitAtHLC: at(5000)}                                 // cooling down until 6000 ms
	merged := Route{ID: 5, MergedLeft: 3, MergedRight: 4, MergedAtHLC: at(5000)} // likewise, from its merge
	initial := Route{ID: 1}                                                      // never split: no cooldown
	on := func(uint64) bool { return true }
	offAt7 := func(idx uint64) bool { return idx != 7 }
	for _, tc := range []struct {
		name    string
		splits  []SplitEvent
		merges  []MergeEvent
		enabled func(uint64) bool
		want    string // "" = no violation
	}{
		{"clean", []SplitEvent{
			{Version: 2, HLC: at(6000), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool, Index: 3},
			{Version: 3, HLC: at(6001), Parent: Route{ID: 9, SplitAtHLC: at(6000)}, OpID: 1, Step: 2, Middle: true, CooldownMs: cool, Index: 4},
			{Version: 4, HLC: at(6002), Parent: initial, RequestID: "m", Index: 5},
		}, nil, on, ""},
		{"merges between splits", []SplitEvent{
			{Version: 2, HLC: at(6000), Parent: initial, RequestID: "a"},
			{Version: 4, HLC: at(6002), Parent: merged, OpID: 1, Step: 1, CooldownMs: cool},
		}, []MergeEvent{{Version: 3, HLC: at(6001), RequestID: "b"}, {Version: 5, HLC: at(6003), RequestID: "c"}}, on, ""},
		{"version jump", []SplitEvent{{Version: 2, HLC: 1, Parent: initial}, {Version: 4, HLC: 2, Parent: initial}}, nil, on, "jump"},
		{"version jump over a merge", []SplitEvent{{Version: 2, HLC: 1, Parent: initial}}, []MergeEvent{{Version: 4, HLC: 2}}, on, "jump"},
		{"a version made twice", []SplitEvent{{Version: 2, HLC: 1, Parent: initial}}, []MergeEvent{{Version: 2, HLC: 2}}, on, "jump"},
		{"HLC not increasing", []SplitEvent{{Version: 2, HLC: 5, Parent: initial}, {Version: 3, HLC: 5, Parent: initial}}, nil, on, "strictly increasing"},
		{"merge HLC not after the split", []SplitEvent{{Version: 2, HLC: 5, Parent: initial}}, []MergeEvent{{Version: 3, HLC: 4}}, on, "strictly increasing"},
		{"step applied twice", []SplitEvent{
			{Version: 2, HLC: at(7000), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool},
			{Version: 3, HLC: at(7001), Parent: initial, OpID: 1, Step: 1, CooldownMs: cool},
		}, nil, on, "applied twice"},
		{"merge op applied twice", nil, []MergeEvent{{Version: 2, HLC: 1, OpID: 4}, {Version: 3, HLC: 2, OpID: 4}}, on, "applied twice"},
		{"step while off", []SplitEvent{{Version: 2, HLC: at(7000), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool, Index: 7}}, nil, offAt7, "switch was off"},
		{"merge op while off", nil, []MergeEvent{{Version: 2, HLC: 1, OpID: 4, Index: 7}}, offAt7, "switch was off"},
		{"manual merge while off", nil, []MergeEvent{{Version: 2, HLC: 1, RequestID: "m", Index: 7}}, offAt7, ""},
		{"cooldown", []SplitEvent{{Version: 2, HLC: at(5999), Parent: parent, OpID: 1, Step: 1, CooldownMs: cool}}, nil, on, "before its cooldown ended"},
		{"cooldown of a merged route", []SplitEvent{{Version: 2, HLC: at(5999), Parent: merged, OpID: 1, Step: 1, CooldownMs: cool}}, nil, on, "before its cooldown ended"},
		{"manual splits have no cooldown rule", []SplitEvent{{Version: 2, HLC: at(5001), Parent: parent, RequestID: "m"}}, nil, on, ""},
		{"merge op across an operator's boundary", nil, []MergeEvent{{Version: 2, HLC: 1, OpID: 4, Left: initial, Right: Route{ID: 6, Start: []byte("k"), OperatorStart: true}}}, on, `removed the boundary "k"`},
		{"merge op keeping an operator's boundary on its left", nil, []MergeEvent{{Version: 2, HLC: 1, OpID: 4, Left: Route{ID: 6, Start: []byte("k"), OperatorStart: true}, Right: Route{ID: 7, Start: []byte("n")}}}, on, ""},
		{"manual merge across an operator's boundary", nil, []MergeEvent{{Version: 2, HLC: 1, RequestID: "m", Left: initial, Right: Route{ID: 6, Start: []byte("k"), OperatorStart: true}}}, on, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := CheckChanges(tc.splits, tc.merges, tc.enabled)
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
	b.version(3)
	b.manual("a", 1, "m")
	b.merge("b", 2, 3)
	r := b.run(t)
	if errs := r.CheckCatalogs(); len(errs) > 0 {
		t.Fatal(errs)
	}
	// A version 4 whose split of r4 makes r2 again (an id of version 2).
	v3 := r.Catalogs[2]
	l, rr := Route{ID: 2, Start: nil, End: []byte("c"), Group: 1, State: active, Parent: 4, SplitAtHLC: 9},
		Route{ID: 5, Start: []byte("c"), Group: 1, State: active, Parent: 4, SplitAtHLC: 9}
	r.Catalogs = append(r.Catalogs, newCatalog(4, v3.NextID+1, []Route{l, rr}))
	if errs := r.CheckCatalogs(); len(errs) != 1 || !strings.Contains(errs[0].Error(), "reuses an id") {
		t.Fatalf("errors %v", errs)
	}
	r.Catalogs = append(r.Catalogs, newCatalog(7, r.Catalogs[1].NextID, r.Catalogs[1].Routes))
	if errs := r.CheckCatalogs(); len(errs) < 2 || !strings.Contains(errs[1].Error(), "not contiguous") {
		t.Fatalf("errors %v", errs)
	}
}

// CheckTransition must refuse every way a step between versions can lie
// about what made its routes.
func TestCheckTransitionFindsBadLineage(t *testing.T) {
	base, _ := Initial([][]byte{[]byte("f"), []byte("m")}, 1) // r1 ["", f), r2 [f, m), r3 [m, +inf)
	base, _ = base.MarkAllStarts()                            // r2 and r3 start at an operator's keys
	split, _, _ := base.Split(2, []byte("h"), 7*ms, true)
	merge, _, _ := base.Merge(1, 2, 7*ms)
	if err := CheckTransition(base, split); err != nil {
		t.Fatal(err)
	}
	if err := CheckTransition(base, merge); err != nil {
		t.Fatal(err)
	}
	edit := func(c *Catalog, f func([]Route) []Route) *Catalog {
		routes := f(append([]Route(nil), c.Routes...))
		return c.derive(c.Version, c.NextID, routes)
	}
	for _, tc := range []struct {
		name string
		next *Catalog
		want string
	}{
		{"merge names the wrong parents", edit(merge, func(rs []Route) []Route { rs[0].MergedLeft, rs[0].MergedRight = 2, 1; return rs }), "naming"},
		{"merge without its HLC", edit(merge, func(rs []Route) []Route { rs[0].MergedAtHLC = 0; return rs }), "merged at 0"},
		{"merge also names a split parent", edit(merge, func(rs []Route) []Route { rs[0].Parent = 1; return rs }), "split parent"},
		{"merge in another group", edit(merge, func(rs []Route) []Route { rs[0].Group = 2; return rs }), "group"},
		{"split child names another parent", edit(split, func(rs []Route) []Route { rs[2].Parent = 1; return rs }), "parent"},
		{"split children at two HLCs", edit(split, func(rs []Route) []Route { rs[2].SplitAtHLC++; return rs }), "split at"},
		{"two routes changed at once", edit(split, func(rs []Route) []Route { rs[0].ID = 9; return rs }), "neither"},
		{"split's left child loses its parent's mark", edit(split, func(rs []Route) []Route { rs[1].OperatorStart = false; return rs }), "keeps its parent's start"},
		{"merged route takes the right route's mark", edit(merge, func(rs []Route) []Route { rs[0].OperatorStart = true; return rs }), "keeps the left route's start"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTransition(base, tc.next)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckTransition: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	// r2 is gone after the split; a merge of its children may not bring
	// its id back.
	again, _, _ := split.Merge(4, 5, 8*ms)
	again = edit(again, func(rs []Route) []Route { rs[1].ID = 2; return rs })
	if err := CheckTransition(split, again); err == nil || !strings.Contains(err.Error(), "reuses") {
		t.Fatalf("a merge reusing r2: %v", err)
	}
	// Merging routes that are not adjacent, or not ACTIVE, as a node might
	// report it.
	apart := newCatalog(2, 5, []Route{{ID: 4, End: []byte("m"), Group: 1, State: active, MergedLeft: 1, MergedRight: 3, MergedAtHLC: 7}, base.Routes[1]})
	if err := CheckTransition(base, apart); err == nil {
		t.Fatal("a merge of r1 and r3 passed")
	}
	fenced := newCatalog(1, 4, []Route{base.Routes[0], {ID: 2, Start: []byte("f"), End: []byte("m"), Group: 1, State: api.RouteState_ROUTE_STATE_WRITE_FENCED}, base.Routes[2]})
	m2 := newCatalog(2, 5, []Route{{ID: 4, End: []byte("m"), Group: 1, State: active, MergedLeft: 1, MergedRight: 2, MergedAtHLC: 7}, base.Routes[2]})
	if err := CheckTransition(fenced, m2); err == nil || !strings.Contains(err.Error(), "ACTIVE") {
		t.Fatalf("a merge of a fenced route: %v", err)
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
	want, _, _ := c.Split(2, []byte("t"), 9, false)
	if next.Hash() != want.Hash() || next.Version != 2 || next.NextID != 5 {
		t.Fatalf("ApplyDelta gave v%d %v, want %v", next.Version, next.Routes, want.Routes)
	}
	if _, err := ApplyDelta(c, &api.CatalogDelta{Version: 2, RemovedRouteIds: []uint64{7}}); err == nil {
		t.Fatal("ApplyDelta removed a route that is not live")
	}
}
