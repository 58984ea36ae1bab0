package catalog

import (
	"bytes"
	"fmt"
)

// Catalog is an immutable catalog version. The zero value is not usable;
// build one with New or Decode. All methods are safe for concurrent use.
type Catalog struct {
	version uint64
	nextID  uint64
	starts  *startIndex
	ids     *idIndex
}

// InitialVersion is the version of a freshly bootstrapped catalog.
const InitialVersion = 1

// New builds the initial catalog: one route covering the whole key space, or
// len(splits)+1 routes when operator-given split keys are supplied (strictly
// increasing, non-empty, at most MaxBoundaryLen bytes). Route ids start at 1.
func New(splits [][]byte, groupID uint64) (*Catalog, error) {
	groups := make([]uint64, len(splits)+1)
	for i := range groups {
		groups[i] = groupID
	}
	return NewInGroups(splits, groups)
}

// NewInGroups is New with the group of each initial route given, in key
// order: len(groups) must be len(splits)+1.
func NewInGroups(splits [][]byte, groups []uint64) (*Catalog, error) {
	if len(groups) != len(splits)+1 {
		return nil, fmt.Errorf("%w: %d groups for %d routes", ErrInvalidSplits, len(groups), len(splits)+1)
	}
	for i, k := range splits {
		switch {
		case len(k) == 0:
			return nil, fmt.Errorf("%w: key %d is empty", ErrInvalidSplits, i)
		case len(k) > MaxBoundaryLen:
			return nil, fmt.Errorf("%w: key %d is %d bytes (max %d): %w", ErrInvalidSplits, i, len(k), MaxBoundaryLen, ErrKeyTooLarge)
		case i > 0 && bytes.Compare(splits[i-1], k) >= 0:
			return nil, fmt.Errorf("%w: key %d %s not above key %d %s", ErrInvalidSplits, i, FormatKey(k), i-1, FormatKey(splits[i-1]))
		}
	}
	routes := make([]*RouteDescriptor, 0, len(splits)+1)
	var start []byte
	for i := 0; i <= len(splits); i++ {
		var end []byte
		if i < len(splits) {
			end = bytes.Clone(splits[i])
		}
		routes = append(routes, &RouteDescriptor{ID: uint64(i + 1), Start: start, End: end, GroupID: groups[i], State: StateActive})
		start = end
	}
	return build(InitialVersion, uint64(len(routes)+1), routes)
}

// build assembles a catalog from routes sorted by start and checks it.
func build(version, nextID uint64, routes []*RouteDescriptor) (*Catalog, error) {
	for _, r := range routes {
		if r.ID == 0 || r.ID >= nextID {
			return nil, fmt.Errorf("%w: route id %d not in [1, next id %d)", ErrInvariant, r.ID, nextID)
		}
	}
	ids, err := buildIDIndex(routes)
	if err != nil {
		return nil, err
	}
	c := &Catalog{version: version, nextID: nextID, starts: buildStartIndex(routes), ids: ids}
	if err = c.CheckInvariants(); err != nil {
		return nil, err
	}
	return c, nil
}

// Version grows by exactly one per change.
func (c *Catalog) Version() uint64 { return c.version }

// NextRouteID is the id the next new route gets: a split's left child
// (the right one gets the id after it), a merge's route.
func (c *Catalog) NextRouteID() uint64 { return c.nextID }

// Len is the number of live routes.
func (c *Catalog) Len() int { return c.starts.n }

// Lookup returns the route containing key, in O(log n) without allocating.
func (c *Catalog) Lookup(key []byte) *RouteDescriptor { return c.starts.floor(key) }

// Route returns the live route with the given id.
func (c *Catalog) Route(id uint64) (*RouteDescriptor, bool) {
	r := c.ids.get(id)
	return r, r != nil
}

// Ascend calls fn on every route in key order until fn returns false.
func (c *Catalog) Ascend(fn func(*RouteDescriptor) bool) { c.starts.ascendFrom(nil, true, fn) }

// AscendFrom calls fn, in key order, on every route whose start is at or
// after start, until fn returns false. Pagination resumes with the start of
// the first route not yet seen.
func (c *Catalog) AscendFrom(start []byte, fn func(*RouteDescriptor) bool) {
	c.starts.ascendFrom(start, false, fn)
}

