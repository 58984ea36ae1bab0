package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/hlc"
)

// RouteFate says in one sentence what became of a route id that is not
// live: "r1 was split into r2, r3 at 2026-12-06 10:00:01.000Z (catalog
// version 2)", or that it was never created. Every answer about a route
// that is gone (a split of it, a lookup by id, an explanation) gives this
// one, so an operator hears one story. ok is false for a live route.
//
// It reads, in order: the catalog's recent deltas (this node's History,
// local: any delta, a split's or a merge's, the one that removed the id);
// the live routes whose parent is the id, or that a merge of it made (older
// than the history, still live); the decision ring (a split or merge whose
// routes are gone too); else it says the route is older than what this
// node holds. It is a
// read-side answer, never replicated: a node restored from a snapshot has a
// shorter history and may say less, never something else.
func (s *State) RouteFate(id uint64) (fate string, ok bool) {
	if !s.bootstrapped {
		return "", false
	}
	cat := s.cat
	if _, live := cat.Route(id); live {
		return "", false
	}
	name := fmt.Sprintf("r%d", id)
	if id == 0 || id >= cat.NextRouteID() {
		return fmt.Sprintf("%s was never created (the next route id is %d)", name, cat.NextRouteID()), true
	}
	if d, found := removedBy(s.hist, id); found {
		return deltaFate(name, id, d), true
	}
	var children []*catalog.RouteDescriptor
	var mergedInto *catalog.RouteDescriptor
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		switch {
		case r.ParentID == id:
			children = append(children, r)
		case r.Merged() && (r.MergedFrom().Left == id || r.MergedFrom().Right == id):
			mergedInto = r
		}
		return true
	})
	if m := mergedInto; m != nil {
		other := m.MergedFrom().Left
		if other == id {
			other = m.MergedFrom().Right
		}
		return fmt.Sprintf("%s was merged with r%d into r%d at %s", name, other, m.ID, HLCTime(m.MergedFrom().AtHLC)), true
	}
	if len(children) > 0 {
		slices.SortFunc(children, func(a, b *catalog.RouteDescriptor) int { return cmp.Compare(a.ID, b.ID) })
		ids := make([]uint64, len(children))
		for i, c := range children {
			ids[i] = c.ID
		}
		if len(ids) == 1 { // the other child was split or merged since
			return fmt.Sprintf("%s was split at %s (r%d is one of its two children)", name, HLCTime(children[0].SplitAtHLC), ids[0]), true
		}
		return fmt.Sprintf("%s was split into %s at %s", name, routeList(ids), HLCTime(children[0].SplitAtHLC)), true
	}
	for i := len(s.decisions) - 1; i >= 0; i-- {
		d := s.decisions[i]
		switch {
		case d.GetRouteId() != id:
		case d.GetKind() == api.DecisionKind_DECISION_KIND_MANUAL_SPLIT && len(d.GetSplitKeys()) > 0:
			return fmt.Sprintf("%s was split at %s at %s (its children are gone too)", name, catalog.FormatKey(d.GetSplitKeys()[0]), HLCTime(d.GetAtHlc())), true
		case d.GetKind() == api.DecisionKind_DECISION_KIND_MANUAL_MERGE:
			return fmt.Sprintf("%s was merged at %s (the merged route is gone too)", name, HLCTime(d.GetAtHlc())), true
		}
	}
	base := uint64(0)
	if s.hist != nil {
		base = s.hist.Base()
	}
	return fmt.Sprintf("%s no longer exists: it was retired at or before catalog version %d, older than what this node holds", name, base), true
}

// removedBy finds the delta of h that removed route id.
func removedBy(h *catalog.History, id uint64) (catalog.Delta, bool) {
	if h == nil {
		return catalog.Delta{}, false
	}
	deltas, _ := h.Since(h.Base())
	for _, d := range deltas {
		if slices.Contains(d.Removed, id) {
			return d, true
		}
	}
	return catalog.Delta{}, false
}

// deltaFate words the delta that removed id: a split (one route into
// two), a merge (several into one), or any other replacement.
func deltaFate(name string, id uint64, d catalog.Delta) string {
	added := make([]uint64, len(d.Added))
	for i, r := range d.Added {
		added[i] = r.ID
	}
	at := fmt.Sprintf("at %s (catalog version %d)", HLCTime(d.CommitHLC), d.Version)
	switch {
	case len(d.Removed) == 1 && len(added) > 1:
		return fmt.Sprintf("%s was split into %s %s", name, routeList(added), at)
	case len(d.Removed) > 1 && len(added) == 1:
		others := slices.DeleteFunc(slices.Clone(d.Removed), func(r uint64) bool { return r == id })
		return fmt.Sprintf("%s was merged with %s into %s %s", name, routeList(others), routeList(added), at)
	case len(added) == 0:
		return fmt.Sprintf("%s was removed %s", name, at)
	}
	return fmt.Sprintf("%s was replaced by %s %s", name, routeList(added), at)
}

func routeList(ids []uint64) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("r%d", id)
	}
	return strings.Join(parts, ", ")
}

// HLCTime renders an HLC's physical part as a UTC time for people
// ("2026-12-06 10:00:01.000Z", as the CLI prints times); "-" for 0.
func HLCTime(h uint64) string {
	if h == 0 {
		return "-"
	}
	return time.UnixMilli(int64(hlc.Physical(h))).UTC().Format("2006-01-02 15:04:05.000Z")
}
