package detector

import (
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/google/btree"

	"github.com/hotsplit/hotsplit/internal/saturate"
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
//
// Representation: base is the sorted entry slice Observe produces; splits
// and merges committed between two columns (OnSplit, OnMerge,
// StartCooldown) go into patch, a
// small persistent tree of per-route replacements, so each costs O(log p)
// instead of a copy of every entry. The next Observe folds patch into a new
// base.
type State struct {
	base           []Tracked // sorted by RouteID, unique; never modified
	patch          *btree.BTreeG[patchEntry]
	lastColumnAtMs uint64
	// cold is how long routes have been cold (RuleMerge, cold.go); nil
	// without that rule or before its first complete column.
	cold *coldState
	// cloneMu serialises btree.Clone of patch, which writes the source
	// tree's copy-on-write bookkeeping.
	cloneMu *sync.Mutex
}

// patchEntry replaces route RouteID's base entry: with t, or by nothing.
type patchEntry struct {
	routeID uint64
	deleted bool
	t       Tracked
}

func lessPatch(a, b patchEntry) bool { return a.routeID < b.routeID }

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
		if err := checkPool(tracked[i].Pool); err != nil {
			return nil, fmt.Errorf("%w: tracked[%d]: pool: %w", ErrInvalidState, i, err)
		}
	}
	out := make([]Tracked, len(tracked))
	for i, t := range tracked {
		out[i] = cloneTracked(t)
	}
	return &State{base: out, lastColumnAtMs: lastColumnAtMs}, nil
}

// fromBase wraps a freshly built sorted entry slice (Observe's output).
func fromBase(base []Tracked, lastColumnAtMs uint64, cold *coldState) *State {
	return &State{base: base, lastColumnAtMs: lastColumnAtMs, cold: cold}
}

// cloneTracked deep-copies t so that a restored State owns its slices.
func cloneTracked(t Tracked) Tracked {
	t.RecentScores = slices.Clone(t.RecentScores)
	if t.Pool != nil {
		pool := make([]PooledKey, len(t.Pool))
		for i, p := range t.Pool {
			pool[i] = p
			pool[i].Key = slices.Clone(p.Key)
		}
		t.Pool = pool
	}
	for _, e := range []*Explanation{&t.Explanation, &t.Merge} {
		e.HotKey = slices.Clone(e.HotKey)
		if e.SplitKeys != nil {
			keys := make([][]byte, len(e.SplitKeys))
			for i, k := range e.SplitKeys {
				keys[i] = slices.Clone(k)
			}
			e.SplitKeys = keys
		}
	}
	return t
}

// Tracked returns the tracked entries in route-id order. The returned slice
// is the caller's; the byte slices and RecentScores inside the entries are
// shared with the State and must not be modified.
func (s *State) Tracked() []Tracked {
	if s == nil {
		return nil
	}
	out := s.entries()
	if len(out) == 0 {
		return nil
	}
	if s.patch == nil {
		return slices.Clone(out) // entries() returned base itself
	}
	return out
}

// entries is the merged, sorted entry list: base itself when there is no
// patch (callers must not modify it then), else a new slice.
func (s *State) entries() []Tracked {
	if s == nil {
		return nil
	}
	if s.patch == nil || s.patch.Len() == 0 {
		return s.base
	}
	out := make([]Tracked, 0, len(s.base)+s.patch.Len())
	i := 0
	s.patch.Ascend(func(p patchEntry) bool {
		for i < len(s.base) && s.base[i].RouteID < p.routeID {
			out = append(out, s.base[i])
			i++
		}
		if i < len(s.base) && s.base[i].RouteID == p.routeID {
			i++ // replaced
		}
		if !p.deleted {
			out = append(out, p.t)
		}
		return true
	})
	return append(out, s.base[i:]...)
}

// Get returns the tracked entry of routeID (shared slices as in Tracked).
func (s *State) Get(routeID uint64) (Tracked, bool) {
	if s == nil {
		return Tracked{}, false
	}
	if s.patch != nil {
		if p, ok := s.patch.Get(patchEntry{routeID: routeID}); ok {
			return p.t, !p.deleted
		}
	}
	if i, ok := findIn(s.base, routeID); ok {
		return s.base[i], true
	}
	return Tracked{}, false
}

// Len is the number of tracked entries.
func (s *State) Len() int {
	if s == nil {
		return 0
	}
	if s.patch == nil {
		return len(s.base)
	}
	n := len(s.base)
	s.patch.Ascend(func(p patchEntry) bool {
		_, inBase := findIn(s.base, p.routeID)
		switch {
		case inBase && p.deleted:
			n--
		case !inBase && !p.deleted:
			n++
		}
		return true
	})
	return n
}

