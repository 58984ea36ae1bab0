// Package placement decides which routes move between shard groups
// (docs/design.md#automatic-placement): when a group's load stays above its
// capacity, its hottest movable route — an isolated hot key included — goes
// to the group with the most headroom, on positive evidence only.
//
// It is a pure function of one complete column's per-route loads, the
// groups, the catalog, the routes and groups busy with live ops, the time
// and its own previous state, so every replica and a replay decide alike
// (the FSM calls it in Apply of ObserveColumn). It must not read a clock,
// modify its inputs, or know about raft, the FSM or the data plane; it only
// plans: the FSM begins the moves it plans.
package placement

import (
	"cmp"
	"maps"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Config is the replicated placement settings.
type Config struct {
	// Windows is how many consecutive complete columns a group must be over
	// its capacity before a route moves off it, and how many a target must
	// have reported in.
	Windows uint32
	// CooldownMs: a moved route does not move again within it.
	CooldownMs uint64
	// MaxMovesPerCycle bounds the moves planned per column.
	MaxMovesPerCycle uint32
	// MarginBP: a target takes a route only if its peak load over the
	// deciding columns plus the route's load stays at or below its capacity
	// less MarginBP basis points of it.
	MarginBP uint32
}

// Group is one shard group as a column sees it.
type Group struct {
	ID       uint64
	Capacity uint64
	// Draining groups receive no route and shed theirs whatever their load.
	Draining bool
	// Reported: a data node of the group reported in this column. A group
	// none of whose nodes reported is silent, not cold.
	Reported bool
}

// Input is what one decision reads besides the previous state.
type Input struct {
	Config Config
	// Groups by id.
	Groups  []Group
	Catalog *catalog.Catalog
	// Loads is each route's load in this complete column (weighted ops per
	// minute, the detector's score); a route without one had none.
	Loads map[uint64]uint64
	// BusyRoutes are routes a live op will still change; BusyGroups the
	// groups a live move leaves or enters (one live move per source and per
	// target). Splitting are routes hot enough that the detector counts
	// them towards a split: a route is split (its hot key isolated) before
	// it moves, so that the move carries the hot child, not its cool
	// neighbours.
	BusyRoutes, BusyGroups, Splitting map[uint64]bool
	NowMs                             uint64
	// Enabled is the kill switch: off, nothing is planned.
	Enabled bool
}

// GroupState is what placement remembers of a group between columns.
type GroupState struct {
	ID uint64
	// Over: consecutive complete columns with the group's load above its
	// capacity. Reported: consecutive ones in which it reported.
	Over, Reported uint32
	// Loads are the group's loads in its last Windows columns, oldest
	// first.
	Loads []uint64
	// Declined is the reason the group last moved nothing for, kept by
	// the caller so that it records a decline once, not every column.
	Declined string
}

// Moved is a route a move took, and when: it does not move again within
// the cooldown.
type Moved struct {
	RouteID, AtMs uint64
}

// State is placement's replicated state, by group id and by route id.
type State struct {
	Groups []GroupState
	Moved  []Moved
}

// Plan is one move to begin.
type Plan struct {
	RouteID, From, To uint64
	// Load is the route's load in the column; FromLoad and ToPeak the
	// source's load and the target's peak over the deciding columns.
	Load, FromLoad, ToPeak uint64
}

// Reason says why an overloaded group moved nothing.
type Reason int

// The reasons a move is declined.
const (
	ReasonNone Reason = iota
	// ReasonSwitch: the kill switch is off.
	ReasonSwitch
	// ReasonBudget: MaxMovesPerCycle moves were planned already.
	ReasonBudget
	// ReasonLiveMove: the group leaves or enters a live move already.
	ReasonLiveMove
	// ReasonCooldown: every movable route moved within the cooldown.
	ReasonCooldown
	// ReasonNoRoute: no route of the group is ACTIVE, free of live ops and
	// loaded (a draining group also moves idle ones).
	ReasonNoRoute
	// ReasonSplitFirst: the group's movable load sits in routes the
	// detector is about to split; they move once split.
	ReasonSplitFirst
	// ReasonNoRoom: no ACTIVE group that reported has room for the route.
	ReasonNoRoom
	// ReasonSilentTarget: only groups that did not report in every
	// deciding column would have had room.
	ReasonSilentTarget
)

var reasonNames = [...]string{"none", "switch", "budget", "live_move", "cooldown", "no_route", "split_first", "no_room", "silent_target"}

// String is the reason's label (metrics, explanations).
func (r Reason) String() string { return reasonNames[r] }

// Reasons lists every reason a move is declined.
func Reasons() []Reason {
	return []Reason{ReasonSwitch, ReasonBudget, ReasonLiveMove, ReasonCooldown, ReasonNoRoute, ReasonSplitFirst, ReasonNoRoom, ReasonSilentTarget}
}

// Decline is an overloaded or draining group that moves nothing in this
// column, and why; RouteID is the route it would have moved (0: none).
type Decline struct {
	GroupID, RouteID uint64
	Reason           Reason
}

// Decide folds one complete column into prev and plans the moves it calls
// for. Groups are judged hottest excess first (then by id), each route at
// most once.
func Decide(in Input, prev State) (State, []Plan, []Decline) {
	loads := groupLoads(in)
	next := State{Groups: make([]GroupState, 0, len(in.Groups))}
	for _, g := range in.Groups {
		p := find(prev.Groups, g.ID)
		gs := GroupState{ID: g.ID, Declined: p.Declined}
		if loads[g.ID] > g.Capacity {
			gs.Over = p.Over + 1
		}
		if g.Reported {
			gs.Reported = p.Reported + 1
		}
		gs.Loads = append(slices.Clone(p.Loads), loads[g.ID])
		if n := int(max(in.Config.Windows, 1)); len(gs.Loads) > n {
			gs.Loads = gs.Loads[len(gs.Loads)-n:]
		}
		next.Groups = append(next.Groups, gs)
	}
	for _, m := range prev.Moved {
		if in.NowMs < m.AtMs+in.Config.CooldownMs {
			next.Moved = append(next.Moved, m)
		}
	}

	type source struct {
		g      Group
		excess uint64
	}
	var sources []source
	for i, g := range in.Groups {
		switch {
		case g.Draining && routesOf(in.Catalog, g.ID) > 0:
			sources = append(sources, source{g, loads[g.ID]})
		case !g.Draining && next.Groups[i].Over >= max(in.Config.Windows, 1):
			sources = append(sources, source{g, loads[g.ID] - g.Capacity})
		}
	}
	slices.SortStableFunc(sources, func(a, b source) int {
		return cmp.Or(cmp.Compare(b.excess, a.excess), cmp.Compare(a.g.ID, b.g.ID))
	})
	busy := maps.Clone(in.BusyGroups)
	if busy == nil {
		busy = map[uint64]bool{}
	}
	var plans []Plan
	var declines []Decline
	for _, src := range sources {
		g := src.g
		switch {
		case !in.Enabled:
			declines = append(declines, Decline{GroupID: g.ID, Reason: ReasonSwitch})
			continue
		case uint32(len(plans)) >= in.Config.MaxMovesPerCycle:
			declines = append(declines, Decline{GroupID: g.ID, Reason: ReasonBudget})
			continue
		case busy[g.ID]:
			declines = append(declines, Decline{GroupID: g.ID, Reason: ReasonLiveMove})
			continue
		}
		cands, why := movable(in, next.Moved, g)
		var route, load, to, peak uint64
		d := Decline{GroupID: g.ID, Reason: why}
		for i, c := range cands {
			t, p, w := roomiest(in, next.Groups, busy, g.ID, c.load)
			if t != 0 {
				route, load, to, peak = c.id, c.load, t, p
				break
			}
			// The hottest route speaks for the group, unless a colder
			// one would have fitted a group that did not report: silence
			// is not room.
			if i == 0 || w == ReasonSilentTarget && d.Reason != ReasonSilentTarget {
				d.RouteID, d.Reason = c.id, w
			}
		}
		if route == 0 {
			declines = append(declines, d)
			continue
		}
		plans = append(plans, Plan{RouteID: route, From: g.ID, To: to, Load: load, FromLoad: loads[g.ID], ToPeak: peak})
		busy[g.ID], busy[to] = true, true
		next.Moved = append(next.Moved, Moved{RouteID: route, AtMs: in.NowMs})
	}
	slices.SortFunc(next.Moved, func(a, b Moved) int { return cmp.Compare(a.RouteID, b.RouteID) })
	next.Moved = slices.CompactFunc(next.Moved, func(a, b Moved) bool { return a.RouteID == b.RouteID })
	return next, plans, declines
}

// groupLoads sums the column's route loads by the group that serves each
// route (a moving route counts to its source until the commit). It visits
// the loaded routes only: a column, not the catalog. Saturating sums do
// not depend on the order.
func groupLoads(in Input) map[uint64]uint64 {
	out := map[uint64]uint64{}
	for id, l := range in.Loads {
		if r, ok := in.Catalog.Route(id); ok && l > 0 {
			out[r.GroupID] = saturate.Add(out[r.GroupID], l)
		}
	}
	return out
}

// candidate is a route that may move, with its load.
type candidate struct{ id, load uint64 }

// movable lists g's loaded ACTIVE routes, free of live ops and out of
// their move cooldown, hottest first (then by id); a draining group's idle
// routes count too. The first whose load some group has room for moves:
// where the hot load of a split sits in one child, that child is tried
// before the cool side, which moves only if the hot one fits nowhere.
// With none, the reason is the cooldown if it held some back.
func movable(in Input, moved []Moved, g Group) ([]candidate, Reason) {
	var out []candidate
	cooling := false
	var hottestSplitting uint64
	consider := func(r *catalog.RouteDescriptor) {
		l := in.Loads[r.ID]
		switch {
		case r.GroupID != g.ID || r.State != catalog.StateActive || in.BusyRoutes[r.ID] || (l == 0 && !g.Draining):
		case in.Splitting[r.ID]:
			hottestSplitting = max(hottestSplitting, l)
		case slices.ContainsFunc(moved, func(m Moved) bool { return m.RouteID == r.ID }):
			cooling = true
		default:
			out = append(out, candidate{r.ID, l})
		}
	}
	if g.Draining {
		// A draining group sheds idle routes too: all of them.
		in.Catalog.Ascend(func(r *catalog.RouteDescriptor) bool { consider(r); return true })
	} else {
		// Only loaded routes can move: the column's, in any order (the
		// candidates are sorted below).
		for id := range in.Loads {
			if r, ok := in.Catalog.Route(id); ok {
				consider(r)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b candidate) int { return cmp.Or(cmp.Compare(b.load, a.load), cmp.Compare(a.id, b.id)) })
	switch {
	case hottestSplitting > 0 && (len(out) == 0 || hottestSplitting > out[0].load):
		// Split first: the group's hottest route is about to be cut, and
		// its hot child is what should move.
		return nil, ReasonSplitFirst
	case len(out) > 0:
		return out, ReasonNoRoom
	case cooling:
		return nil, ReasonCooldown
	}
	return nil, ReasonNoRoute
}

// roomiest is the ACTIVE group other than from, not busy, that reported in
// every deciding column, with the most headroom once load is added, if
// that headroom clears the margin; its peak load over the deciding
// columns.
func roomiest(in Input, states []GroupState, busy map[uint64]bool, from, load uint64) (uint64, uint64, Reason) {
	var best, bestPeak, bestRoom uint64
	silentFits := false
	for i, t := range in.Groups {
		if t.ID == from || t.Draining || busy[t.ID] {
			continue
		}
		peak := slices.Max(append([]uint64{0}, states[i].Loads...))
		// Capacities are at most 2^48 and the margin at most 10000 bp, so
		// the product fits.
		limit := t.Capacity * uint64(10_000-min(in.Config.MarginBP, 10_000)) / 10_000
		after := saturate.Add(peak, load)
		if after > limit {
			continue
		}
		if states[i].Reported < max(in.Config.Windows, 1) {
			silentFits = true
			continue
		}
		if room := limit - after; best == 0 || room > bestRoom {
			best, bestPeak, bestRoom = t.ID, peak, room
		}
	}
	switch {
	case best != 0:
		return best, bestPeak, ReasonNone
	case silentFits:
		return 0, 0, ReasonSilentTarget
	}
	return 0, 0, ReasonNoRoom
}

func routesOf(cat *catalog.Catalog, group uint64) int {
	n := 0
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		if r.GroupID == group {
			n++
		}
		return true
	})
	return n
}

func find(gs []GroupState, id uint64) GroupState {
	i, ok := slices.BinarySearchFunc(gs, id, func(g GroupState, id uint64) int { return cmp.Compare(g.ID, id) })
	if !ok {
		return GroupState{ID: id}
	}
	return gs[i]
}
