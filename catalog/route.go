package catalog

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Key size limits (docs/design.md#the-catalog and
// docs/design.md#limits-and-bad-input). A route boundary may be one byte longer
// than a data key so that any key H can be isolated as [H, H·0x00).
const (
	MaxKeyLen      = 4096
	MaxBoundaryLen = MaxKeyLen + 1
)

// RouteState mirrors api.RouteState; the values are equal.
type RouteState uint8

const (
	StateActive          = RouteState(api.RouteState_ROUTE_STATE_ACTIVE)
	StateWriteFenced     = RouteState(api.RouteState_ROUTE_STATE_WRITE_FENCED)
	StateMigratingSource = RouteState(api.RouteState_ROUTE_STATE_MIGRATING_SOURCE)
	StateMigratingTarget = RouteState(api.RouteState_ROUTE_STATE_MIGRATING_TARGET)
)

// Valid reports whether s is one of the defined states.
func (s RouteState) Valid() bool { return s >= StateActive && s <= StateMigratingTarget }

func (s RouteState) String() string {
	if name, ok := api.RouteState_name[int32(s)]; ok {
		return name
	}
	return "RouteState(" + strconv.Itoa(int(s)) + ")"
}

// RouteDescriptor is one route: the key range [Start, End) served by one
// shard group. An empty End means +inf. Values reachable from a Catalog are
// shared between catalog versions and must not be modified.
type RouteDescriptor struct {
	ID      uint64
	Start   []byte
	End     []byte
	GroupID uint64
	State   RouteState
	// OperatorStart (cluster version 3): an operator placed the route's
	// start boundary — a bootstrap split key or a manual split's key — so
	// automatic merges never remove it. A left child keeps its parent's
	// mark (same start), a merged route its left parent's, an automatic
	// split's right child has none; the first route never has it. Beside
	// State it fits State's padding: the descriptor stays 96 bytes.
	OperatorStart bool
	ParentID      uint64
	SplitAtHLC    uint64
	// ext holds what few routes have: the merge that made the route
	// (MergedFrom) and a live move (Moving). One pointer, nil on most
	// routes, so that the descriptor stays in its 96-byte size class (a
	// million routes, 16 MB less).
	ext *routeExt
}

// routeExt is the rarely set part of a descriptor.
type routeExt struct {
	merge *MergeInfo
	move  *MoveInfo
}

// MergedFrom is the merge that made the route, nil for a route no merge
// made. A merged route's ParentID and SplitAtHLC are 0: no split made it.
func (r *RouteDescriptor) MergedFrom() *MergeInfo {
	if r.ext == nil {
		return nil
	}
	return r.ext.merge
}

// Moving is the route's live move (cluster version 4: state
// MIGRATING_SOURCE or WRITE_FENCED), nil otherwise.
func (r *RouteDescriptor) Moving() *MoveInfo {
	if r.ext == nil {
		return nil
	}
	return r.ext.move
}

// SetMergedFrom and SetMoving record the merge that made r and its live
// move (nil: none). Only for a descriptor that no catalog holds yet: a
// catalog's descriptors are shared and never modified.
func (r *RouteDescriptor) SetMergedFrom(m *MergeInfo) { r.setExt(m, r.Moving()) }

// SetMoving: see SetMergedFrom.
func (r *RouteDescriptor) SetMoving(m *MoveInfo) { r.setExt(r.MergedFrom(), m) }

func (r *RouteDescriptor) setExt(merge *MergeInfo, move *MoveInfo) {
	if merge == nil && move == nil {
		r.ext = nil
		return
	}
	r.ext = &routeExt{merge: merge, move: move}
}

// MoveInfo is what a live move records on its route.
type MoveInfo struct {
	// TargetGroupID is the group the route moves to; GroupID stays the
	// source's until the commit.
	TargetGroupID uint64
	// OpID is the move's op.
	OpID uint64
}

// MergeInfo is what a merge records on the route it made.
type MergeInfo struct {
	// Left and Right are the routes it replaced (Left ended where Right
	// started).
	Left, Right uint64
	// AtHLC is the commit HLC of the merge.
	AtHLC uint64
}

// Merged reports whether the route was made by a merge.
func (r *RouteDescriptor) Merged() bool { return r.MergedFrom() != nil }

// Unbounded reports whether the route extends to +inf.
func (r *RouteDescriptor) Unbounded() bool { return len(r.End) == 0 }

// Contains reports whether key lies in [Start, End).
func (r *RouteDescriptor) Contains(key []byte) bool {
	return bytes.Compare(key, r.Start) >= 0 && (r.Unbounded() || bytes.Compare(key, r.End) < 0)
}

func (r *RouteDescriptor) String() string {
	end := "+inf"
	if !r.Unbounded() {
		end = FormatKey(r.End)
	}
	return fmt.Sprintf("r%d[%s, %s) %s", r.ID, FormatKey(r.Start), end, r.State)
}

// ToProto converts r to its API form.
func (r *RouteDescriptor) ToProto() *api.RouteDescriptor {
	p := &api.RouteDescriptor{
		RouteId:       r.ID,
		Start:         r.Start,
		End:           r.End,
		GroupId:       r.GroupID,
		State:         api.RouteState(r.State),
		ParentRouteId: r.ParentID,
		SplitAtHlc:    r.SplitAtHLC,
		OperatorStart: r.OperatorStart,
	}
	if m := r.MergedFrom(); m != nil {
		p.MergedFromLeft, p.MergedFromRight, p.MergedAtHlc = m.Left, m.Right, m.AtHLC
	}
	if m := r.Moving(); m != nil {
		p.TargetGroupId, p.MoveOpId = m.TargetGroupID, m.OpID
	}
	return p
}

// RouteFromProto converts p, copying its keys so the descriptor owns them.
// Any merge field set makes a MergeInfo (CheckInvariants refuses a partial
// one).
func RouteFromProto(p *api.RouteDescriptor) *RouteDescriptor {
	r := &RouteDescriptor{
		ID:            p.GetRouteId(),
		Start:         bytes.Clone(p.GetStart()),
		End:           cloneNonEmpty(p.GetEnd()),
		GroupID:       p.GetGroupId(),
		State:         RouteState(p.GetState()),
		ParentID:      p.GetParentRouteId(),
		SplitAtHLC:    p.GetSplitAtHlc(),
		OperatorStart: p.GetOperatorStart(),
	}
	if p.GetMergedFromLeft() != 0 || p.GetMergedFromRight() != 0 || p.GetMergedAtHlc() != 0 {
		r.SetMergedFrom(&MergeInfo{Left: p.GetMergedFromLeft(), Right: p.GetMergedFromRight(), AtHLC: p.GetMergedAtHlc()})
	}
	if p.GetTargetGroupId() != 0 || p.GetMoveOpId() != 0 {
		r.SetMoving(&MoveInfo{TargetGroupID: p.GetTargetGroupId(), OpID: p.GetMoveOpId()})
	}
	return r
}

func cloneNonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return bytes.Clone(b)
}

// FormatKey renders a key for errors, logs and tables: quoted, in the form
// of EscapeKey, long keys shortened with their length.
func FormatKey(k []byte) string {
	const show = 64
	if len(k) <= show {
		return `"` + EscapeKey(k) + `"`
	}
	return `"` + EscapeKey(k[:show]) + `…"(` + strconv.Itoa(len(k)) + " bytes)"
}

// EscapeKey renders a key as printable ASCII: printable ASCII bytes as they
// are, backslash and double quote escaped, every other byte as \xNN — so a
// binary boundary never shows as stray Unicode, and Go's unquoting reads it
// back to the same bytes.
func EscapeKey(k []byte) string {
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(k))
	for _, c := range k {
		switch {
		case c == '\\' || c == '"':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			b.WriteString(`\x`)
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
		}
	}
	return b.String()
}
