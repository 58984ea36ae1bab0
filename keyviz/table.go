package keyviz

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"sync/atomic"

	"github.com/hotsplit/hotsplit/catalog"
)

// ErrInvalidRoutes is wrapped by SetRoutes when the route set is unusable;
// the message names the route that was wrong. Nothing is applied.
var ErrInvalidRoutes = errors.New("invalid route set")

// maxIndexSpan bounds the dense id index (8 bytes per id between the smallest
// and largest route id: 32 MiB). Catalog ids are dense — a catalog of n live
// routes spans at most about 2n ids — so only a hand-made route set with far
// apart ids can exceed it.
const maxIndexSpan = 1 << 22

// routeTable is one immutable version of the sampler's routes, published
// behind an atomic pointer (copy-on-write). Observe finds a route by
// indexing a dense slice with routeID - base: no hashing, no search.
type routeTable struct {
	version uint64
	set     bool // routes were set at least once (version 0 is a valid version)
	base    uint64
	index   []*routeEntry // by id - base; nil where no route has that id
	routes  []*routeEntry // sorted by id
	words   int           // sum of the routes' block lengths
}

// routeEntry is one route of the table with its counters for the open
// column. Entries are shared between table versions as long as the route and
// the bucket count do not change, so a route keeps its block and sketch
// across a route-table change in the middle of a column.
type routeEntry struct {
	blk atomic.Pointer[block]
	k   int // effective buckets of the layout
	// bucket is the layout's Bucket method bound once here: Layout is a
	// 96-byte value receiver, and calling it on a field made the compiler
	// copy it twice per observation and spill around the call (about 5 ns
	// of the 16-bucket path, measured).
	bucket func(key []byte) int
	sk     atomic.Pointer[sketchBox]
	id     uint64
	words  int
	desc   *catalog.RouteDescriptor
}

func newEntry(d *catalog.RouteDescriptor, buckets int) *routeEntry {
	l := catalog.NewLayout(d.Start, d.End, buckets)
	return &routeEntry{k: l.K(), bucket: l.Bucket, id: d.ID, words: blockWords(l.K()), desc: d}
}

// word is the count word of an observation of key.
func (e *routeEntry) word(key []byte, write bool) int {
	w := 2
	if write {
		w = 3
	}
	if e.k > 1 {
		w += 2 * e.bucket(key)
	}
	return w
}

func (t *routeTable) lookup(id uint64) *routeEntry {
	if i := id - t.base; i < uint64(len(t.index)) {
		return t.index[i]
	}
	return nil
}

// newTable indexes entries, which must be sorted by id.
func newTable(version uint64, set bool, entries []*routeEntry) *routeTable {
	t := &routeTable{version: version, set: set, routes: entries}
	if len(entries) == 0 {
		return t
	}
	t.base = entries[0].id
	t.index = make([]*routeEntry, entries[len(entries)-1].id-t.base+1)
	for _, e := range entries {
		t.index[e.id-t.base] = e
		t.words += e.words
	}
	return t
}

// rebuild returns the table with fresh entries for a new bucket count.
func (t *routeTable) rebuild(buckets int) *routeTable {
	entries := make([]*routeEntry, len(t.routes))
	for i, e := range t.routes {
		entries[i] = newEntry(e.desc, buckets)
	}
	return newTable(t.version, t.set, entries)
}

// buildTable validates routes and returns their table at version: an
// entry of old (or of retired) is reused for a route with the same id, so
// that the route keeps its counters; other routes get new entries for
// buckets. Placing each route in the dense id index finds duplicates and
// yields id order without sorting or hashing, which keeps following a
// catalog of a million routes cheap. Nothing is modified on error.
func buildTable(routes []*catalog.RouteDescriptor, version uint64, old *routeTable, retired []*routeEntry, buckets int) (*routeTable, error) {
	if len(routes) == 0 {
		return newTable(version, true, nil), nil
	}
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for i, r := range routes {
		switch {
		case r == nil:
			return nil, fmt.Errorf("%w: route %d of %d is nil", ErrInvalidRoutes, i, len(routes))
		case r.ID == 0:
			return nil, fmt.Errorf("%w: route %d of %d has id 0", ErrInvalidRoutes, i, len(routes))
		case len(r.Start) > catalog.MaxBoundaryLen || len(r.End) > catalog.MaxBoundaryLen:
			return nil, fmt.Errorf("%w: route %d: boundary longer than %d bytes", ErrInvalidRoutes, r.ID, catalog.MaxBoundaryLen)
		case len(r.End) != 0 && bytes.Compare(r.Start, r.End) >= 0:
			return nil, fmt.Errorf("%w: route %d: start %s not below end %s", ErrInvalidRoutes, r.ID, catalog.FormatKey(r.Start), catalog.FormatKey(r.End))
		}
		lo, hi = min(lo, r.ID), max(hi, r.ID)
	}
	if hi-lo >= maxIndexSpan {
		return nil, fmt.Errorf("%w: route ids %d..%d span more than %d ids", ErrInvalidRoutes, lo, hi, maxIndexSpan)
	}
	var retiredByID map[uint64]*routeEntry
	if len(retired) > 0 {
		retiredByID = make(map[uint64]*routeEntry, len(retired))
		for _, e := range retired {
			retiredByID[e.id] = e
		}
	}
	t := &routeTable{version: version, set: true, base: lo, index: make([]*routeEntry, hi-lo+1), routes: make([]*routeEntry, 0, len(routes))}
	for _, r := range routes {
		i := r.ID - lo
		if t.index[i] != nil {
			return nil, fmt.Errorf("%w: route id %d appears twice", ErrInvalidRoutes, r.ID)
		}
		e := old.lookup(r.ID)
		if e == nil {
			e = retiredByID[r.ID]
		}
		switch {
		case e == nil:
			e = newEntry(r, buckets)
		case !sameBounds(e.desc, r):
			return nil, fmt.Errorf("%w: route %d changed bounds from [%s, %s) to [%s, %s)", ErrInvalidRoutes, r.ID,
				catalog.FormatKey(e.desc.Start), catalog.FormatKey(e.desc.End), catalog.FormatKey(r.Start), catalog.FormatKey(r.End))
		}
		t.index[i] = e
	}
	for _, e := range t.index {
		if e != nil {
			t.routes = append(t.routes, e)
			t.words += e.words
		}
	}
	return t, nil
}

func sameBounds(a, b *catalog.RouteDescriptor) bool {
	return bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End)
}
