package model

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// CheckCatalogs verifies every catalog version of the replay: docs/design.md#the-catalog on
// each, versions contiguous, and each step from one version to the next a
// split or a merge with its lineage (CheckTransition).
func (r *Replay) CheckCatalogs() []error {
	var errs []error
	for i, c := range r.Catalogs {
		if want := InitialVersion + uint64(i); c.Version != want {
			errs = append(errs, fmt.Errorf("catalog %d has version %d, want %d (versions not contiguous)", i, c.Version, want))
		}
		if err := c.Check(); err != nil {
			errs = append(errs, err)
		}
		if i > 0 {
			if err := CheckTransition(r.Catalogs[i-1], c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errs
}

// CheckTransition verifies that next follows prev by exactly one split or
// one merge, as the routes themselves record it:
//   - a split: one route gone, two new ones covering exactly its range,
//     each naming it as parent, with one split_at_hlc; the left child
//     keeps the parent's start and its operator mark (the right child's
//     mark depends on who split: the hash against the log's catalog
//     checks it);
//   - a merge: two adjacent routes gone (the left one first in key order),
//     one new route covering both, naming them as merged_from_left and
//     merged_from_right, with a merge HLC, and the left route's mark;
//   - every new route's id at least prev's next id: ids are never reused.
//
// The marks are compared only between catalogs that both record pins: the
// raise to version 3 marks every boundary without a new catalog version,
// so the catalog of that version carries marks its predecessor could not.
func CheckTransition(prev, next *Catalog) error {
	marks := prev.Pins == next.Pins
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: version %d to %d: %s", ErrInvariant, prev.Version, next.Version, fmt.Sprintf(format, args...))
	}
	before := map[uint64]bool{}
	for _, r := range prev.Routes {
		before[r.ID] = true
	}
	after := map[uint64]bool{}
	var added, removed []Route
	for _, r := range next.Routes {
		after[r.ID] = true
		if !before[r.ID] {
			added = append(added, r)
		}
	}
	for _, r := range prev.Routes {
		if !after[r.ID] {
			removed = append(removed, r)
		}
	}
	for _, a := range added {
		if a.ID < prev.NextID {
			return fail("new route %s reuses an id below the next id %d", a, prev.NextID)
		}
	}
	byStart := func(a, b Route) int { return bytes.Compare(a.Start, b.Start) }
	slices.SortFunc(added, byStart)
	slices.SortFunc(removed, byStart)
	switch {
	case len(removed) == 1 && len(added) == 2:
		p, l, r := removed[0], added[0], added[1]
		switch {
		case l.Parent != p.ID || r.Parent != p.ID || l.Merged() || r.Merged():
			return fail("split of %s made %s (parent r%d) and %s (parent r%d)", p, l, l.Parent, r, r.Parent)
		case l.SplitAtHLC == 0 || l.SplitAtHLC != r.SplitAtHLC:
			return fail("split of %s: children split at %d and %d", p, l.SplitAtHLC, r.SplitAtHLC)
		case !bytes.Equal(l.Start, p.Start) || !bytes.Equal(l.End, r.Start) || !bytes.Equal(r.End, p.End):
			return fail("split of %s made %s and %s, which do not cover it exactly", p, l, r)
		case marks && l.OperatorStart != p.OperatorStart:
			return fail("split of %s (operator start %v) made %s with operator start %v: the left child keeps its parent's start", p, p.OperatorStart, l, l.OperatorStart)
		}
	case len(removed) == 2 && len(added) == 1:
		l, r, m := removed[0], removed[1], added[0]
		switch {
		case !bytes.Equal(l.End, r.Start):
			return fail("merge of %s and %s, which are not adjacent", l, r)
		case m.MergedLeft != l.ID || m.MergedRight != r.ID:
			return fail("merge of %s and %s made %s naming r%d and r%d", l, r, m, m.MergedLeft, m.MergedRight)
		case m.MergedAtHLC == 0 || m.Parent != 0 || m.SplitAtHLC != 0:
			return fail("merged route %s: merged at %d, split parent r%d at %d", m, m.MergedAtHLC, m.Parent, m.SplitAtHLC)
		case !bytes.Equal(m.Start, l.Start) || !bytes.Equal(m.End, r.End):
			return fail("merge of %s and %s made %s, which does not cover both exactly", l, r, m)
		case m.Group != l.Group || l.Group != r.Group:
			return fail("merge of %s (group %d) and %s (group %d) made %s in group %d", l, l.Group, r, r.Group, m, m.Group)
		case l.State != api.RouteState_ROUTE_STATE_ACTIVE || r.State != api.RouteState_ROUTE_STATE_ACTIVE:
			return fail("merge of %s (%v) and %s (%v): not both ACTIVE", l, l.State, r, r.State)
		case marks && m.OperatorStart != l.OperatorStart:
			return fail("merge of %s (operator start %v) and %s made %s with operator start %v: the merged route keeps the left route's start", l, l.OperatorStart, r, m, m.OperatorStart)
		}
	default:
		return fail("%d routes gone and %d new: neither one split nor one merge", len(removed), len(added))
	}
	return nil
}

// change is one catalog change of a history, split or merge, for the
// rules that hold across both.
type change struct {
	version, index, hlc uint64
	what                string
}

// CheckChanges checks the applied splits and merges of one history (the
// model's, or a node's own as it reported them):
//   - versions grow by exactly one per change, splits and merges together;
//   - commit HLCs strictly increase (the fence holds for every catalog
//     change);
//   - an op step is applied at most once;
//   - no op step applies while the switch is off (enabledBefore(index) is
//     the switch as committed just before that log index);
//   - an automatic split of route r commits no earlier than cooldown after
//     the split or merge that made r, unless r is the middle child of that
//     op;
//   - an automatic merge commits no earlier than the merge delay after the
//     split or merge that made either of its routes. (The detector plans
//     it in a column before its step, so this is weaker than the rule it
//     follows, never stronger.)
//   - an automatic merge never removes a boundary an operator placed: its
//     right route's start is not marked (operator_boundaries_kept; marks
//     exist only from cluster version 3). A manual merge may remove one.
func CheckChanges(splits []SplitEvent, merges []MergeEvent, enabledBefore func(index uint64) bool) []error {
	var errs []error
	all := make([]change, 0, len(splits)+len(merges))
	for _, s := range splits {
		all = append(all, change{s.Version, s.Index, s.HLC, fmt.Sprintf("split of %s", s.Parent)})
	}
	for _, m := range merges {
		all = append(all, change{m.Version, m.Index, m.HLC, fmt.Sprintf("merge of %s and %s", m.Left, m.Right)})
	}
	slices.SortStableFunc(all, func(a, b change) int { return cmp.Compare(a.version, b.version) })
	for i := 1; i < len(all); i++ {
		prev, c := all[i-1], all[i]
		if c.version != prev.version+1 {
			errs = append(errs, fmt.Errorf("catalog versions jump from %d (%s) to %d (%s)", prev.version, prev.what, c.version, c.what))
		}
		if c.hlc <= prev.hlc {
			errs = append(errs, fmt.Errorf("commit HLCs not strictly increasing: version %d (%s) at %d after version %d (%s) at %d",
				c.version, c.what, c.hlc, prev.version, prev.what, prev.hlc))
		}
	}
	type stepKey struct {
		op   uint64
		step uint32
	}
	applied := map[stepKey]uint64{}
	once := func(op uint64, step uint32, version, index uint64, what string) {
		k := stepKey{op, step}
		if v, dup := applied[k]; dup {
			errs = append(errs, fmt.Errorf("op %d step %d applied twice: versions %d and %d", op, step, v, version))
		}
		applied[k] = version
		if !enabledBefore(index) {
			errs = append(errs, fmt.Errorf("op %d step %d (%s) applied at index %d (version %d) while the switch was off",
				op, step, what, index, version))
		}
	}
	for _, s := range splits {
		if !s.Auto() {
			continue
		}
		once(s.OpID, s.Step, s.Version, s.Index, "split")
		created := s.Parent.CreatedAtHLC()
		if !s.Middle && created != 0 {
			due := physical(created) + s.CooldownMs
			if physical(s.HLC) < due {
				errs = append(errs, fmt.Errorf("op %d step %d split %s at %d ms, %d ms before its cooldown ended (made at %d ms + %d ms)",
					s.OpID, s.Step, s.Parent, physical(s.HLC), due-physical(s.HLC), physical(created), s.CooldownMs))
			}
		}
	}
	for _, m := range merges {
		if !m.Auto() {
			continue
		}
		once(m.OpID, 1, m.Version, m.Index, "merge")
		for _, r := range []Route{m.Left, m.Right} {
			created := r.CreatedAtHLC()
			if created == 0 {
				continue
			}
			if due := physical(created) + m.DelayMs; physical(m.HLC) < due {
				errs = append(errs, fmt.Errorf("op %d merged %s and %s at %d ms, %d ms before the merge delay of %s ended (made at %d ms + %d ms)",
					m.OpID, m.Left, m.Right, physical(m.HLC), due-physical(m.HLC), r, physical(created), m.DelayMs))
			}
		}
		if m.Right.OperatorStart {
			errs = append(errs, fmt.Errorf("op %d merged %s and %s at version %d (index %d): an automatic merge removed the boundary %q, which an operator placed (operator_boundaries_kept)",
				m.OpID, m.Left, m.Right, m.Version, m.Index, m.Right.Start))
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
	changed := map[uint64]Route{}
	for _, r := range d.GetChanged() {
		if _, ok := c.Route(r.GetRouteId()); !ok {
			return nil, fmt.Errorf("delta to version %d changes route %d, which is not live at version %d", d.GetVersion(), r.GetRouteId(), c.Version)
		}
		changed[r.GetRouteId()] = FromAPI(r)
	}
	routes := make([]Route, 0, len(c.Routes)+len(d.GetAdded()))
	next := c.NextID
	for _, r := range c.Routes {
		if ch, ok := changed[r.ID]; ok {
			routes = append(routes, ch)
		} else if !removed[r.ID] {
			routes = append(routes, r)
		}
	}
	for _, a := range d.GetAdded() {
		routes = append(routes, FromAPI(a))
		next = max(next, a.GetRouteId()+1)
	}
	slices.SortStableFunc(routes, func(a, b Route) int { return bytes.Compare(a.Start, b.Start) })
	return c.derive(d.GetVersion(), next, routes), nil
}
