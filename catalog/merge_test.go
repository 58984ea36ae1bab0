package catalog

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// mergeBase is r1 ["", "f"), r2 ["f", "m"), r3 ["m", "t"), r4 ["t", +inf),
// all ACTIVE in group 1, at version 1.
func mergeBase(t *testing.T) *Catalog {
	t.Helper()
	c, err := New([][]byte{[]byte("f"), []byte("m"), []byte("t")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestMerge(t *testing.T) {
	c := mergeBase(t)
	next, merged, err := c.Merge(2, 3, 77)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	want := &RouteDescriptor{ID: 5, Start: []byte("f"), End: []byte("t"), GroupID: 1, State: StateActive}
	want.SetMergedFrom(&MergeInfo{Left: 2, Right: 3, AtHLC: 77})
	if !routeEqual(merged, want) || !merged.Merged() {
		t.Fatalf("merged %+v, want %+v", merged, want)
	}
	if next.Version() != 2 || next.NextRouteID() != 6 || next.Len() != 3 {
		t.Fatalf("version %d next id %d len %d", next.Version(), next.NextRouteID(), next.Len())
	}
	for _, id := range []uint64{2, 3} {
		if _, ok := next.Route(id); ok {
			t.Fatalf("parent %d still live", id)
		}
	}
	for _, k := range []string{"f", "g", "m", "s", "s\xff"} {
		if got := next.Lookup([]byte(k)); got != merged {
			t.Fatalf("Lookup(%q) = %v", k, got)
		}
	}
	if next.Lookup([]byte("t")).ID != 4 || next.Lookup([]byte("e")).ID != 1 {
		t.Fatal("neighbours moved")
	}
	// The old version is untouched; the merged route splits again like any
	// other, and its children name it as their split parent.
	if c.Len() != 4 || c.Version() != 1 {
		t.Fatal("old version changed")
	}
	again, ch, err := next.Split(5, []byte("h"), 78)
	if err != nil || ch[0].ParentID != 5 || ch[0].Merged() || again.CheckInvariants() != nil {
		t.Fatalf("split of a merged route: %v %+v", err, ch)
	}
	// Merging a merged route with its neighbour, and the whole space.
	c2, m2, err := next.Merge(1, 5, 79)
	if err != nil || m2.MergedFrom().Left != 1 || m2.MergedFrom().Right != 5 || m2.ID != 6 {
		t.Fatalf("merge of a merged route: %v %+v", err, m2)
	}
	c3, m3, err := c2.Merge(6, 4, 80)
	if err != nil || c3.Len() != 1 || len(m3.Start) != 0 || !m3.Unbounded() || c3.CheckInvariants() != nil {
		t.Fatalf("merge into one route: %v %+v", err, m3)
	}
	again3, err := Decode(c3.Encode())
	if err != nil || !Equal(again3, c3) {
		t.Fatalf("round trip of a merged catalog: %v", err)
	}
}

func TestMergeRefusals(t *testing.T) {
	c := mergeBase(t)
	fenced, err := build(1, 5, func() []*RouteDescriptor {
		rs := routesOf(c)
		out := make([]*RouteDescriptor, len(rs))
		for i, r := range rs {
			cp := *r
			out[i] = &cp
		}
		out[2].State = StateWriteFenced
		out[3].GroupID = 9
		return out
	}())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name        string
		cat         *Catalog
		left, right uint64
		want        error
		msg         string
	}{
		{"same route", c, 2, 2, ErrMergeSameRoute, "route 2"},
		{"unknown left", c, 9, 2, ErrRouteNotFound, "route 9 (left)"},
		{"unknown right", c, 2, 9, ErrRouteNotFound, "route 9 (right)"},
		{"route 0", c, 0, 1, ErrRouteNotFound, "route 0"},
		{"not adjacent", c, 1, 3, ErrMergeNotAdjacent, "does not end where"},
		{"swapped", c, 3, 2, ErrMergeNotAdjacent, "give the left route first"},
		{"last route first", c, 4, 1, ErrMergeNotAdjacent, "does not end where"},
		{"different group", fenced, 3, 4, ErrMergeDifferentGroup, "group 9"},
		{"right not active", fenced, 2, 3, ErrRouteNotActive, "WRITE_FENCED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next, merged, err := tt.cat.Merge(tt.left, tt.right, 5)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want %v mentioning %q", err, tt.want, tt.msg)
			}
			if next != nil || merged != nil || tt.cat.Version() != 1 || tt.cat.Len() != 4 {
				t.Fatal("a refused merge produced a catalog or changed the base")
			}
			// Each refusal is exactly one of the sentinels.
			n := 0
			for _, s := range []error{ErrMergeSameRoute, ErrRouteNotFound, ErrMergeNotAdjacent, ErrMergeDifferentGroup, ErrRouteNotActive} {
				if errors.Is(err, s) {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("%v matches %d sentinels", err, n)
			}
		})
	}
	if _, _, err := c.Merge(1, 2, 0); !errors.Is(err, ErrInvariant) {
		t.Fatalf("merge at HLC 0: %v", err)
	}
}

