package catalog

// Who placed a boundary (cluster version 3). Automatic merges never remove
// a boundary an operator placed — a bootstrap split key or a manual
// split's key — so a layout an operator chose (a key space pre-split
// before a planned load, a tenant isolated by hand) is not undone when its
// routes turn cold. A route records it for its start boundary
// (RouteDescriptor.OperatorStart): a boundary is the start of exactly one
// route, and every transition keeps the mark with the boundary:
//
//   - a split's left child keeps its parent's start and so its mark; the
//     right child starts at the new key, marked when an operator split;
//   - a merge removes the right route's start and keeps the left's: the
//     merged route has the left parent's mark;
//   - the first route's start is the start of the key space, no boundary:
//     never marked.
//
// The catalog does not know cluster versions: the caller passes
// PlacedByOperator, and calls MarkAllStarts, only where the cluster
// version records placements, so a version 2 catalog carries no mark.

// Placement says who placed the boundary a split makes.
type Placement uint8

const (
	// PlacedByRule: an automatic split's boundary, and any boundary of a
	// cluster version that records no placement.
	PlacedByRule Placement = iota
	// PlacedByOperator: a manual split's boundary.
	PlacedByOperator
)

// MarkAllStarts returns c with every boundary — the start of every route
// but the first — marked as placed by an operator. At a bootstrap those are
// the operator's split keys; at the raise to a version that records
// placements they are every boundary the cluster has, since an older
// catalog keeps no record of who placed one, and an automatic merge of a
// boundary an operator placed would undo their layout unasked. The version
// and next id stay (the layout is the same); c itself is unchanged, and
// returned as is when no route needs the mark; marked is how many routes
// got it. It rebuilds the indexes from the routes in O(n): it runs once at
// a bootstrap and once at a cluster version raise. An error means c broke
// an invariant (ErrInvariant).
func (c *Catalog) MarkAllStarts() (next *Catalog, marked int, err error) {
	routes := make([]*RouteDescriptor, 0, c.Len())
	c.Ascend(func(r *RouteDescriptor) bool {
		if len(r.Start) > 0 && !r.OperatorStart {
			m := *r
			m.OperatorStart = true
			r = &m
			marked++
		}
		routes = append(routes, r)
		return true
	})
	if marked == 0 {
		return c, 0, nil
	}
	if next, err = build(c.version, c.nextID, routes); err != nil {
		return nil, 0, err
	}
	return next, marked, nil
}
