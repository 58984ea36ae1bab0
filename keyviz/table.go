package keyviz

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
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
	// 96-byte value receiver, and calling it through the entry made the
	// compiler copy it twice per observation (measured: +6 ns).
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

// validateRoutes checks a route set and returns it sorted by id.
func validateRoutes(routes []*catalog.RouteDescriptor) ([]*catalog.RouteDescriptor, error) {
	sorted := slices.Clone(routes)
	for i, r := range sorted {
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
	}
	slices.SortFunc(sorted, func(a, b *catalog.RouteDescriptor) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	for i := 1; i < len(sorted); i++ {
		if sorted[i].ID == sorted[i-1].ID {
			return nil, fmt.Errorf("%w: route id %d appears twice", ErrInvalidRoutes, sorted[i].ID)
		}
	}
	if n := len(sorted); n > 0 {
		if span := sorted[n-1].ID - sorted[0].ID; span >= maxIndexSpan {
			return nil, fmt.Errorf("%w: route ids %d..%d span more than %d ids", ErrInvalidRoutes, sorted[0].ID, sorted[n-1].ID, maxIndexSpan)
		}
	}
	return sorted, nil
}

func sameBounds(a, b *catalog.RouteDescriptor) bool {
	return bytes.Equal(a.Start, b.Start) && bytes.Equal(a.End, b.End)
}
