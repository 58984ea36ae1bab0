package catalog

import (
	"bytes"
	"fmt"
)

// Merge joins two adjacent routes (docs/design.md#merges): left must end where right
// starts, both must be ACTIVE and served by the same group. They become one
// new route [left.Start, right.End) with id NextRouteID() (ids are never
// reused), the group and state of its parents, and Merge = {both parents'
// ids, commitHLC}; its ParentID and SplitAtHLC stay 0, since no split made
// it; it keeps the left parent's OperatorStart (its start is the left's,
// and the right's start, the boundary that goes, is gone with its mark:
// whether a merge may remove a marked boundary is the caller's rule).
// commitHLC must not be 0 (the invariants refuse a merge without its
// HLC). On error c is unchanged (it always is: a Catalog is
// immutable).
func (c *Catalog) Merge(leftID, rightID, commitHLC uint64) (*Catalog, *RouteDescriptor, error) {
	left, right, err := c.CheckMerge(leftID, rightID)
	if err != nil {
		return nil, nil, err
	}
	if commitHLC == 0 {
		return nil, nil, fmt.Errorf("%w: merge of routes %d and %d at commit HLC 0", ErrInvariant, leftID, rightID)
	}
	merged := &RouteDescriptor{ID: c.nextID, Start: left.Start, End: right.End, GroupID: left.GroupID, State: left.State,
		OperatorStart: left.OperatorStart}
	merged.SetMergedFrom(&MergeInfo{Left: left.ID, Right: right.ID, AtHLC: commitHLC})
	// The merged route starts where the left parent did and takes its
	// slot; the right parent's entry goes.
	starts, ok := c.starts.set(merged).delete(right.Start)
	if !ok {
		return nil, nil, fmt.Errorf("%w: route %d missing from the start index", ErrInvariant, right.ID)
	}
	ids := c.ids.set(left.ID, nil).set(right.ID, nil).set(merged.ID, merged)
	next := &Catalog{version: c.version + 1, nextID: c.nextID + 1, starts: starts, ids: ids}
	return next, merged, nil
}

// MergeCAS is Merge guarded by compare-and-set on the catalog version, for
// manual merges from clients. The version is compared first, as SplitCAS
// does.
func (c *Catalog) MergeCAS(expectedVersion, leftID, rightID, commitHLC uint64) (*Catalog, *RouteDescriptor, error) {
	if expectedVersion != c.version {
		return nil, nil, fmt.Errorf("%w: expected version %d, catalog is at %d", ErrVersionMismatch, expectedVersion, c.version)
	}
	return c.Merge(leftID, rightID, commitHLC)
}

// CheckMerge validates a merge without performing it and returns the two
// routes that would be merged. The checks, in order, each with its own
// error: the same route twice (ErrMergeSameRoute), left then right exists
// (ErrRouteNotFound), left ends where right starts (ErrMergeNotAdjacent),
// one group (ErrMergeDifferentGroup), both ACTIVE (ErrRouteNotActive).
func (c *Catalog) CheckMerge(leftID, rightID uint64) (left, right *RouteDescriptor, err error) {
	if leftID == rightID {
		return nil, nil, fmt.Errorf("%w: route %d given as both left and right", ErrMergeSameRoute, leftID)
	}
	left, ok := c.Route(leftID)
	if !ok {
		return nil, nil, fmt.Errorf("%w: route %d (left)", ErrRouteNotFound, leftID)
	}
	right, ok = c.Route(rightID)
	if !ok {
		return nil, nil, fmt.Errorf("%w: route %d (right)", ErrRouteNotFound, rightID)
	}
	if left.Unbounded() || !bytes.Equal(left.End, right.Start) {
		if !right.Unbounded() && bytes.Equal(right.End, left.Start) {
			return nil, nil, fmt.Errorf("%w: %s ends where %s starts: give the left route first", ErrMergeNotAdjacent, right, left)
		}
		return nil, nil, fmt.Errorf("%w: %s does not end where %s starts", ErrMergeNotAdjacent, left, right)
	}
	if left.GroupID != right.GroupID {
		return nil, nil, fmt.Errorf("%w: route %d is served by group %d, route %d by group %d", ErrMergeDifferentGroup,
			left.ID, left.GroupID, right.ID, right.GroupID)
	}
	for _, r := range []*RouteDescriptor{left, right} {
		if r.State != StateActive {
			return nil, nil, fmt.Errorf("%w: route %d is %s", ErrRouteNotActive, r.ID, r.State)
		}
	}
	return left, right, nil
}

// checkLineage: a merged route has a merge HLC, names two distinct earlier
// routes, neither live (ids are never reused), and no split parent.
func (c *Catalog) checkLineage(r *RouteDescriptor) error {
	if r.MergedFrom() == nil {
		return nil
	}
	l, rr := r.MergedFrom().Left, r.MergedFrom().Right
	switch {
	case r.MergedFrom().AtHLC == 0:
		return fmt.Errorf("%w: route %d names merge parents %d and %d without a merge HLC", ErrInvariant, r.ID, l, rr)
	case l == 0 || rr == 0 || l == rr:
		return fmt.Errorf("%w: merged route %d names parents %d and %d", ErrInvariant, r.ID, l, rr)
	case l >= r.ID || rr >= r.ID:
		return fmt.Errorf("%w: merged route %d names a parent (%d, %d) not older than itself", ErrInvariant, r.ID, l, rr)
	case r.ParentID != 0 || r.SplitAtHLC != 0:
		return fmt.Errorf("%w: merged route %d also names split parent %d", ErrInvariant, r.ID, r.ParentID)
	}
	for _, p := range []uint64{l, rr} {
		if _, live := c.Route(p); live {
			return fmt.Errorf("%w: merged route %d names parent %d, which is live", ErrInvariant, r.ID, p)
		}
	}
	return nil
}
