package catalog

import (
	"github.com/google/btree"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// DefaultHistory is how many catalog versions of deltas a History keeps by
// default (docs/design.md#the-catalog asks for at least 1024).
const DefaultHistory = 1024

// Delta is the change that produced Version from Version-1: a split
// (SplitDelta), a merge (MergeDelta) or a move's step (MoveDelta).
type Delta struct {
	Version   uint64
	Removed   []uint64
	Added     []*RouteDescriptor
	Changed   []*RouteDescriptor
	CommitHLC uint64
}

// SplitDelta describes a split of parent into children at version.
func SplitDelta(version, parentID uint64, children [2]*RouteDescriptor, commitHLC uint64) Delta {
	return Delta{Version: version, Removed: []uint64{parentID}, Added: children[:], CommitHLC: commitHLC}
}

// MergeDelta describes a merge of left and right (left first) into merged
// at version.
func MergeDelta(version, leftID, rightID uint64, merged *RouteDescriptor, commitHLC uint64) Delta {
	return Delta{Version: version, Removed: []uint64{leftID, rightID}, Added: []*RouteDescriptor{merged}, CommitHLC: commitHLC}
}

// MoveDelta describes a move's step at version: route changed in place.
func MoveDelta(version uint64, route *RouteDescriptor, commitHLC uint64) Delta {
	return Delta{Version: version, Changed: []*RouteDescriptor{route}, CommitHLC: commitHLC}
}

// ToProto converts d to its API form.
func (d Delta) ToProto() *api.CatalogDelta {
	p := &api.CatalogDelta{Version: d.Version, RemovedRouteIds: d.Removed, CommitHlc: d.CommitHLC}
	for _, r := range d.Added {
		p.Added = append(p.Added, r.ToProto())
	}
	for _, r := range d.Changed {
		p.Changed = append(p.Changed, r.ToProto())
	}
	return p
}

// History is an immutable, bounded, persistent list of the most recent
// deltas, for WatchRoutes. It is a serving aid, not replicated state: a node
// restored from a snapshot starts an empty history at the restored version,
// and older watchers are sent a full snapshot first.
type History struct {
	capacity int
	base     uint64 // deltas cover versions (base, base+Len()]
	deltas   *btree.BTreeG[Delta]
}

// NewHistory returns an empty history starting at catalog version base and
// keeping at most capacity deltas.
func NewHistory(capacity int, base uint64) *History {
	return &History{capacity: max(capacity, 1), base: base, deltas: btree.NewG(fanout, func(a, b Delta) bool { return a.Version < b.Version })}
}

// Append returns a history with d added and the oldest delta dropped when
// over capacity. Deltas must be appended in version order.
func (h *History) Append(d Delta) *History {
	t := h.deltas.Clone()
	t.ReplaceOrInsert(d)
	base := h.base
	for t.Len() > h.capacity {
		dropped, _ := t.DeleteMin()
		base = dropped.Version
	}
	return &History{capacity: h.capacity, base: base, deltas: t}
}

// Since returns the deltas with Version > v, oldest first. ok is false when
// the history no longer holds the delta right after v: the watcher must
// start from a full snapshot. A v at or beyond the newest delta yields none.
func (h *History) Since(v uint64) (deltas []Delta, ok bool) {
	if v < h.base {
		return nil, false
	}
	h.deltas.AscendGreaterOrEqual(Delta{Version: v + 1}, func(d Delta) bool {
		deltas = append(deltas, d)
		return true
	})
	return deltas, true
}

// Base is the oldest version a watcher can resume from without a snapshot.
func (h *History) Base() uint64 { return h.base }

// Len is the number of deltas held.
func (h *History) Len() int { return h.deltas.Len() }
