package detector

import (
	"errors"
	"fmt"
	"slices"
)

// ErrInvalidState is wrapped by every error NewState returns.
var ErrInvalidState = errors.New("invalid detector state")

// State is the detector's replicated state: tracked routes in route-id order
// and the window end of the last observed column. Immutable; see package doc.
// A nil *State is the empty state.
//
// Tracked entries are sparse (never one per live route). An entry is kept
// while its counter is non-zero, its cooldown is not over, or its
// explanation is recent: produced by a column that ended less than
// max(CooldownMs, 10 × that column's duration) before the current column's
// end. So `autosplit explain` still answers for a route that stopped being
// hot a few minutes ago, and the state shrinks back once the cluster calms.
type State struct {
	tracked        []Tracked // sorted by RouteID, unique
	lastColumnAtMs uint64
}

// NewState restores a State, e.g. from a snapshot. Entries must be in
// strictly increasing, non-zero route-id order. The entries are copied, so
// the caller may reuse tracked.
func NewState(tracked []Tracked, lastColumnAtMs uint64) (*State, error) {
	for i := range tracked {
		switch {
		case tracked[i].RouteID == 0:
			return nil, fmt.Errorf("%w: tracked[%d]: route_id 0", ErrInvalidState, i)
		case i > 0 && tracked[i-1].RouteID >= tracked[i].RouteID:
			return nil, fmt.Errorf("%w: tracked[%d]: route_id %d not above route_id %d of tracked[%d]",
				ErrInvalidState, i, tracked[i].RouteID, tracked[i-1].RouteID, i-1)
		}
	}
	out := make([]Tracked, len(tracked))
	for i, t := range tracked {
		out[i] = cloneTracked(t)
	}
	return &State{tracked: out, lastColumnAtMs: lastColumnAtMs}, nil
}

// cloneTracked deep-copies t so that a restored State owns its slices.
func cloneTracked(t Tracked) Tracked {
	t.RecentScores = slices.Clone(t.RecentScores)
	e := &t.Explanation
	e.HotKey = slices.Clone(e.HotKey)
	if e.SplitKeys != nil {
		keys := make([][]byte, len(e.SplitKeys))
		for i, k := range e.SplitKeys {
			keys[i] = slices.Clone(k)
		}
		e.SplitKeys = keys
	}
	return t
}

// Tracked returns the tracked entries in route-id order. The returned slice
// is the caller's; the byte slices and RecentScores inside the entries are
// shared with the State and must not be modified.
func (s *State) Tracked() []Tracked {
	if s == nil || len(s.tracked) == 0 {
		return nil
	}
	return slices.Clone(s.tracked)
}

// Get returns the tracked entry of routeID (shared slices as in Tracked).
func (s *State) Get(routeID uint64) (Tracked, bool) {
	if s == nil {
		return Tracked{}, false
	}
	if i, ok := s.find(routeID); ok {
		return s.tracked[i], true
	}
	return Tracked{}, false
}

// Len is the number of tracked entries.
func (s *State) Len() int {
	if s == nil {
		return 0
	}
	return len(s.tracked)
}

// LastColumnAtMs is the AtMs of the last column Observe applied (0 before
// the first).
func (s *State) LastColumnAtMs() uint64 {
	if s == nil {
		return 0
	}
	return s.lastColumnAtMs
}

func (s *State) find(routeID uint64) (int, bool) {
	return slices.BinarySearchFunc(s.tracked, routeID, func(t Tracked, id uint64) int {
		switch {
		case t.RouteID < id:
			return -1
		case t.RouteID > id:
			return 1
		}
		return 0
	})
}

// clone returns a State with a copy of s's entry slice, with room for extra
// more entries.
func (s *State) clone(extra int) *State {
	if s == nil {
		return &State{tracked: make([]Tracked, 0, extra)}
	}
	t := make([]Tracked, len(s.tracked), len(s.tracked)+extra)
	copy(t, s.tracked)
	return &State{tracked: t, lastColumnAtMs: s.lastColumnAtMs}
}

// startCooldown sets routeID's cooldown to at least untilMs, adding an
// entry if needed. A cooldown is never shortened. s must be a fresh clone.
func (s *State) startCooldown(routeID, untilMs uint64) {
	i, ok := s.find(routeID)
	if ok {
		s.tracked[i].CooldownUntilMs = max(s.tracked[i].CooldownUntilMs, untilMs)
		return
	}
	s.tracked = slices.Insert(s.tracked, i, Tracked{RouteID: routeID, CooldownUntilMs: untilMs})
}

// OnSplit records a committed split (manual or an op step) at splitMs: the
// parent's entry goes, and every child except consumed (0 = none: the middle
// child that the op's next step will split) gets cooldown_until = splitMs +
// cfg.CooldownMs. A zero cooldown adds no entries. s is not modified.
func (s *State) OnSplit(cfg Config, parentID uint64, children []uint64, consumed uint64, splitMs uint64) *State {
	out := s.clone(len(children))
	if i, ok := out.find(parentID); ok {
		out.tracked = slices.Delete(out.tracked, i, i+1)
	}
	if cfg.CooldownMs == 0 {
		return out
	}
	until := addSat64(splitMs, cfg.CooldownMs)
	for _, id := range children {
		if id != 0 && id != consumed && id != parentID {
			out.startCooldown(id, until)
		}
	}
	return out
}

// StartCooldown puts routeID in cooldown until atMs + cfg.CooldownMs (an op
// aborted after its first step: its middle child, exempt until then, must
// not be re-split at once). s is not modified.
func (s *State) StartCooldown(cfg Config, routeID uint64, atMs uint64) *State {
	out := s.clone(1)
	if cfg.CooldownMs != 0 && routeID != 0 {
		out.startCooldown(routeID, addSat64(atMs, cfg.CooldownMs))
	}
	return out
}

// ResetHysteresis returns s with every consecutive_over at 0 (a SetConfig
// committed: evidence earned under the old settings proves nothing under the
// new ones). Cooldowns, scores and explanations are kept. s is not modified.
func (s *State) ResetHysteresis() *State {
	out := s.clone(0)
	for i := range out.tracked {
		out.tracked[i].ConsecutiveOver = 0
	}
	return out
}
