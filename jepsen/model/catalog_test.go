package model

import (
	"bytes"
	"errors"
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
			next, ch, code := tc.cat.Split(tc.id, []byte(tc.key), 77)
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
		"split_at_hlc": func(r *Route) { r.SplitAtHLC++ },
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
// of splits the two must agree route for route (a differential test: a
// disagreement is a bug in one of them).
func TestSplitAgreesWithTheCatalogPackage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m, _ := Initial(nil, 1)
		c, err := catalog.New(nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		keys := rapid.SliceOfN(rapid.SliceOfN(rapid.ByteRange('a', 'e'), 0, 4), 1, 40).Draw(t, "keys")
		for i, k := range keys {
			routes := m.Routes
			id := routes[rapid.IntRange(0, len(routes)-1).Draw(t, "route")].ID
			if rapid.Bool().Draw(t, "unknown route") {
				id += 1000
			}
			hlc := uint64(i + 1)
			next, _, code := m.Split(id, k, hlc)
			cnext, _, cerr := c.Split(id, k, hlc)
			if (code == OK) != (cerr == nil) {
				t.Fatalf("split r%d at %q: model %s, catalog %v", id, k, code, cerr)
			}
			if code != OK {
				continue
			}
			m, c = next, cnext
			var theirs []*api.RouteDescriptor
			c.Ascend(func(r *catalog.RouteDescriptor) bool { theirs = append(theirs, r.ToProto()); return true })
			if HashAPIRoutes(theirs) != m.Hash() || c.Version() != m.Version || c.NextRouteID() != m.NextID {
				t.Fatalf("after split r%d at %q: model v%d %v, catalog v%d %v", id, k, m.Version, m.Routes, c.Version(), theirs)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
		}
	})
}
