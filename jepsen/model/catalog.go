package model

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// MaxBoundaryLen is the longest route boundary (docs/design.md#the-catalog: a 4 KiB data key
// plus the 0x00 that isolates it).
const MaxBoundaryLen = 4096 + 1

// InitialVersion is the catalog version right after Bootstrap.
const InitialVersion = 1

// Route is the checker's route descriptor. End nil means +inf. A route a
// split made names its Parent and SplitAtHLC; one a merge made names both
// parents (MergedLeft, MergedRight) and MergedAtHLC instead; an initial
// route names neither. OperatorStart (cluster version 3): an operator
// placed the route's start boundary (a bootstrap split key, a manual
// split's key), so no automatic merge may remove it.
type Route struct {
	ID          uint64
	Start, End  []byte
	Group       uint64
	State       api.RouteState
	Parent      uint64
	SplitAtHLC  uint64
	MergedLeft  uint64
	MergedRight uint64
	MergedAtHLC uint64
	// OperatorStart: the start boundary is an operator's (pinned).
	OperatorStart bool
	// TargetGroup and MoveOp: a live move of the route (version 4).
	TargetGroup, MoveOp uint64
}

// FromAPI converts a route the cluster returned.
func FromAPI(r *api.RouteDescriptor) Route {
	return Route{ID: r.GetRouteId(), Start: r.GetStart(), End: r.GetEnd(), Group: r.GetGroupId(),
		State: r.GetState(), Parent: r.GetParentRouteId(), SplitAtHLC: r.GetSplitAtHlc(),
		MergedLeft: r.GetMergedFromLeft(), MergedRight: r.GetMergedFromRight(), MergedAtHLC: r.GetMergedAtHlc(),
		OperatorStart: r.GetOperatorStart(), TargetGroup: r.GetTargetGroupId(), MoveOp: r.GetMoveOpId()}
}

// Merged reports whether a merge made the route.
func (r Route) Merged() bool { return r.MergedAtHLC != 0 || r.MergedLeft != 0 || r.MergedRight != 0 }

// CreatedAtHLC is the commit HLC of the split or merge that made the route;
// 0 for an initial route.
func (r Route) CreatedAtHLC() uint64 { return max(r.SplitAtHLC, r.MergedAtHLC) }

// Unbounded reports whether the route reaches +inf.
func (r Route) Unbounded() bool { return len(r.End) == 0 }

// Contains reports whether key lies in [Start, End).
func (r Route) Contains(key []byte) bool {
	return bytes.Compare(key, r.Start) >= 0 && (r.Unbounded() || bytes.Compare(key, r.End) < 0)
}

// Equal compares every field.
func (r Route) Equal(o Route) bool {
	return r.ID == o.ID && bytes.Equal(r.Start, o.Start) && bytes.Equal(r.End, o.End) && r.Group == o.Group &&
		r.State == o.State && r.Parent == o.Parent && r.SplitAtHLC == o.SplitAtHLC &&
		r.MergedLeft == o.MergedLeft && r.MergedRight == o.MergedRight && r.MergedAtHLC == o.MergedAtHLC &&
		r.OperatorStart == o.OperatorStart
}

func (r Route) String() string {
	end := "+inf"
	if !r.Unbounded() {
		end = fmt.Sprintf("%q", r.End)
	}
	return fmt.Sprintf("r%d[%q, %s)", r.ID, r.Start, end)
}

// Hash identifies a list of routes: SHA-256 of a canonical encoding.
type Hash [32]byte

// String is a short form for messages.
func (h Hash) String() string { return hex.EncodeToString(h[:8]) }

// Hex is the full hash, as histories record it.
func (h Hash) Hex() string { return hex.EncodeToString(h[:]) }

