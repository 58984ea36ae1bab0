package catalog

import "errors"

// Sentinel errors of the split and merge transitions and of catalog
// validation. Errors returned by this package wrap one of them with the
// route id, key length or boundary that was wrong; test with errors.Is.
var (
	// ErrRouteNotFound: no live route has the given id.
	ErrRouteNotFound = errors.New("route not found")
	// ErrRouteNotActive: the route is not ACTIVE and may not be split or
	// merged.
	ErrRouteNotActive = errors.New("route not active")
	// ErrMergeSameRoute: a merge names one route as both left and right.
	ErrMergeSameRoute = errors.New("merge of a route with itself")
	// ErrMergeNotAdjacent: the left route does not end where the right
	// route starts.
	ErrMergeNotAdjacent = errors.New("routes not adjacent")
	// ErrMergeDifferentGroup: the two routes are served by different shard
	// groups (joining them would be a cross-group move).
	ErrMergeDifferentGroup = errors.New("routes in different groups")
	// ErrSplitKeyAtBoundary: the split key equals the route's start (or end).
	ErrSplitKeyAtBoundary = errors.New("split key at route boundary")
	// ErrSplitKeyOutsideRoute: the split key lies outside [start, end).
	ErrSplitKeyOutsideRoute = errors.New("split key outside route")
	// ErrKeyTooLarge: a key or boundary exceeds MaxBoundaryLen.
	ErrKeyTooLarge = errors.New("key too large")
	// ErrVersionMismatch: a compare-and-set split or merge saw another
	// version.
	ErrVersionMismatch = errors.New("catalog version mismatch")
	// ErrInvariant: a catalog (typically a decoded one) breaks an invariant.
	ErrInvariant = errors.New("catalog invariant violated")
	// ErrMoveState: a move step found the route in another state than the
	// step moves it from, or moving for another op.
	ErrMoveState = errors.New("route not in the move's state")
	// ErrMoveSameGroup: a move to the group that serves the route already.
	ErrMoveSameGroup = errors.New("move to the route's own group")
	// ErrInvalidSplits: initial split keys are empty, unsorted or too long.
	ErrInvalidSplits = errors.New("invalid initial split keys")
)
