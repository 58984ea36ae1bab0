package catalog

import (
	"errors"
	"testing"
)

// A move's transitions change one route in place, each a new version;
// the invariants hold after each, and every step from the wrong state, for
// another op or to the route's own group is refused with c unchanged.
func TestMoveTransitions(t *testing.T) {
	c, err := New([][]byte{[]byte("m")}, 1)
	if err != nil {
		t.Fatal(err)
	}
	step := func(c *Catalog, name string, next *Catalog, r *RouteDescriptor, err error, state RouteState, group uint64) *Catalog {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := next.CheckInvariants(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, _ := next.Route(2)
		if next.Version() != c.Version()+1 || next.NextRouteID() != c.NextRouteID() || got != r || r.State != state || r.GroupID != group ||
			string(r.Start) != "m" || r.ID != 2 {
			t.Fatalf("%s: version %d route %v", name, next.Version(), r)
		}
		return next
	}
	for _, tc := range []struct {
		name string
		try  func(*Catalog) error
		want error
	}{
		{"begin to the own group", func(c *Catalog) error { _, _, err := c.BeginMove(2, 1, 5); return err }, ErrMoveSameGroup},
		{"begin an unknown route", func(c *Catalog) error { _, _, err := c.BeginMove(9, 2, 5); return err }, ErrRouteNotFound},
		{"fence a route not moving", func(c *Catalog) error { _, _, err := c.FenceMove(2, 5); return err }, ErrMoveState},
		{"abort a route not moving", func(c *Catalog) error { _, _, err := c.AbortMove(2, 5); return err }, ErrMoveState},
	} {
		if err := tc.try(c); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	next, r, err := c.BeginMove(2, 3, 5)
	begun := step(c, "begin", next, r, err, StateMigratingSource, 1)
	if m := r.Moving(); m == nil || *m != (MoveInfo{TargetGroupID: 3, OpID: 5}) {
		t.Fatalf("begun route records %v", m)
	}
	if _, _, err := begun.Split(2, []byte("q"), 9); !errors.Is(err, ErrRouteNotActive) {
		t.Fatalf("split of a moving route: %v", err)
	}
	if _, _, err := begun.BeginMove(2, 4, 6); !errors.Is(err, ErrRouteNotActive) {
		t.Fatalf("a second move of a moving route: %v", err)
	}
	for name, try := range map[string]func() error{
		"commit before the fence": func() error { _, _, err := begun.CommitMove(2, 5); return err },
		"fence for another op":    func() error { _, _, err := begun.FenceMove(2, 6); return err },
	} {
		if err := try(); !errors.Is(err, ErrMoveState) {
			t.Errorf("%s: %v", name, err)
		}
	}
	next, r, err = begun.FenceMove(2, 5)
	fenced := step(begun, "fence", next, r, err, StateWriteFenced, 1)
	next, r, err = fenced.CommitMove(2, 5)
	step(fenced, "commit", next, r, err, StateActive, 3)
	if r.Moving() != nil {
		t.Fatalf("committed route still records %v", r.Moving())
	}
	if old, _ := c.Route(2); old.State != StateActive || old.GroupID != 1 || old.Moving() != nil {
		t.Fatalf("the first catalog changed: %v", old)
	}
	// Aborts from either moving state return the route to its source.
	for name, from := range map[string]*Catalog{"begun": begun, "fenced": fenced} {
		next, r, err := from.AbortMove(2, 5)
		step(from, "abort when "+name, next, r, err, StateActive, 1)
	}
}

// A move recorded on a route that is not moving breaks the invariants.
func TestMoveInvariants(t *testing.T) {
	mk := func(state RouteState, move *MoveInfo) error {
		r := &RouteDescriptor{ID: 1, GroupID: 1, State: state}
		r.SetMoving(move)
		_, err := build(1, 2, []*RouteDescriptor{r})
		return err
	}
	if err := mk(StateMigratingSource, &MoveInfo{TargetGroupID: 2, OpID: 3}); err != nil {
		t.Fatalf("a moving route refused: %v", err)
	}
	for name, err := range map[string]error{
		"active with a move":   mk(StateActive, &MoveInfo{TargetGroupID: 2, OpID: 3}),
		"a move without an op": mk(StateWriteFenced, &MoveInfo{TargetGroupID: 2}),
		"a move to its group":  mk(StateWriteFenced, &MoveInfo{TargetGroupID: 1, OpID: 3}),
	} {
		if !errors.Is(err, ErrInvariant) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