// HashRoutes hashes routes in the order given (a catalog's are sorted by
// start), every field included.
func HashRoutes(routes []Route) Hash {
	h := sha256.New()
	var b [8]byte
	u64 := func(v uint64) {
		binary.BigEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	for _, r := range routes {
		u64(r.ID)
		u64(r.Group)
		u64(uint64(r.State))
		u64(r.Parent)
		u64(r.SplitAtHLC)
		u64(r.MergedLeft)
		u64(r.MergedRight)
		u64(r.MergedAtHLC)
		if r.OperatorStart {
			u64(1)
		} else {
			u64(0)
		}
		u64(uint64(len(r.Start)))
		h.Write(r.Start)
		u64(uint64(len(r.End)))
		h.Write(r.End)
	}
	var out Hash
	h.Sum(out[:0])
	return out
}

// HashAPIRoutes hashes routes as the cluster returned them.
func HashAPIRoutes(rs []*api.RouteDescriptor) Hash {
	routes := make([]Route, len(rs))
	for i, r := range rs {
		routes[i] = FromAPI(r)
	}
	return HashRoutes(routes)
}

// Catalog is one immutable catalog version.
type Catalog struct {
	Version uint64
	NextID  uint64
	Routes  []Route // sorted by start
	hash    Hash
	// Pins: the cluster version records who placed a boundary (feature
	// operator_boundaries_kept), so an operator's split marks its right
	// child. Set by MarkAllStarts; every catalog made from this one
	// inherits it. It is no route field and not in the hash.
	Pins bool
}

// Hash is the hash of the catalog's routes.
func (c *Catalog) Hash() Hash { return c.hash }

func newCatalog(version, next uint64, routes []Route) *Catalog {
	return &Catalog{Version: version, NextID: next, Routes: routes, hash: HashRoutes(routes)}
}

// derive is the next catalog made from c: c's Pins carried over.
func (c *Catalog) derive(version, next uint64, routes []Route) *Catalog {
	n := newCatalog(version, next, routes)
	n.Pins = c.Pins
	return n
}

// MarkAllStarts is c with every boundary — the start of every route but
// the first — marked OperatorStart, and Pins on: what a bootstrap at
// cluster version 3 (its split keys are the operator's), and the raise of
// a cluster to 3 (an older catalog records no placement; the operator's
// reading is the safe one), do. The version and next id stay (the layout
// is the same); marked is how many routes got the mark. c is unchanged.
func (c *Catalog) MarkAllStarts() (next *Catalog, marked int) {
	routes := slices.Clone(c.Routes)
	for i, r := range routes {
		if len(r.Start) > 0 && !r.OperatorStart {
			routes[i].OperatorStart = true
			marked++
		}
	}
	next = newCatalog(c.Version, c.NextID, routes)
	next.Pins = true
	return next, marked
}

// Initial is the catalog Bootstrap creates: one route per interval between
// the (strictly increasing, non-empty) split keys, ids from 1.
func Initial(splits [][]byte, group uint64) (*Catalog, error) {
	routes := make([]Route, 0, len(splits)+1)
	var start []byte
	for i := 0; i <= len(splits); i++ {
		var end []byte
		if i < len(splits) {
			end = splits[i]
			if len(end) == 0 || len(end) > MaxBoundaryLen || (i > 0 && bytes.Compare(splits[i-1], end) >= 0) {
				return nil, fmt.Errorf("initial split %d %q: empty, too long or not increasing", i, end)
			}
		}
		routes = append(routes, Route{ID: uint64(i + 1), Start: start, End: end, Group: group, State: api.RouteState_ROUTE_STATE_ACTIVE})
		start = end
	}
	return newCatalog(InitialVersion, uint64(len(routes)+1), routes), nil
}

// Route returns the live route with the given id.
func (c *Catalog) Route(id uint64) (Route, bool) {
	for _, r := range c.Routes {
		if r.ID == id {
			return r, true
		}
	}
	return Route{}, false
}

// Code is the outcome of a command as the model sees it.
type Code int

// Outcome codes. Only OK changes the catalog.
const (
	OK Code = iota
	VersionMismatch
	KeyTooLarge
	RouteNotFound
	RouteNotActive
	KeyAtBoundary
	KeyOutsideRoute
	FenceViolation
	InvalidArgument
	OpPaused
	OpAborted
	OpFinished
	NotBootstrapped
	AlreadyBootstrapped
	Ignored // a bootstrap-flag switch change after an operator set the switch
	// Merge refusals (cluster version 3).
	NotAdjacent         // the left route does not end where the right one starts
	DifferentGroups     // the two routes are served by different groups
	MergeRouteNotActive // a route to merge is not ACTIVE
	RouteInLiveOp       // a live op will still change one of the routes
	// RequestIDReused: the request id is bound to another request
	// (cluster version 3).
	RequestIDReused
)

var codeNames = [...]string{"ok", "version_mismatch", "key_too_large", "route_not_found", "route_not_active",
	"key_at_boundary", "key_outside_route", "fence_violation", "invalid_argument", "op_paused", "op_aborted",
	"op_finished", "not_bootstrapped", "already_bootstrapped", "ignored",
	"routes_not_adjacent", "routes_in_different_groups", "merge_route_not_active", "route_in_live_op", "request_id_reused"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Split applies the split transition: the route exists, is ACTIVE and the
// key lies strictly inside it; the children take the next two ids, the
// parent's group and state, and split_at_hlc = hlc. The left child keeps
// the parent's start and its mark; the right child's start is marked when
// byOperator (a manual split) and the catalog records pins.
func (c *Catalog) Split(id uint64, key []byte, hlc uint64, byOperator bool) (*Catalog, [2]Route, Code) {
	if len(key) > MaxBoundaryLen {
		return nil, [2]Route{}, KeyTooLarge
	}
	pos := -1
	for i, r := range c.Routes {
		if r.ID == id {
			pos = i
			break
		}
	}
	if pos < 0 {
		return nil, [2]Route{}, RouteNotFound
	}
	p := c.Routes[pos]
	if p.State != api.RouteState_ROUTE_STATE_ACTIVE {
		return nil, [2]Route{}, RouteNotActive
	}
	switch cs := bytes.Compare(key, p.Start); {
	case cs == 0:
		return nil, [2]Route{}, KeyAtBoundary
	case cs < 0:
		return nil, [2]Route{}, KeyOutsideRoute
	}
	if !p.Unbounded() {
		switch ce := bytes.Compare(key, p.End); {
		case ce == 0:
			return nil, [2]Route{}, KeyAtBoundary
		case ce > 0:
			return nil, [2]Route{}, KeyOutsideRoute
		}
	}
	k := bytes.Clone(key)
	left := Route{ID: c.NextID, Start: p.Start, End: k, Group: p.Group, State: p.State, Parent: p.ID, SplitAtHLC: hlc,
		OperatorStart: p.OperatorStart}
	right := Route{ID: c.NextID + 1, Start: k, End: p.End, Group: p.Group, State: p.State, Parent: p.ID, SplitAtHLC: hlc,
		OperatorStart: byOperator && c.Pins}
	routes := make([]Route, 0, len(c.Routes)+1)
	routes = append(routes, c.Routes[:pos]...)
	routes = append(routes, left, right)
	routes = append(routes, c.Routes[pos+1:]...)
	return c.derive(c.Version+1, c.NextID+2, routes), [2]Route{left, right}, OK
}

// Merge applies the merge transition (docs/design.md#merges), checking in the FSM's
// order: two distinct routes, the left one live, then the right one, the
// left ending where the right starts, one group, both ACTIVE. The merged
// route takes the next id, the left route's start and slot, the right
// route's end, the parents' group and state, both parents' ids and
// merged_at_hlc = hlc; it names no split parent. Its start is the left
// route's, and so is its mark: the right route's start, marked or not, is
// gone (the rule that an automatic merge must not remove a marked start is
// checked on the history, CheckChanges; a manual merge may).
func (c *Catalog) Merge(leftID, rightID, hlc uint64) (*Catalog, Route, Code) {
	if leftID == rightID {
		return nil, Route{}, InvalidArgument
	}
	lpos, rpos := -1, -1
	for i, r := range c.Routes {
		switch r.ID {
		case leftID:
			lpos = i
		case rightID:
			rpos = i
		}
	}
	if lpos < 0 || rpos < 0 {
		return nil, Route{}, RouteNotFound
	}
	// Routes are sorted and cover the key space, so the left one ends where
	// the right one starts exactly when the right one comes next.
	if rpos != lpos+1 {
		return nil, Route{}, NotAdjacent
	}
	l, r := c.Routes[lpos], c.Routes[rpos]
	if l.Group != r.Group {
		return nil, Route{}, DifferentGroups
	}
	if l.State != api.RouteState_ROUTE_STATE_ACTIVE || r.State != api.RouteState_ROUTE_STATE_ACTIVE {
		return nil, Route{}, MergeRouteNotActive
	}
	merged := Route{ID: c.NextID, Start: l.Start, End: r.End, Group: l.Group, State: l.State,
		MergedLeft: l.ID, MergedRight: r.ID, MergedAtHLC: hlc, OperatorStart: l.OperatorStart}
	routes := make([]Route, 0, len(c.Routes)-1)
	routes = append(routes, c.Routes[:lpos]...)
	routes = append(routes, merged)
	routes = append(routes, c.Routes[rpos+1:]...)
	return c.derive(c.Version+1, c.NextID+1, routes), merged, OK
}

// ErrInvariant wraps every catalog invariant violation.
var ErrInvariant = errors.New("catalog invariant violated")

// Check verifies docs/design.md#the-catalog on one catalog: routes sorted by start, disjoint
// and covering the key space from the empty key to +inf without gaps;
// start < end unless end is +inf; ids non-zero, unique and below NextID;
// states valid; boundaries within MaxBoundaryLen; version at least 1; the
// first route's start unmarked; and the lineage of every route a merge
// made (two distinct, older parents, neither live, a merge HLC, no split
// parent).
func (c *Catalog) Check() error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w at version %d: %s", ErrInvariant, c.Version, fmt.Sprintf(format, args...))
	}
	if c.Version < InitialVersion {
		return fail("version below %d", InitialVersion)
	}
	if len(c.Routes) == 0 {
		return fail("no routes")
	}
	if len(c.Routes[0].Start) != 0 {
		return fail("first route %s does not start at the empty key", c.Routes[0])
	}
	if c.Routes[0].OperatorStart {
		return fail("first route %s marks its start as an operator's: the start of the key space is no boundary", c.Routes[0])
	}
	if !c.Routes[len(c.Routes)-1].Unbounded() {
		return fail("last route %s does not reach +inf", c.Routes[len(c.Routes)-1])
	}
	ids := make(map[uint64]bool, len(c.Routes))
	for i, r := range c.Routes {
		switch {
		case r.ID == 0 || r.ID >= c.NextID:
			return fail("route %s: id not in [1, %d)", r, c.NextID)
		case ids[r.ID]:
			return fail("route id %d appears twice", r.ID)
		case r.State < api.RouteState_ROUTE_STATE_ACTIVE || r.State > api.RouteState_ROUTE_STATE_MIGRATING_TARGET:
			return fail("route %s: state %v", r, r.State)
		case len(r.Start) > MaxBoundaryLen || len(r.End) > MaxBoundaryLen:
			return fail("route %s: boundary longer than %d bytes", r, MaxBoundaryLen)
		case !r.Unbounded() && bytes.Compare(r.Start, r.End) >= 0:
			return fail("route %s: start not below end", r)
		case r.Unbounded() && i != len(c.Routes)-1:
			return fail("route %s reaches +inf but is not last", r)
		case i > 0 && !bytes.Equal(c.Routes[i-1].End, r.Start):
			return fail("gap or overlap between %s and %s", c.Routes[i-1], r)
		}
		ids[r.ID] = true
	}
	for _, r := range c.Routes {
		if err := lineage(r); err != "" {
			return fail("%s", err)
		}
		if r.Merged() && (ids[r.MergedLeft] || ids[r.MergedRight]) {
			return fail("merged route %s names a parent (r%d, r%d) that is still live", r, r.MergedLeft, r.MergedRight)
		}
	}
	return nil
}

// lineage checks what one route says made it, "" when it is consistent.
func lineage(r Route) string {
	if !r.Merged() {
		return ""
	}
	switch {
	case r.MergedAtHLC == 0:
		return fmt.Sprintf("merged route %s has no merge HLC", r)
	case r.MergedLeft == 0 || r.MergedRight == 0 || r.MergedLeft == r.MergedRight:
		return fmt.Sprintf("merged route %s names parents r%d and r%d", r, r.MergedLeft, r.MergedRight)
	case r.MergedLeft >= r.ID || r.MergedRight >= r.ID:
		return fmt.Sprintf("merged route %s names a parent (r%d, r%d) not older than itself", r, r.MergedLeft, r.MergedRight)
	case r.Parent != 0 || r.SplitAtHLC != 0:
		return fmt.Sprintf("merged route %s also names split parent r%d (split at %d)", r, r.Parent, r.SplitAtHLC)
	}
	return ""
}
