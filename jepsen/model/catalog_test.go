package model

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

const active = api.RouteState_ROUTE_STATE_ACTIVE

func TestInitial(t *testing.T) {
	c, err := Initial([][]byte{[]byte("b"), []byte("d")}, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := []Route{{ID: 1, End: []byte("b"), Group: 7, State: active}, {ID: 2, Start: []byte("b"), End: []byte("d"), Group: 7, State: active},
		{ID: 3, Start: []byte("d"), Group: 7, State: active}}
	if c.Version != InitialVersion || c.NextID != 4 || len(c.Routes) != 3 {
		t.Fatalf("version %d next %d routes %v", c.Version, c.NextID, c.Routes)
	}
	for i, r := range want {
		if !c.Routes[i].Equal(r) {
			t.Errorf("route %d: %v, want %v", i, c.Routes[i], r)
		}
	}
	if err := c.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][][]byte{{[]byte("b"), []byte("a")}, {{}}, {[]byte("a"), []byte("a")}, {bytes.Repeat([]byte("x"), MaxBoundaryLen+1)}} {
		if _, err := Initial(bad, 1); err == nil {
			t.Errorf("Initial(%q) accepted bad split keys", bad)
		}
	}
}

func TestSplitRules(t *testing.T) {
	base, _ := Initial([][]byte{[]byte("m")}, 1) // r1 ["", m), r2 [m, +inf)
	fenced := newCatalog(1, 3, []Route{base.Routes[0], {ID: 2, Start: []byte("m"), Group: 1, State: api.RouteState_ROUTE_STATE_WRITE_FENCED}})
	for _, tc := range []struct {
		name string
		cat  *Catalog
		id   uint64
		key  string
		want Code
	}{
		{"inside", base, 1, "c", OK},
		{"inside the unbounded route", base, 2, "zzz", OK},
		{"unknown route", base, 9, "c", RouteNotFound},
		{"at the start", base, 2, "m", KeyAtBoundary},
		{"at the end", base, 1, "m", KeyAtBoundary},
		{"below the start", base, 2, "a", KeyOutsideRoute},
		{"above the end", base, 1, "x", KeyOutsideRoute},
		{"empty key at the first route's start", base, 1, "", KeyAtBoundary},
		{"too long", base, 2, "m" + strings.Repeat("x", MaxBoundaryLen), KeyTooLarge},
		{"not active", fenced, 2, "x", RouteNotActive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, ch, code := tc.cat.Split(tc.id, []byte(tc.key), 77, false)
			if code != tc.want {
				t.Fatalf("Split: %s, want %s", code, tc.want)
			}
			if code != OK {
				if next != nil {
					t.Fatal("a refused split returned a catalog")
				}
				return
			}
			parent, _ := tc.cat.Route(tc.id)
			wantL := Route{ID: 3, Start: parent.Start, End: []byte(tc.key), Group: 1, State: active, Parent: tc.id, SplitAtHLC: 77}
			wantR := Route{ID: 4, Start: []byte(tc.key), End: parent.End, Group: 1, State: active, Parent: tc.id, SplitAtHLC: 77}
			if !ch[0].Equal(wantL) || !ch[1].Equal(wantR) {
				t.Fatalf("children %v %v, want %v %v", ch[0], ch[1], wantL, wantR)
			}
			if next.Version != 2 || next.NextID != 5 || len(next.Routes) != 3 {
				t.Fatalf("next: version %d next id %d, %d routes", next.Version, next.NextID, len(next.Routes))
			}
			if _, live := next.Route(tc.id); live {
				t.Fatal("the parent is still live")
			}
			if err := next.Check(); err != nil {
				t.Fatal(err)
			}
			if next.Hash() == tc.cat.Hash() {
				t.Fatal("the hash did not change")
			}
		})
	}
}

