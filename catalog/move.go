package catalog

import "fmt"

// The transitions of a move between shard groups (docs/design.md#moves):
// each changes one route in place — same id and range — and makes the
// next catalog version. On error c is unchanged (it always is: a Catalog
// is immutable).

// BeginMove starts moving route routeID to targetGroup for op opID: the
// route must be ACTIVE and served by another group; it becomes
// MIGRATING_SOURCE, its group still the source.
func (c *Catalog) BeginMove(routeID, targetGroup, opID uint64) (*Catalog, *RouteDescriptor, error) {
	r, ok := c.Route(routeID)
	switch {
	case !ok:
		return nil, nil, fmt.Errorf("%w: route %d", ErrRouteNotFound, routeID)
	case r.State != StateActive:
		return nil, nil, fmt.Errorf("%w: route %d is %s", ErrRouteNotActive, routeID, r.State)
	case r.GroupID == targetGroup:
		return nil, nil, fmt.Errorf("%w: route %d is served by group %d", ErrMoveSameGroup, routeID, targetGroup)
	case opID == 0:
		return nil, nil, fmt.Errorf("%w: a move of route %d without an op", ErrInvariant, routeID)
	}
	next := *r
	next.State = StateMigratingSource
	next.SetMoving(&MoveInfo{TargetGroupID: targetGroup, OpID: opID})
	return c.replace(&next), &next, nil
}

// FenceMove fences route routeID for op opID: MIGRATING_SOURCE becomes
// WRITE_FENCED.
func (c *Catalog) FenceMove(routeID, opID uint64) (*Catalog, *RouteDescriptor, error) {
	r, err := c.moving(routeID, opID, StateMigratingSource)
	if err != nil {
		return nil, nil, err
	}
	next := *r
	next.State = StateWriteFenced
	return c.replace(&next), &next, nil
}

// CommitMove ends op opID's move of a WRITE_FENCED route: it is ACTIVE in
// the target group.
func (c *Catalog) CommitMove(routeID, opID uint64) (*Catalog, *RouteDescriptor, error) {
	r, err := c.moving(routeID, opID, StateWriteFenced)
	if err != nil {
		return nil, nil, err
	}
	next := *r
	next.State, next.GroupID = StateActive, r.Moving().TargetGroupID
	next.SetMoving(nil)
	return c.replace(&next), &next, nil
}

// AbortMove ends op opID's move before its commit: the route, begun or
// fenced, is ACTIVE in its source group again.
func (c *Catalog) AbortMove(routeID, opID uint64) (*Catalog, *RouteDescriptor, error) {
	r, err := c.moving(routeID, opID, StateMigratingSource, StateWriteFenced)
	if err != nil {
		return nil, nil, err
	}
	next := *r
	next.State = StateActive
	next.SetMoving(nil)
	return c.replace(&next), &next, nil
}

// moving returns route routeID if op opID moves it and it is in one of
// states.
func (c *Catalog) moving(routeID, opID uint64, states ...RouteState) (*RouteDescriptor, error) {
	r, ok := c.Route(routeID)
	if !ok {
		return nil, fmt.Errorf("%w: route %d", ErrRouteNotFound, routeID)
	}
	if m := r.Moving(); m == nil || m.OpID != opID {
		return nil, fmt.Errorf("%w: route %d is %s, not moving for op %d", ErrMoveState, routeID, r.State, opID)
	}
	for _, s := range states {
		if r.State == s {
			return r, nil
		}
	}
	return nil, fmt.Errorf("%w: route %d is %s, the step moves it from %v", ErrMoveState, routeID, r.State, states)
}

// replace is the next catalog version with r in place of the route of its
// id (same start).
func (c *Catalog) replace(r *RouteDescriptor) *Catalog {
	return &Catalog{version: c.version + 1, nextID: c.nextID, starts: c.starts.set(r), ids: c.ids.set(r.ID, r)}
}