func TestMergeNotActiveEitherSide(t *testing.T) {
	for _, side := range []int{0, 1} {
		rs := routesOf(mergeBase(t))
		cp := make([]*RouteDescriptor, len(rs))
		for i, r := range rs {
			x := *r
			cp[i] = &x
		}
		cp[1+side].State = StateMigratingTarget
		c, err := build(1, 5, cp)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := c.Merge(2, 3, 5); !errors.Is(err, ErrRouteNotActive) || !strings.Contains(err.Error(), "MIGRATING_TARGET") {
			t.Fatalf("side %d: %v", side, err)
		}
	}
}

func TestMergeCAS(t *testing.T) {
	c := mergeBase(t)
	if _, _, err := c.MergeCAS(2, 1, 2, 5); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("stale version: %v", err)
	}
	// The version is compared before the routes.
	if _, _, err := c.MergeCAS(2, 1, 1, 5); !errors.Is(err, ErrVersionMismatch) {
		t.Fatalf("stale version and a bad merge: %v", err)
	}
	next, _, err := c.MergeCAS(1, 1, 2, 5)
	if err != nil || next.Version() != 2 {
		t.Fatalf("CAS at the current version: %v", err)
	}
}

func TestMergeDelta(t *testing.T) {
	c := mergeBase(t)
	next, merged, err := c.Merge(1, 2, 42)
	if err != nil {
		t.Fatal(err)
	}
	p := MergeDelta(next.Version(), 1, 2, merged, 42).ToProto()
	if p.GetVersion() != 2 || len(p.GetRemovedRouteIds()) != 2 || p.GetRemovedRouteIds()[0] != 1 || p.GetRemovedRouteIds()[1] != 2 ||
		len(p.GetAdded()) != 1 || p.GetAdded()[0].GetMergedFromLeft() != 1 || p.GetAdded()[0].GetMergedFromRight() != 2 ||
		p.GetAdded()[0].GetMergedAtHlc() != 42 || p.GetCommitHlc() != 42 {
		t.Fatalf("delta %v", p)
	}
	if back := RouteFromProto(p.GetAdded()[0]); !routeEqual(back, merged) {
		t.Fatalf("proto round trip %+v, want %+v", back, merged)
	}
}

// A decoded catalog's merge lineage is checked like everything else.
func TestMergeLineageInvariants(t *testing.T) {
	mk := func(id uint64, s, e string, edit func(r *RouteDescriptor)) *RouteDescriptor {
		r := &RouteDescriptor{ID: id, Start: []byte(s), State: StateActive}
		if e != "" {
			r.End = []byte(e)
		}
		if edit != nil {
			edit(r)
		}
		return r
	}
	merged := func(l, r, at uint64) func(*RouteDescriptor) {
		return func(x *RouteDescriptor) { x.SetMergedFrom(&MergeInfo{Left: l, Right: r, AtHLC: at}) }
	}
	ok := []*RouteDescriptor{mk(1, "", "b", nil), mk(5, "b", "", merged(2, 3, 9))}
	if _, err := build(2, 6, ok); err != nil {
		t.Fatalf("valid merged route refused: %v", err)
	}
	for name, routes := range map[string][]*RouteDescriptor{
		"parents without hlc": {mk(1, "", "b", nil), mk(5, "b", "", merged(2, 3, 0))},
		"hlc without parents": {mk(1, "", "b", nil), mk(5, "b", "", merged(0, 0, 9))},
		"one parent":          {mk(1, "", "b", nil), mk(5, "b", "", merged(2, 0, 9))},
		"same parent twice":   {mk(1, "", "b", nil), mk(5, "b", "", merged(2, 2, 9))},
		"parent not older":    {mk(1, "", "b", nil), mk(5, "b", "", merged(2, 5, 9))},
		"live parent":         {mk(1, "", "b", nil), mk(5, "b", "", merged(1, 3, 9))},
		"also a split child": {mk(1, "", "b", nil), mk(5, "b", "", func(r *RouteDescriptor) {
			merged(2, 3, 9)(r)
			r.ParentID, r.SplitAtHLC = 4, 8
		})},
	} {
		if _, err := build(2, 6, routes); !errors.Is(err, ErrInvariant) {
			t.Errorf("%s: err = %v, want ErrInvariant", name, err)
		}
	}
}