func TestMergeRules(t *testing.T) {
	base, _ := Initial([][]byte{[]byte("f"), []byte("m")}, 1) // r1 ["", f), r2 [f, m), r3 [m, +inf)
	r := func(id uint64, start, end string, group uint64, st api.RouteState) Route {
		var e []byte
		if end != "" {
			e = []byte(end)
		}
		return Route{ID: id, Start: []byte(start), End: e, Group: group, State: st}
	}
	groups := newCatalog(1, 4, []Route{r(1, "", "f", 1, active), r(2, "f", "m", 2, active), r(3, "m", "", 1, active)})
	fenced := newCatalog(1, 4, []Route{r(1, "", "f", 1, active), r(2, "f", "m", 1, api.RouteState_ROUTE_STATE_WRITE_FENCED), r(3, "m", "", 1, active)})
	for _, tc := range []struct {
		name        string
		cat         *Catalog
		left, right uint64
		want        Code
	}{
		{"adjacent", base, 1, 2, OK},
		{"adjacent, the right one unbounded", base, 2, 3, OK},
		{"same route", base, 2, 2, InvalidArgument},
		{"unknown left", base, 9, 2, RouteNotFound},
		{"unknown right", base, 2, 9, RouteNotFound},
		{"right before left", base, 2, 1, NotAdjacent},
		{"not neighbours", base, 1, 3, NotAdjacent},
		{"different groups", groups, 1, 2, DifferentGroups},
		{"not active", fenced, 2, 3, MergeRouteNotActive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, merged, code := tc.cat.Merge(tc.left, tc.right, 77)
			if code != tc.want {
				t.Fatalf("Merge: %s, want %s", code, tc.want)
			}
			if code != OK {
				if next != nil {
					t.Fatal("a refused merge returned a catalog")
				}
				return
			}
			l, _ := tc.cat.Route(tc.left)
			rr, _ := tc.cat.Route(tc.right)
			want := Route{ID: 4, Start: l.Start, End: rr.End, Group: 1, State: active, MergedLeft: tc.left, MergedRight: tc.right, MergedAtHLC: 77}
			if !merged.Equal(want) {
				t.Fatalf("merged %+v, want %+v", merged, want)
			}
			if next.Version != 2 || next.NextID != 5 || len(next.Routes) != 2 {
				t.Fatalf("next: version %d next id %d, %d routes", next.Version, next.NextID, len(next.Routes))
			}
			if err := next.Check(); err != nil {
				t.Fatal(err)
			}
			if err := CheckTransition(tc.cat, next); err != nil {
				t.Fatal(err)
			}
			// The merged route splits again (at the old boundary too).
			if _, _, code := next.Split(4, l.End, 78, false); code != OK {
				t.Fatalf("split of the merged route at the old boundary: %s", code)
			}
		})
	}
}

func TestCheckFindsEveryViolation(t *testing.T) {
	r := func(id uint64, start, end string) Route {
		var e []byte
		if end != "" {
			e = []byte(end)
		}
		return Route{ID: id, Start: []byte(start), End: e, Group: 1, State: active}
	}
	for _, tc := range []struct {
		name   string
		routes []Route
		next   uint64
	}{
		{"no routes", nil, 5},
		{"first route does not start at the empty key", []Route{r(1, "a", "")}, 5},
		{"last route bounded", []Route{r(1, "", "m")}, 5},
		{"gap", []Route{r(1, "", "c"), r(2, "d", "")}, 5},
		{"overlap", []Route{r(1, "", "d"), r(2, "c", "")}, 5},
		{"empty route", []Route{r(1, "", "c"), r(2, "c", "c"), r(3, "c", "")}, 5},
		{"duplicate id", []Route{r(1, "", "c"), r(1, "c", "")}, 5},
		{"id at next id", []Route{r(1, "", "c"), r(5, "c", "")}, 5},
		{"id zero", []Route{r(0, "", "c"), r(2, "c", "")}, 5},
		{"unbounded route not last", []Route{r(1, "", ""), r(2, "c", "")}, 5},
		{"bad state", []Route{{ID: 1, Group: 1}}, 5},
		{"boundary too long", []Route{r(1, "", strings.Repeat("x", MaxBoundaryLen+1)), r(2, strings.Repeat("x", MaxBoundaryLen+1), "")}, 5},
		{"merged without an HLC", []Route{{ID: 4, Group: 1, State: active, MergedLeft: 1, MergedRight: 2}}, 5},
		{"merged from one parent twice", []Route{{ID: 4, Group: 1, State: active, MergedLeft: 1, MergedRight: 1, MergedAtHLC: 9}}, 5},
		{"merged from a younger route", []Route{{ID: 3, Group: 1, State: active, MergedLeft: 1, MergedRight: 4, MergedAtHLC: 9}}, 5},
		{"merged and split", []Route{{ID: 4, Group: 1, State: active, MergedLeft: 1, MergedRight: 2, MergedAtHLC: 9, Parent: 3, SplitAtHLC: 9}}, 5},
		{"merged from a live route", []Route{r(1, "", "c"), {ID: 4, Start: []byte("c"), Group: 1, State: active, MergedLeft: 1, MergedRight: 2, MergedAtHLC: 9}}, 5},
		{"first route's start marked", []Route{{ID: 1, Group: 1, State: active, OperatorStart: true}}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := newCatalog(3, tc.next, tc.routes).Check(); !errors.Is(err, ErrInvariant) {
				t.Fatalf("Check: %v, want ErrInvariant", err)
			}
		})
	}
	if err := newCatalog(0, 2, []Route{r(1, "", "")}).Check(); !errors.Is(err, ErrInvariant) {
		t.Fatalf("version 0: %v", err)
	}
}