// Split splits route routeID at key (docs/design.md#the-catalog) as an automatic split: the
// new boundary is PlacedByRule. See SplitPlaced.
func (c *Catalog) Split(routeID uint64, key []byte, commitHLC uint64) (*Catalog, [2]*RouteDescriptor, error) {
	return c.SplitPlaced(PlacedByRule, routeID, key, commitHLC)
}

// SplitPlaced splits route routeID at key, a boundary placed by `by`. The
// route must be ACTIVE and key must lie strictly inside it. The left child
// [start, key) gets id NextRouteID(), the right child [key, end) the next
// one; both inherit the group and state and record the parent and
// commitHLC. The left child keeps the parent's OperatorStart (same start);
// the right child's is set when by is PlacedByOperator. On error c is
// unchanged (it always is: a Catalog is immutable).
func (c *Catalog) SplitPlaced(by Placement, routeID uint64, key []byte, commitHLC uint64) (*Catalog, [2]*RouteDescriptor, error) {
	parent, err := c.CheckSplit(routeID, key)
	if err != nil {
		return nil, [2]*RouteDescriptor{}, err
	}
	k := bytes.Clone(key) // owned, shared by both children
	left := &RouteDescriptor{ID: c.nextID, Start: parent.Start, End: k, GroupID: parent.GroupID, State: parent.State,
		OperatorStart: parent.OperatorStart, ParentID: parent.ID, SplitAtHLC: commitHLC}
	right := &RouteDescriptor{ID: c.nextID + 1, Start: k, End: parent.End, GroupID: parent.GroupID, State: parent.State,
		OperatorStart: by == PlacedByOperator, ParentID: parent.ID, SplitAtHLC: commitHLC}

	// The left child starts where the parent did and takes its slot; only
	// the right child is a new entry.
	starts := c.starts.set(left).set(right)
	ids := c.ids.set(parent.ID, nil).set(left.ID, left).set(right.ID, right)
	next := &Catalog{version: c.version + 1, nextID: c.nextID + 2, starts: starts, ids: ids}
	return next, [2]*RouteDescriptor{left, right}, nil
}

// SplitCAS is SplitPlaced guarded by compare-and-set on the catalog
// version, for manual splits from clients.
func (c *Catalog) SplitCAS(expectedVersion uint64, by Placement, routeID uint64, key []byte, commitHLC uint64) (*Catalog, [2]*RouteDescriptor, error) {
	if expectedVersion != c.version {
		return nil, [2]*RouteDescriptor{}, fmt.Errorf("%w: expected version %d, catalog is at %d", ErrVersionMismatch, expectedVersion, c.version)
	}
	return c.SplitPlaced(by, routeID, key, commitHLC)
}

// CheckSplit validates a split without performing it and returns the route
// that would be split. The checks, in order: key length, route exists,
// route ACTIVE, key strictly inside.
func (c *Catalog) CheckSplit(routeID uint64, key []byte) (*RouteDescriptor, error) {
	if len(key) > MaxBoundaryLen {
		return nil, fmt.Errorf("%w: split key for route %d is %d bytes (max %d)", ErrKeyTooLarge, routeID, len(key), MaxBoundaryLen)
	}
	r, ok := c.Route(routeID)
	if !ok {
		return nil, fmt.Errorf("%w: route %d", ErrRouteNotFound, routeID)
	}
	if r.State != StateActive {
		return nil, fmt.Errorf("%w: route %d is %s", ErrRouteNotActive, routeID, r.State)
	}
	switch cs := bytes.Compare(key, r.Start); {
	case cs == 0:
		return nil, fmt.Errorf("%w: key %s equals the start of route %s", ErrSplitKeyAtBoundary, FormatKey(key), r)
	case cs < 0:
		return nil, fmt.Errorf("%w: key %s is below route %s", ErrSplitKeyOutsideRoute, FormatKey(key), r)
	}
	if !r.Unbounded() {
		switch ce := bytes.Compare(key, r.End); {
		case ce == 0:
			return nil, fmt.Errorf("%w: key %s equals the end of route %s", ErrSplitKeyAtBoundary, FormatKey(key), r)
		case ce > 0:
			return nil, fmt.Errorf("%w: key %s is at or above the end of route %s", ErrSplitKeyOutsideRoute, FormatKey(key), r)
		}
	}
	return r, nil
}

