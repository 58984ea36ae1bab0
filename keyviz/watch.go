package keyviz

import (
	"context"
	"errors"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// errCatalogGap: the watch delivered an event that does not follow the
// follower's version (a missing delta, a delta for an unknown route, a delta
// before any snapshot). The follower then starts over from a full snapshot.
var errCatalogGap = errors.New("catalog watch: gap in versions")

// routeFollower rebuilds the catalog from a watch — snapshot pages, then
// deltas — and hands each version to the sampler. It belongs to the watch
// loop's goroutine.
type routeFollower struct {
	s       *Sampler
	routes  map[uint64]*catalog.RouteDescriptor
	version uint64
	have    bool // routes hold a complete catalog at version
	// clusterID is the cluster the catalog came from (from snapshot pages):
	// a snapshot of another id (restored or recovered since) replaces the
	// sampler's table whatever its version.
	clusterID string

	// A snapshot being received page by page.
	building     map[uint64]*catalog.RouteDescriptor
	buildVersion uint64
}

func newRouteFollower(s *Sampler) *routeFollower {
	return &routeFollower{s: s}
}

// from is the version to watch from: after the last complete catalog, or 0
// (a full snapshot) without one.
func (f *routeFollower) from() uint64 {
	if !f.have {
		return 0
	}
	return f.version
}

// restart forgets a partial snapshot (a new watch starts its pages over) and,
// after a gap, the catalog itself.
func (f *routeFollower) restart(gap bool) {
	f.building = nil
	if gap {
		f.have = false
	}
}

func (f *routeFollower) apply(ev *api.WatchRoutesResponse) error {
	switch {
	case ev.GetSnapshotPage() != nil:
		p := ev.GetSnapshotPage()
		if f.building == nil || f.buildVersion != p.Version {
			f.building, f.buildVersion = map[uint64]*catalog.RouteDescriptor{}, p.Version
		}
		for _, r := range p.Routes {
			f.building[r.RouteId] = catalog.RouteFromProto(r)
		}
		if !p.Last {
			return nil
		}
		epoch := p.GetClusterId() != "" && f.clusterID != "" && p.GetClusterId() != f.clusterID
		if p.GetClusterId() != "" {
			f.clusterID = p.GetClusterId()
		}
		f.routes, f.version, f.have = f.building, p.Version, true
		f.building = nil
		return f.publish(epoch)
	case ev.GetDelta() != nil:
		d := ev.GetDelta()
		switch {
		case !f.have:
			return fmt.Errorf("%w: delta to version %d before any snapshot", errCatalogGap, d.Version)
		case d.Version <= f.version:
			return nil // already applied (a watch resumed at an older version)
		case d.Version != f.version+1:
			return fmt.Errorf("%w: delta to version %d after version %d", errCatalogGap, d.Version, f.version)
		}
		// Check the whole delta before changing anything.
		for _, id := range d.RemovedRouteIds {
			if f.routes[id] == nil {
				return fmt.Errorf("%w: version %d removes route %d, which is not live", errCatalogGap, d.Version, id)
			}
		}
		for _, r := range d.Changed {
			if f.routes[r.RouteId] == nil {
				return fmt.Errorf("%w: version %d changes route %d, which is not live", errCatalogGap, d.Version, r.RouteId)
			}
		}
		added := make(map[uint64]bool, len(d.Added))
		for _, r := range d.Added {
			if f.routes[r.RouteId] != nil || added[r.RouteId] {
				return fmt.Errorf("%w: version %d adds route %d, which is live", errCatalogGap, d.Version, r.RouteId)
			}
			added[r.RouteId] = true
		}
		for _, id := range d.RemovedRouteIds {
			delete(f.routes, id)
		}
		for _, r := range d.Added {
			f.routes[r.RouteId] = catalog.RouteFromProto(r)
		}
		for _, r := range d.Changed {
			f.routes[r.RouteId] = catalog.RouteFromProto(r)
		}
		f.version = d.Version
		return f.publish(false)
	}
	return nil // an event this build does not know: nothing to apply
}

// publish hands the catalog to the sampler (in any order: the table is
// indexed by id). reset is set for the catalog of a new cluster id, which
// the sampler takes even at a lower version.
func (f *routeFollower) publish(reset bool) error {
	rs := make([]*catalog.RouteDescriptor, 0, len(f.routes))
	for _, r := range f.routes {
		rs = append(rs, r)
	}
	if err := f.s.setRoutes(rs, f.version, reset); err != nil {
		return fmt.Errorf("catalog version %d: %w", f.version, err)
	}
	return nil
}

// watchLoop follows the catalog until ctx ends, resuming after the last
// version it applied whenever the watch ends, and from a full snapshot after
// a gap or a catalog the sampler refused.
func (r *Reporter) watchLoop(ctx context.Context) {
	f := newRouteFollower(r.s)
	bo := newBackoff(r.cfg.MinBackoff, r.cfg.MaxBackoff)
	for {
		from := f.from()
		err := r.cfg.Routes.Watch(ctx, from, func(ev *api.WatchRoutesResponse) error {
			before := f.version
			if err := f.apply(ev); err != nil {
				return err
			}
			if f.version != before {
				bo.reset() // progress
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		gap := errors.Is(err, errCatalogGap) || errors.Is(err, ErrInvalidRoutes)
		f.restart(gap)
		if err != nil {
			r.watchFailures.Add(1)
			r.log.Warn("keyviz: catalog watch ended", "error", err, "catalog_version", f.version, "from_version", from, "resync", gap)
		}
		if !r.sleep(ctx, bo.next()) {
			return
		}
	}
}