func TestHashCoversEveryField(t *testing.T) {
	base := Route{ID: 3, Start: []byte("a"), End: []byte("b"), Group: 1, State: active, Parent: 1, SplitAtHLC: 9}
	h := HashRoutes([]Route{base})
	for name, mut := range map[string]func(*Route){
		"id": func(r *Route) { r.ID++ }, "start": func(r *Route) { r.Start = []byte("A") }, "end": func(r *Route) { r.End = []byte("c") },
		"group": func(r *Route) { r.Group++ }, "state": func(r *Route) { r.State++ }, "parent": func(r *Route) { r.Parent++ },
		"split_at_hlc":     func(r *Route) { r.SplitAtHLC++ },
		"merged_from_left": func(r *Route) { r.MergedLeft++ }, "merged_from_right": func(r *Route) { r.MergedRight++ },
		"merged_at_hlc":  func(r *Route) { r.MergedAtHLC++ },
		"operator_start": func(r *Route) { r.OperatorStart = true },
		// Moving a byte between start and end must not collide.
		"boundary shift": func(r *Route) { r.Start, r.End = []byte("ab"), nil },
	} {
		r := base
		mut(&r)
		if HashRoutes([]Route{r}) == h {
			t.Errorf("changing %s kept the hash", name)
		}
	}
	if HashRoutes([]Route{base}) != h {
		t.Error("hash not deterministic")
	}
}

// The model is written independently of package catalog; on any sequence
// of splits and merges the two must agree route for route, refusal for
// refusal (a differential test: a disagreement is a bug in one of them).
func TestChangesAgreeWithTheCatalogPackage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var splits [][]byte
		for _, k := range []string{"b", "d"} {
			if rapid.Bool().Draw(t, "initial split "+k) {
				splits = append(splits, []byte(k))
			}
		}
		m, _ := Initial(splits, 1)
		c, err := catalog.New(splits, 1)
		if err != nil {
			t.Fatal(err)
		}
		// A catalog of cluster version 3 records who placed each boundary:
		// from its bootstrap (step 0) or from a raise after some changes.
		n := rapid.IntRange(20, 60).Draw(t, "steps")
		pinAt := rapid.IntRange(-1, n-1).Draw(t, "pin at step") // -1: never
		pins := false
		for i := range n {
			if i == pinAt {
				pins = true
				m, _ = m.MarkAllStarts()
				if c, _, err = c.MarkAllStarts(); err != nil {
					t.Fatal(err)
				}
			}
			routes := m.Routes
			pick := func(label string) uint64 {
				id := routes[rapid.IntRange(0, len(routes)-1).Draw(t, label)].ID
				if rapid.IntRange(0, 9).Draw(t, label+" unknown") == 0 {
					id += 1000
				}
				return id
			}
			hlc := uint64(i + 1)
			var (
				next  *Catalog
				code  Code
				cnext *catalog.Catalog
				cerr  error
				what  string
			)
			if rapid.Bool().Draw(t, "merge") {
				left := pick("left")
				right := left + 1 // often not the neighbour: ids are not in key order
				if pos := slices.IndexFunc(routes, func(r Route) bool { return r.ID == left }); pos >= 0 && pos+1 < len(routes) && rapid.Bool().Draw(t, "neighbour") {
					right = routes[pos+1].ID
				}
				what = fmt.Sprintf("merge r%d r%d", left, right)
				next, _, code = m.Merge(left, right, hlc)
				cnext, _, cerr = c.Merge(left, right, hlc)
			} else {
				id := pick("route")
				k := rapid.SliceOfN(rapid.ByteRange('a', 'e'), 0, 4).Draw(t, "key")
				what = fmt.Sprintf("split r%d at %q", id, k)
				by := rapid.Bool().Draw(t, "by operator")
				placed := catalog.PlacedByRule
				if by && pins {
					placed = catalog.PlacedByOperator
				}
				what += fmt.Sprintf(" (by operator %v)", by)
				next, _, code = m.Split(id, k, hlc, by)
				cnext, _, cerr = c.SplitPlaced(placed, id, k, hlc)
			}
			if (code == OK) != (cerr == nil) {
				t.Fatalf("%s: model %s, catalog %v", what, code, cerr)
			}
			if code != OK {
				continue
			}
			if err := CheckTransition(m, next); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			m, c = next, cnext
			var theirs []*api.RouteDescriptor
			c.Ascend(func(r *catalog.RouteDescriptor) bool { theirs = append(theirs, r.ToProto()); return true })
			if HashAPIRoutes(theirs) != m.Hash() || c.Version() != m.Version || c.NextRouteID() != m.NextID {
				t.Fatalf("after %s: model v%d %v, catalog v%d %v", what, m.Version, m.Routes, c.Version(), theirs)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
