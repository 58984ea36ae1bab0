package catalog

import (
	"errors"
	"testing"
)

// marks lists each route's OperatorStart in key order.
func marks(c *Catalog) []bool {
	var out []bool
	c.Ascend(func(r *RouteDescriptor) bool { out = append(out, r.OperatorStart); return true })
	return out
}

func sameMarks(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The mark follows the boundary through every transition.
func TestSplitPlacement(t *testing.T) {
	base := mergeBase(t) // r1 ["", f) r2 [f, m) r3 [m, t) r4 [t, +inf)
	marked, _, err := base.MarkAllStarts()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		cat       *Catalog
		route     uint64
		key       string
		by        Placement
		wantLeft  bool
		wantRight bool
	}{
		{"automatic split of an unmarked route", base, 2, "h", PlacedByRule, false, false},
		{"automatic split of a marked route: the left child keeps the start's mark", marked, 2, "h", PlacedByRule, true, false},
		{"operator split of an unmarked route", base, 2, "h", PlacedByOperator, false, true},
		{"operator split of a marked route", marked, 2, "h", PlacedByOperator, true, true},
		{"automatic split of the first route", marked, 1, "c", PlacedByRule, false, false},
		{"operator split of the first route", marked, 1, "c", PlacedByOperator, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := marks(tt.cat)
			next, ch, err := tt.cat.SplitPlaced(tt.by, tt.route, []byte(tt.key), 9)
			if err != nil {
				t.Fatal(err)
			}
			if ch[0].OperatorStart != tt.wantLeft || ch[1].OperatorStart != tt.wantRight {
				t.Fatalf("children marked %v, %v; want %v, %v", ch[0].OperatorStart, ch[1].OperatorStart, tt.wantLeft, tt.wantRight)
			}
			if err := next.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
			if !sameMarks(marks(tt.cat), before) {
				t.Fatal("the split changed the marks of the catalog it came from")
			}
		})
	}
	// Split without a placement is an automatic split.
	if _, ch, err := marked.Split(2, []byte("h"), 9); err != nil || !ch[0].OperatorStart || ch[1].OperatorStart {
		t.Fatalf("Split: %v %+v %+v", err, ch[0], ch[1])
	}
}