// applyDelta is the watcher's view: the model routes with d applied.
func applyDelta(t *rapid.T, routes []*RouteDescriptor, d Delta) []*RouteDescriptor {
	removed := map[uint64]bool{}
	for _, id := range d.Removed {
		removed[id] = true
	}
	var out []*RouteDescriptor
	for _, r := range routes {
		if !removed[r.ID] {
			out = append(out, r)
		}
	}
	if len(out) != len(routes)-len(d.Removed) {
		t.Fatalf("delta %d removes routes that are not live", d.Version)
	}
	out = append(out, d.Added...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && bytes.Compare(out[j-1].Start, out[j].Start) > 0; j-- {
			out[j-1], out[j] = out[j], out[j-1]
		}
	}
	return out
}

func sameRoutes(t *rapid.T, what string, got, want []*RouteDescriptor) {
	if len(got) != len(want) {
		t.Fatalf("%s: %d routes, model %d", what, len(got), len(want))
	}
	for i := range got {
		if !routeEqual(got[i], want[i]) {
			t.Fatalf("%s: route %d is %v, model %v", what, i, got[i], want[i])
		}
	}
}

// TestSplitMergeSequenceProperty runs random splits and merges (valid and
// not) against the naive model, a sorted slice: every step agrees on
// validity and result, keeps every invariant (index structure included),
// moves the version by exactly one and the next id by the routes it made,
// and leaves older versions intact; lookups agree with the model; the
// delta history replayed from any kept version rebuilds the catalog.
// Operator marks (placement.go) are checked against a second naive model,
// the set of boundaries an operator placed (the initial keys when marked,
// each operator split's key) that no merge has removed since: a route's
// start is marked exactly when it is in the set.
func TestSplitMergeSequenceProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		splits := rapid.SliceOfNDistinct(keyGen(6).Filter(func(k []byte) bool { return len(k) > 0 }), 0, 40, func(k []byte) string { return string(k) }).Draw(t, "initial")
		sortKeys(splits)
		c, err := New(splits, 7)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		operator := map[string]bool{}
		if rapid.Bool().Draw(t, "mark-initial") {
			if c, _, err = c.MarkAllStarts(); err != nil {
				t.Fatalf("MarkAllStarts: %v", err)
			}
			for _, k := range splits {
				operator[string(k)] = true
			}
		}
		m := &model{routes: routesOf(c)}
		checkMarks := func(what string) {
			for _, r := range routesOf(c) {
				if r.OperatorStart != operator[string(r.Start)] {
					t.Fatalf("%s: route %v marked %v, the model says %v", what, r, r.OperatorStart, operator[string(r.Start)])
				}
			}
		}
		checkMarks("initial")
		hist := NewHistory(rapid.IntRange(1, 40).Draw(t, "history"), c.Version())
		type kept struct {
			c      *Catalog
			routes []*RouteDescriptor
		}
		var olds []kept
		hlc := uint64(1000)
		for range rapid.IntRange(20, 150).Draw(t, "steps") {
			hlc++
			var (
				next  *Catalog
				delta Delta
				nr    []*RouteDescriptor
			)
			if rapid.IntRange(0, 2).Draw(t, "op") == 0 {
				// Split: mostly live routes at keys from the alphabet.
				id := m.routes[rapid.IntRange(0, len(m.routes)-1).Draw(t, "split-idx")].ID
				if rapid.IntRange(0, 6).Draw(t, "split-any") == 0 {
					id = rapid.Uint64Range(0, c.NextRouteID()+1).Draw(t, "split-any-id")
				}
				key := keyGen(8).Draw(t, "split-key")
				by := rapid.SampledFrom([]Placement{PlacedByRule, PlacedByOperator}).Draw(t, "split-by")
				n, ch, err := c.SplitPlaced(by, id, key, hlc)
				parent, live := c.Route(id)
				valid := live && parent.Contains(key) && !bytes.Equal(key, parent.Start)
				if valid != (err == nil) {
					t.Fatalf("split r%d at %q: valid=%v err=%v", id, key, valid, err)
				}
				if err != nil {
					continue
				}
				if n.NextRouteID() != c.NextRouteID()+2 {
					t.Fatalf("split moved next id %d -> %d", c.NextRouteID(), n.NextRouteID())
				}
				if ch[0].OperatorStart != parent.OperatorStart || ch[1].OperatorStart != (by == PlacedByOperator) {
					t.Fatalf("split of %v (marked %v) by %d: children marked %v, %v", parent, parent.OperatorStart, by,
						ch[0].OperatorStart, ch[1].OperatorStart)
				}
				operator[string(key)] = by == PlacedByOperator
				for _, r := range m.routes {
					if r.ID == id {
						nr = append(nr, ch[0], ch[1])
					} else {
						nr = append(nr, r)
					}
				}
				next, delta = n, SplitDelta(n.Version(), id, ch, hlc)
			} else {
				// Merge: mostly neighbours, sometimes any two ids.
				var l, r uint64
				if len(m.routes) > 1 && rapid.IntRange(0, 4).Draw(t, "merge-any") > 0 {
					i := rapid.IntRange(0, len(m.routes)-2).Draw(t, "merge-idx")
					l, r = m.routes[i].ID, m.routes[i+1].ID
				} else {
					l = rapid.Uint64Range(0, c.NextRouteID()).Draw(t, "merge-left")
					r = rapid.Uint64Range(0, c.NextRouteID()).Draw(t, "merge-right")
				}
				n, merged, err := c.Merge(l, r, hlc)
				li := -1
				for i, x := range m.routes {
					if x.ID == l {
						li = i
					}
				}
				valid := li >= 0 && li+1 < len(m.routes) && m.routes[li+1].ID == r
				if valid != (err == nil) {
					t.Fatalf("merge r%d r%d: valid=%v err=%v", l, r, valid, err)
				}
				if err != nil {
					continue
				}
				lr, rr := m.routes[li], m.routes[li+1]
				want := &RouteDescriptor{ID: c.NextRouteID(), Start: lr.Start, End: rr.End, GroupID: lr.GroupID, State: lr.State,
					OperatorStart: lr.OperatorStart}
				want.SetMergedFrom(&MergeInfo{Left: l, Right: r, AtHLC: hlc})
				if !routeEqual(merged, want) {
					t.Fatalf("merged %v, model %v", merged, want)
				}
				if n.NextRouteID() != c.NextRouteID()+1 {
					t.Fatalf("merge moved next id %d -> %d", c.NextRouteID(), n.NextRouteID())
				}
				nr = append(append(append(nr, m.routes[:li]...), merged), m.routes[li+2:]...)
				delete(operator, string(rr.Start)) // the boundary went
				next, delta = n, MergeDelta(n.Version(), l, r, merged, hlc)
			}
			if next.Version() != c.Version()+1 {
				t.Fatalf("version %d -> %d", c.Version(), next.Version())
			}
			if err := next.CheckInvariants(); err != nil {
				t.Fatalf("after step: %v", err)
			}
			if rapid.IntRange(0, 9).Draw(t, "keep") == 0 {
				olds = append(olds, kept{c, m.routes})
			}
			hist = hist.Append(delta)
			m.routes, c = nr, next
			sameRoutes(t, "after step", routesOf(c), m.routes)
			checkMarks("after step")
		}
		for range 50 {
			key := keyGen(10).Draw(t, "probe")
			if got, want := c.Lookup(key), m.lookup(key); got != want {
				t.Fatalf("Lookup(%q) = %v, model %v", key, got, want)
			}
		}
		for i, o := range olds {
			if err := o.c.CheckInvariants(); err != nil {
				t.Fatalf("old version %d: %v", i, err)
			}
			sameRoutes(t, "old version", routesOf(o.c), o.routes)
			// A watcher at that version catches up from the history, or is
			// told to take a snapshot when it is older than the history.
			deltas, ok := hist.Since(o.c.Version())
			if !ok {
				if o.c.Version() >= hist.Base() {
					t.Fatalf("history refuses version %d above its base %d", o.c.Version(), hist.Base())
				}
				continue
			}
			rs := o.routes
			for _, d := range deltas {
				rs = applyDelta(t, rs, d)
			}
			sameRoutes(t, "history replay", rs, m.routes)
		}
		again, err := Decode(c.Encode())
		if err != nil || !Equal(c, again) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestManyMergesProperty drives the start index through many levels of