// CheckInvariants verifies docs/design.md#the-catalog: routes sorted by start, disjoint and
// covering the key space from the empty key to +inf without gaps; start <
// end unless end is +inf; ids unique, non-zero and below NextRouteID; valid
// states; boundaries within MaxBoundaryLen; a merged route's lineage (two
// distinct, older, dead parents and no split parent); no operator mark on
// the first route (its start is no boundary); version at least 1.
// It is used by tests, by snapshot restore and by the jepsen checker.
func (c *Catalog) CheckInvariants() error {
	if c.version < InitialVersion {
		return fmt.Errorf("%w: version %d", ErrInvariant, c.version)
	}
	if c.starts.n == 0 {
		return fmt.Errorf("%w: no routes", ErrInvariant)
	}
	if c.starts.n != c.ids.n {
		return fmt.Errorf("%w: %d routes by start but %d by id", ErrInvariant, c.starts.n, c.ids.n)
	}
	if err := c.starts.check(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvariant, err)
	}
	var err error
	var prev *RouteDescriptor
	c.Ascend(func(r *RouteDescriptor) bool {
		err = c.checkRoute(prev, r)
		prev = r
		return err == nil
	})
	if err != nil {
		return err
	}
	if !prev.Unbounded() {
		return fmt.Errorf("%w: last route %s does not extend to +inf", ErrInvariant, prev)
	}
	return nil
}

func (c *Catalog) checkRoute(prev, r *RouteDescriptor) error {
	switch {
	case prev == nil && len(r.Start) != 0:
		return fmt.Errorf("%w: first route %s does not start at the empty key", ErrInvariant, r)
	case prev == nil && r.OperatorStart:
		return fmt.Errorf("%w: first route %d marks its start, the start of the key space, as an operator's boundary", ErrInvariant, r.ID)
	case prev != nil && prev.Unbounded():
		return fmt.Errorf("%w: route %s follows +inf", ErrInvariant, r)
	case prev != nil && !bytes.Equal(prev.End, r.Start):
		return fmt.Errorf("%w: gap or overlap between %s and %s", ErrInvariant, prev, r)
	case !r.Unbounded() && bytes.Compare(r.Start, r.End) >= 0:
		return fmt.Errorf("%w: route %s has start >= end", ErrInvariant, r)
	case len(r.Start) > MaxBoundaryLen || len(r.End) > MaxBoundaryLen:
		return fmt.Errorf("%w: route %d has a boundary over %d bytes", ErrInvariant, r.ID, MaxBoundaryLen)
	case r.ID == 0 || r.ID >= c.nextID:
		return fmt.Errorf("%w: route id %d not in [1, next id %d)", ErrInvariant, r.ID, c.nextID)
	case !r.State.Valid():
		return fmt.Errorf("%w: route %d has invalid state %d", ErrInvariant, r.ID, r.State)
	case r.Moving() != nil && r.State != StateMigratingSource && r.State != StateWriteFenced:
		return fmt.Errorf("%w: route %d is %s with a move recorded: only a MIGRATING_SOURCE or WRITE_FENCED route moves", ErrInvariant, r.ID, r.State)
	case r.Moving() != nil && (r.Moving().OpID == 0 || r.Moving().TargetGroupID == r.GroupID):
		return fmt.Errorf("%w: route %d moves to group %d from group %d for op %d", ErrInvariant, r.ID, r.Moving().TargetGroupID, r.GroupID, r.Moving().OpID)
	}
	if byID, ok := c.Route(r.ID); !ok || byID != r {
		return fmt.Errorf("%w: route %d missing from the id index", ErrInvariant, r.ID)
	}
	return c.checkLineage(r)
}

// Equal reports whether a and b hold the same version, next id and routes.
func Equal(a, b *Catalog) bool {
	if a.version != b.version || a.nextID != b.nextID || a.Len() != b.Len() {
		return false
	}
	var ra []*RouteDescriptor
	a.Ascend(func(r *RouteDescriptor) bool { ra = append(ra, r); return true })
	i, eq := 0, true
	b.Ascend(func(r *RouteDescriptor) bool {
		eq = routeEqual(ra[i], r)
		i++
		return eq
	})
	return eq
}

func routeEqual(a, b *RouteDescriptor) bool {
	return a.ID == b.ID && bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End) &&
		a.GroupID == b.GroupID && a.State == b.State && a.OperatorStart == b.OperatorStart &&
		a.ParentID == b.ParentID && a.SplitAtHLC == b.SplitAtHLC &&
		eqPtr(a.MergedFrom(), b.MergedFrom()) && eqPtr(a.Moving(), b.Moving())
}

// eqPtr reports whether a and b are both nil or point to equal values.
func eqPtr[T comparable](a, b *T) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