// LastColumnAtMs is the AtMs of the last column Observe applied (0 before
// the first).
func (s *State) LastColumnAtMs() uint64 {
	if s == nil {
		return 0
	}
	return s.lastColumnAtMs
}

func findIn(ts []Tracked, routeID uint64) (int, bool) {
	return slices.BinarySearchFunc(ts, routeID, func(t Tracked, id uint64) int {
		switch {
		case t.RouteID < id:
			return -1
		case t.RouteID > id:
			return 1
		}
		return 0
	})
}

// withPatch returns a State sharing s's base with a copy-on-write clone of
// its patch, ready for put/remove.
func (s *State) withPatch() *State {
	if s == nil {
		return &State{patch: btree.NewG(16, lessPatch), cloneMu: new(sync.Mutex)}
	}
	out := &State{base: s.base, lastColumnAtMs: s.lastColumnAtMs, cold: s.cold, cloneMu: new(sync.Mutex)}
	if s.patch == nil {
		out.patch = btree.NewG(16, lessPatch)
	} else {
		s.cloneMu.Lock()
		out.patch = s.patch.Clone()
		s.cloneMu.Unlock()
	}
	return out
}

// startCooldown sets routeID's cooldown to at least untilMs, adding an
// entry if needed. A cooldown is never shortened. s must come from
// withPatch.
func (s *State) startCooldown(routeID, untilMs uint64) {
	t, ok := s.Get(routeID)
	if !ok {
		t = Tracked{RouteID: routeID}
	}
	t.CooldownUntilMs = max(t.CooldownUntilMs, untilMs)
	s.patch.ReplaceOrInsert(patchEntry{routeID: routeID, t: t})
}

// OnSplit records a committed split (manual or an op step) at splitMs: the
// parent's entry goes, and every child except consumed (0 = none: the middle
// child that the op's next step will split) gets cooldown_until = splitMs +
// cfg.CooldownMs. A zero cooldown adds no entries. s is not modified; the
// cost is O(log p) in the splits since the last column, not O(entries).
func (s *State) OnSplit(cfg Config, parentID uint64, children []uint64, consumed uint64, splitMs uint64) *State {
	out := s.withPatch()
	if _, ok := out.Get(parentID); ok {
		out.patch.ReplaceOrInsert(patchEntry{routeID: parentID, deleted: true})
	}
	if cfg.CooldownMs == 0 {
		return out
	}
	until := saturate.Add(splitMs, cfg.CooldownMs)
	for _, id := range children {
		if id != 0 && id != consumed && id != parentID {
			out.startCooldown(id, until)
		}
	}
	return out
}

// OnMerge records a committed merge (manual or automatic) of leftID and
// rightID into mergedID at mergeMs: both parents' entries go, since their
// counters, cooldowns and explanations describe ranges that no longer
// exist, and the merged route gets cooldown_until = mergeMs +
// cfg.CooldownMs, the split cooldown, so a merge is not split again at once
// (a cooldown is never shortened). A zero cooldown adds no entry. s is not
// modified; the cost is O(log p), as for OnSplit.
func (s *State) OnMerge(cfg Config, leftID, rightID, mergedID uint64, mergeMs uint64) *State {
	out := s.withPatch()
	for _, id := range []uint64{leftID, rightID} {
		if _, ok := out.Get(id); ok && id != mergedID {
			out.patch.ReplaceOrInsert(patchEntry{routeID: id, deleted: true})
		}
	}
	if cfg.CooldownMs != 0 && mergedID != 0 {
		out.startCooldown(mergedID, saturate.Add(mergeMs, cfg.CooldownMs))
	}
	return out
}

// StartCooldown puts routeID in cooldown until atMs + cfg.CooldownMs (an op
// aborted after its first step: its middle child, exempt until then, must
// not be re-split at once). s is not modified.
func (s *State) StartCooldown(cfg Config, routeID uint64, atMs uint64) *State {
	out := s.withPatch()
	if cfg.CooldownMs != 0 && routeID != 0 {
		out.startCooldown(routeID, saturate.Add(atMs, cfg.CooldownMs))
	}
	return out
}

// ResetHysteresis returns s with every consecutive_over at 0 (a SetConfig
// committed: evidence earned under the old settings proves nothing under the
// new ones), and every pooled evidence (RulePooledEvidence: the weights
// may have changed). Cooldowns, scores and explanations are kept. The cold state
// (RuleMerge) restarts too: no route has been cold under the new settings
// yet. s is not modified. SetConfig is rare, so this folds the patch into a
// new base.
func (s *State) ResetHysteresis() *State {
	if s == nil {
		return fromBase(nil, 0, nil)
	}
	base := slices.Clone(s.entries())
	for i := range base {
		base[i].ConsecutiveOver = 0
		base[i].Pool = nil // evidence weighed under the old settings
	}
	return fromBase(base, s.lastColumnAtMs, s.cold.restart())
}