// deletes: a bulk-loaded catalog of thousands of routes merged down to a
// handful and split up again, interleaved, so leaves and inner nodes
// borrow, join and the root collapses. The structure check (every node
// but the root at least half full) runs along the way; lookups, ids and
// kept versions agree with the model.
func TestManyMergesProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(40, 4000).Draw(t, "routes")
		seed := rapid.Uint64().Draw(t, "seed")
		rng := rand.New(rand.NewPCG(seed, 2))
		splits := make([][]byte, 0, n-1)
		for i := 1; i < n; i++ {
			// Every third key shares an 8-byte prefix, for the tie path.
			if i%3 == 0 {
				splits = append(splits, []byte("sameprefix"+string(rune('0'+i%10))+strings.Repeat("x", i/10)))
			} else {
				splits = append(splits, []byte{byte(i >> 16), byte(i >> 8), byte(i)})
			}
		}
		sortKeys(splits)
		for i := len(splits) - 1; i > 0; i-- {
			if bytes.Equal(splits[i], splits[i-1]) {
				splits = append(splits[:i], splits[i+1:]...)
			}
		}
		c, err := New(splits, 1)
		if err != nil {
			t.Fatal(err)
		}
		m := &model{routes: routesOf(c)}
		var versions []*Catalog
		var snapshots [][]*RouteDescriptor
		steps := rapid.IntRange(n/2, 2*n).Draw(t, "steps")
		for i := range steps {
			// Shrink to a few routes in the first half, then mixed.
			mergeBias := 9
			if i > steps/2 {
				mergeBias = 5
			}
			if len(m.routes) > 1 && rng.IntN(10) < mergeBias {
				j := rng.IntN(len(m.routes) - 1)
				l, r := m.routes[j], m.routes[j+1]
				next, merged, err := c.Merge(l.ID, r.ID, uint64(i+1))
				if err != nil {
					t.Fatalf("merge r%d r%d: %v", l.ID, r.ID, err)
				}
				m.routes = append(append(append([]*RouteDescriptor(nil), m.routes[:j]...), merged), m.routes[j+2:]...)
				c = next
			} else {
				key := make([]byte, 1+rng.IntN(6))
				for k := range key {
					key[k] = byte(rng.Uint32())
				}
				r := c.Lookup(key)
				next, ch, err := c.Split(r.ID, key, uint64(i+1))
				if err != nil {
					continue // key at a boundary
				}
				var nr []*RouteDescriptor
				for _, x := range m.routes {
					if x.ID == r.ID {
						nr = append(nr, ch[0], ch[1])
					} else {
						nr = append(nr, x)
					}
				}
				m.routes, c = nr, next
			}
			if i%97 == 0 {
				if err := c.CheckInvariants(); err != nil {
					t.Fatalf("step %d (%d routes): %v", i, c.Len(), err)
				}
				versions = append(versions, c)
				snapshots = append(snapshots, m.routes)
			}
		}
		if err := c.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
		for i, v := range versions {
			got := routesOf(v)
			if len(got) != len(snapshots[i]) {
				t.Fatalf("old version %d changed size", i)
			}
			for j := range got {
				if got[j] != snapshots[i][j] {
					t.Fatalf("old version %d changed at %d", i, j)
				}
			}
		}
		for _, r := range m.routes {
			if got, ok := c.Route(r.ID); !ok || got != r || c.Lookup(r.Start) != r {
				t.Fatalf("route %v: by id %v, by start %v", r, got, c.Lookup(r.Start))
			}
		}
		for range 200 {
			key := make([]byte, rng.IntN(12))
			for k := range key {
				key[k] = byte(rng.Uint32())
			}
			if got, want := c.Lookup(key), m.lookup(key); got != want {
				t.Fatalf("Lookup(%q) = %v, model %v", key, got, want)
			}
		}
	})
}
