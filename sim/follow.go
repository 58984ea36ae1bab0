package sim

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// errCatalogGap: a watch event does not follow the follower's catalog (a
// delta that skips a version, removes a route that is not live, or comes
// before any snapshot, or a catalog that breaks an invariant). The follower
// then starts over from a full snapshot.
var errCatalogGap = errors.New("catalog watch: event does not follow the catalog")

// follower rebuilds the live catalog from a watch — snapshot pages, then
// deltas — as an immutable *catalog.Catalog, checking every invariant on
// every version (so the simulator never routes by a catalog with a hole in
// it). It belongs to the watch goroutine.
type follower struct {
	cat *catalog.Catalog // nil until the first complete snapshot
	// clusterID is the cluster the catalog came from (from snapshot pages).
	clusterID string

	// A snapshot being received page by page.
	pages        []*api.RouteDescriptor
	pageVersion  uint64
	pageNextID   uint64
	pagesStarted bool
}

// from is the version to resume a watch from: the catalog's, or 0 (a full
// snapshot) without one.
func (f *follower) from() uint64 {
	if f.cat == nil {
		return 0
	}
	return f.cat.Version()
}

// restart forgets a partial snapshot (a new watch sends its pages again)
// and, after a gap, the catalog itself.
func (f *follower) restart(gap bool) {
	f.pages, f.pagesStarted = nil, false
	if gap {
		f.cat = nil
	}
}

// apply applies one event and reports whether it completed a new catalog
// version. An error wraps errCatalogGap.
func (f *follower) apply(ev *api.WatchRoutesResponse) (bool, error) {
	if p := ev.GetSnapshotPage(); p != nil {
		if !f.pagesStarted || f.pageVersion != p.GetVersion() {
			f.pages, f.pageVersion, f.pageNextID, f.pagesStarted = nil, p.GetVersion(), 0, true
		}
		f.pages = append(f.pages, p.GetRoutes()...)
		f.pageNextID = max(f.pageNextID, p.GetNextRouteId())
		if !p.GetLast() {
			return false, nil
		}
		routes, version, next := f.pages, f.pageVersion, f.pageNextID
		f.pages, f.pagesStarted = nil, false
		// A new cluster id (restored or recovered since) replaces the
		// catalog whatever its version.
		epoch := p.GetClusterId() != "" && f.clusterID != "" && p.GetClusterId() != f.clusterID
		if f.cat != nil && version <= f.cat.Version() && !epoch {
			return false, nil // older than what we route by: never go back
		}
		if p.GetClusterId() != "" {
			f.clusterID = p.GetClusterId()
		}
		if epoch {
			f.cat = nil
		}
		return f.install(version, next, routes)
	}
	d := ev.GetDelta()
	if d == nil {
		return false, nil // an event this build does not know: nothing to apply
	}
	switch {
	case f.cat == nil:
		return false, fmt.Errorf("%w: delta to version %d before any snapshot", errCatalogGap, d.GetVersion())
	case d.GetVersion() <= f.cat.Version():
		return false, nil // already applied (a watch resumed at an older version)
	case d.GetVersion() != f.cat.Version()+1:
		return false, fmt.Errorf("%w: delta to version %d after version %d", errCatalogGap, d.GetVersion(), f.cat.Version())
	}
	removed := make(map[uint64]bool, len(d.GetRemovedRouteIds()))
	for _, id := range d.GetRemovedRouteIds() {
		if _, ok := f.cat.Route(id); !ok || removed[id] {
			return false, fmt.Errorf("%w: version %d removes route %d, which is not live", errCatalogGap, d.GetVersion(), id)
		}
		removed[id] = true
	}
	// A move's step changes a route in place (cluster version 4).
	changed := make(map[uint64]*api.RouteDescriptor, len(d.GetChanged()))
	for _, r := range d.GetChanged() {
		if _, ok := f.cat.Route(r.GetRouteId()); !ok || removed[r.GetRouteId()] {
			return false, fmt.Errorf("%w: version %d changes route %d, which is not live", errCatalogGap, d.GetVersion(), r.GetRouteId())
		}
		changed[r.GetRouteId()] = r
	}
	routes := make([]*api.RouteDescriptor, 0, f.cat.Len()+len(d.GetAdded()))
	f.cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		switch c, ok := changed[r.ID]; {
		case ok:
			routes = append(routes, c)
		case !removed[r.ID]:
			routes = append(routes, r.ToProto())
		}
		return true
	})
	return f.install(d.GetVersion(), f.cat.NextRouteID(), append(routes, d.GetAdded()...))
}

// install makes routes the catalog at version, if they form a valid one.
func (f *follower) install(version, next uint64, routes []*api.RouteDescriptor) (bool, error) {
	sorted := slices.Clone(routes)
	for _, r := range sorted {
		// The simulator never splits, so the next id matters only to the
		// invariant check: tolerate a server that leaves it out.
		next = max(next, r.GetRouteId()+1)
	}
	slices.SortStableFunc(sorted, func(a, b *api.RouteDescriptor) int { return bytes.Compare(a.GetStart(), b.GetStart()) })
	cat, err := catalog.FromProto(&api.CatalogSnapshot{Version: version, NextRouteId: next, Routes: sorted})
	if err != nil {
		return false, fmt.Errorf("%w: %w", errCatalogGap, err)
	}
	f.cat = cat
	return true, nil
}