// A two-step isolation [H, H·0x00) of an operator-started route: the
// middle child's boundaries are both automatic, the outer ones keep theirs.
func TestIsolationMiddleChildIsAutomaticOnBothSides(t *testing.T) {
	c, err := New([][]byte{[]byte("f"), []byte("m")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c, _, err = c.MarkAllStarts(); err != nil {
		t.Fatal(err)
	}
	c, ch1, err := c.Split(2, []byte("h"), 10)
	if err != nil {
		t.Fatal(err)
	}
	c, ch2, err := c.Split(ch1[1].ID, []byte("h\x00"), 11)
	if err != nil {
		t.Fatal(err)
	}
	middle, after := ch2[0], ch2[1]
	if string(middle.Start) != "h" || string(middle.End) != "h\x00" || middle.OperatorStart || after.OperatorStart {
		t.Fatalf("middle %v marked %v, right %v marked %v", middle, middle.OperatorStart, after, after.OperatorStart)
	}
	if !ch1[0].OperatorStart {
		t.Fatal("the left piece lost the initial boundary's mark")
	}
	// The end of the right piece is the initial boundary "m", still marked.
	if r := c.Lookup([]byte("m")); !r.OperatorStart || r.ID != 3 {
		t.Fatalf("the route at m: %v marked %v", r, r.OperatorStart)
	}
}

// A merge keeps the left parent's mark, whatever the right one's: the
// merged route's start is the left's.
func TestMergeKeepsTheLeftMark(t *testing.T) {
	for _, tt := range []struct{ left, right bool }{{false, false}, {false, true}, {true, false}, {true, true}} {
		c := mergeBase(t)
		// r2 and r3 marked as the case says (edited copies: marking by
		// transitions would change the ids).
		rs := routesOf(c)
		cp := make([]*RouteDescriptor, len(rs))
		for i, r := range rs {
			x := *r
			cp[i] = &x
		}
		cp[1].OperatorStart, cp[2].OperatorStart = tt.left, tt.right
		c, err := build(1, 5, cp)
		if err != nil {
			t.Fatal(err)
		}
		next, merged, err := c.Merge(2, 3, 50)
		if err != nil {
			t.Fatal(err)
		}
		if merged.OperatorStart != tt.left {
			t.Errorf("left %v right %v: merged route marked %v", tt.left, tt.right, merged.OperatorStart)
		}
		if err := next.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	// Merging into the first route: never marked.
	c, _, err := mergeBase(t).MarkAllStarts()
	if err != nil {
		t.Fatal(err)
	}
	next, merged, err := c.Merge(1, 2, 50)
	if err != nil || merged.OperatorStart || next.CheckInvariants() != nil {
		t.Fatalf("merge into the first route: %v, marked %v", err, merged.OperatorStart)
	}
}

func TestMarkAllStarts(t *testing.T) {
	c := mergeBase(t)
	if got := marks(c); !sameMarks(got, []bool{false, false, false, false}) {
		t.Fatalf("New marks %v: a catalog is unmarked until the caller marks it", got)
	}
	m, n, err := c.MarkAllStarts()
	if err != nil {
		t.Fatal(err)
	}
	if got := marks(m); !sameMarks(got, []bool{false, true, true, true}) || n != 3 {
		t.Fatalf("marked %v (%d), want every start but the first", got, n)
	}
	if m.Version() != c.Version() || m.NextRouteID() != c.NextRouteID() || !sameMarks(marks(c), []bool{false, false, false, false}) {
		t.Fatal("marking changed the version, the next id or the catalog it came from")
	}
	for _, k := range []string{"", "f", "g", "t", "z"} {
		if a, b := c.Lookup([]byte(k)), m.Lookup([]byte(k)); a.ID != b.ID {
			t.Fatalf("Lookup(%q): %v before, %v after", k, a, b)
		}
	}
	if again, n, err := m.MarkAllStarts(); err != nil || again != m || n != 0 {
		t.Fatalf("marking twice: %v, %d marked, same catalog %v", err, n, again == m)
	}

	// Every boundary, whoever placed it: r2's split key and the left
	// child's inherited start, and the merged route's start.
	c, _, err = c.Split(2, []byte("h"), 10)
	if err != nil {
		t.Fatal(err)
	}
	c, _, err = c.Merge(3, 4, 11)
	if err != nil {
		t.Fatal(err)
	}
	// r1 ["", f), r5 [f, h), r6 [h, m), r7 [m, +inf).
	m, n, err = c.MarkAllStarts()
	if err != nil || n != 3 || !sameMarks(marks(m), []bool{false, true, true, true}) {
		t.Fatalf("after a split and a merge: marks %v (%d, %v), want every start but the first", marks(m), n, err)
	}
	// A catalog partly marked already: only the unmarked starts count.
	partly, _, err := m.Split(6, []byte("k"), 12)
	if err != nil {
		t.Fatal(err)
	}
	if m, n, err = partly.MarkAllStarts(); err != nil || n != 1 || !sameMarks(marks(m), []bool{false, true, true, true, true}) {
		t.Fatalf("after an automatic split of a marked catalog: marks %v (%d, %v), want the new start marked alone", marks(m), n, err)
	}
}

// The mark is part of a route: equality, the proto form, the encoding.
func TestOperatorStartRoundTrip(t *testing.T) {
	c, _, err := mergeBase(t).MarkAllStarts()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(c.Encode())
	if err != nil || !Equal(back, c) || !sameMarks(marks(back), marks(c)) {
		t.Fatalf("round trip: %v, marks %v", err, marks(back))
	}
	if Equal(c, mergeBase(t)) {
		t.Fatal("Equal ignores the mark")
	}
	r, _ := c.Route(3)
	if p := r.ToProto(); !p.GetOperatorStart() || !RouteFromProto(p).OperatorStart {
		t.Fatalf("proto %v", p)
	}
	// A snapshot whose first route is marked is refused.
	p := c.ToProto()
	p.Routes[0].OperatorStart = true
	if _, err := FromProto(p); !errors.Is(err, ErrInvariant) {
		t.Fatalf("a marked first route: %v", err)
	}
}
