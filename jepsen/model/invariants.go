package model

import (
	"bytes"
	"fmt"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// CheckCatalogs verifies every catalog version of the replay: SPEC §3 on
// each, versions contiguous, and route ids never reused.
func (r *Replay) CheckCatalogs() []error {
	var errs []error
	seen := map[uint64]bool{}
	for i, c := range r.Catalogs {
		if want := InitialVersion + uint64(i); c.Version != want {
			errs = append(errs, fmt.Errorf("catalog %d has version %d, want %d (versions not contiguous)", i, c.Version, want))
		}
		if err := c.Check(); err != nil {
			errs = append(errs, err)
		}
		if i == 0 {
			for _, rt := range c.Routes {
				seen[rt.ID] = true
			}
		}
	}
	for _, s := range r.Splits {
		for _, ch := range s.Children {
			if seen[ch.ID] {
				errs = append(errs, fmt.Errorf("version %d reuses route id %d", s.Version, ch.ID))
			}
			seen[ch.ID] = true
		}
	}
	return errs
}

// CheckSplits checks the applied splits of one history (the model's, or a
// node's own as it reported them), in version order:
//   - versions grow by exactly one per split;
//   - commit HLCs strictly increase;
//   - an op step is applied at most once;
//   - no op step applies while the switch is off (enabledBefore(index) is
//     the switch as committed just before that log index);
//   - an automatic split of route r commits no earlier than r's
//     split_at_hlc + cooldown, unless r is the middle child of that op.
func CheckSplits(splits []SplitEvent, enabledBefore func(index uint64) bool) []error {
	var errs []error
	type stepKey struct {
		op   uint64
		step uint32
	}
	applied := map[stepKey]uint64{}
	for i, s := range splits {
		if i > 0 {
			prev := splits[i-1]
			if s.Version != prev.Version+1 {
				errs = append(errs, fmt.Errorf("split versions jump from %d to %d", prev.Version, s.Version))
			}
			if s.HLC <= prev.HLC {
				errs = append(errs, fmt.Errorf("split HLCs not strictly increasing: version %d at %d after version %d at %d",
					s.Version, s.HLC, prev.Version, prev.HLC))
			}
		}
		if !s.Auto() {
			continue
		}
		k := stepKey{s.OpID, s.Step}
		if v, dup := applied[k]; dup {
			errs = append(errs, fmt.Errorf("op %d step %d applied twice: versions %d and %d", s.OpID, s.Step, v, s.Version))
		}
		applied[k] = s.Version
		if !enabledBefore(s.Index) {
			errs = append(errs, fmt.Errorf("op %d step %d applied at index %d (version %d) while the switch was off",
				s.OpID, s.Step, s.Index, s.Version))
		}
		if !s.Middle {
			due := physical(s.Parent.SplitAtHLC) + s.CooldownMs
			if s.Parent.SplitAtHLC != 0 && physical(s.HLC) < due {
				errs = append(errs, fmt.Errorf("op %d step %d split %s at %d ms, %d ms before its cooldown ended (split at %d ms + %d ms)",
					s.OpID, s.Step, s.Parent, physical(s.HLC), due-physical(s.HLC), physical(s.Parent.SplitAtHLC), s.CooldownMs))
			}
		}
	}
	return errs
}

// ApplyDelta builds the next catalog from c and one CatalogDelta as a node
// reported it (removed ids, added routes), without judging it: the caller
// checks the result.
func ApplyDelta(c *Catalog, d *api.CatalogDelta) (*Catalog, error) {
	removed := map[uint64]bool{}
	for _, id := range d.GetRemovedRouteIds() {
		if _, ok := c.Route(id); !ok {
			return nil, fmt.Errorf("delta to version %d removes route %d, which is not live at version %d", d.GetVersion(), id, c.Version)
		}
		removed[id] = true
	}
	routes := make([]Route, 0, len(c.Routes)+len(d.GetAdded()))
	next := c.NextID
	for _, r := range c.Routes {
		if !removed[r.ID] {
			routes = append(routes, r)
		}
	}
	for _, a := range d.GetAdded() {
		routes = append(routes, FromAPI(a))
		next = max(next, a.GetRouteId()+1)
	}
	slices.SortStableFunc(routes, func(a, b Route) int { return bytes.Compare(a.Start, b.Start) })
	return newCatalog(d.GetVersion(), next, routes), nil
}
