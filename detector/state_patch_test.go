package detector

import (
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestPatchMatchesModel drives OnSplit, OnMerge, StartCooldown and
// ResetHysteresis on a State built by Observe-like bases, and compares
// every view (Get, Len, Tracked) with a plain map model after each step;
// older States must not change when newer ones are derived from them.
func TestPatchMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		cfg := Config{CooldownMs: rapid.Uint64Range(0, 1000).Draw(t, "cooldown")}
		var base []Tracked
		model := map[uint64]Tracked{}
		for _, id := range rapid.SliceOfNDistinct(rapid.Uint64Range(1, 40), 0, 10, rapid.ID[uint64]).Draw(t, "base") {
			tr := Tracked{RouteID: id, ConsecutiveOver: uint32(id % 3), CooldownUntilMs: id * 7}
			base = append(base, tr)
			model[id] = tr
		}
		slices.SortFunc(base, func(a, b Tracked) int { return int(a.RouteID) - int(b.RouteID) })
		s, err := NewState(base, 5)
		if err != nil {
			t.Fatal(err)
		}
		type snap struct {
			s     *State
			model map[uint64]Tracked
		}
		var history []snap
		for range rapid.IntRange(0, 40).Draw(t, "steps") {
			history = append(history, snap{s, maps.Clone(model)})
			switch rapid.IntRange(0, 5).Draw(t, "op") {
			case 0, 1, 2:
				parent := rapid.Uint64Range(1, 60).Draw(t, "parent")
				kids := []uint64{rapid.Uint64Range(1, 60).Draw(t, "a"), rapid.Uint64Range(1, 60).Draw(t, "b")}
				consumed := rapid.SampledFrom([]uint64{0, kids[0], kids[1]}).Draw(t, "consumed")
				at := rapid.Uint64Range(0, 5000).Draw(t, "at")
				s = s.OnSplit(cfg, parent, kids, consumed, at)
				delete(model, parent)
				if cfg.CooldownMs != 0 {
					for _, k := range kids {
						if k != consumed && k != parent {
							tr := model[k]
							tr.RouteID = k
							tr.CooldownUntilMs = max(tr.CooldownUntilMs, at+cfg.CooldownMs)
							model[k] = tr
						}
					}
				}
			case 3:
				id := rapid.Uint64Range(1, 60).Draw(t, "cool")
				at := rapid.Uint64Range(0, 5000).Draw(t, "coolAt")
				s = s.StartCooldown(cfg, id, at)
				if cfg.CooldownMs != 0 {
					tr := model[id]
					tr.RouteID = id
					tr.CooldownUntilMs = max(tr.CooldownUntilMs, at+cfg.CooldownMs)
					model[id] = tr
				}
			case 5:
				left := rapid.Uint64Range(1, 60).Draw(t, "left")
				right := rapid.Uint64Range(1, 60).Draw(t, "right")
				merged := rapid.Uint64Range(1, 60).Draw(t, "merged")
				at := rapid.Uint64Range(0, 5000).Draw(t, "mergeAt")
				s = s.OnMerge(cfg, left, right, merged, at)
				for _, id := range []uint64{left, right} {
					if id != merged {
						delete(model, id)
					}
				}
				if cfg.CooldownMs != 0 {
					tr := model[merged]
					tr.RouteID = merged
					tr.CooldownUntilMs = max(tr.CooldownUntilMs, at+cfg.CooldownMs)
					model[merged] = tr
				}
			case 4:
				s = s.ResetHysteresis()
				for id, tr := range model {
					tr.ConsecutiveOver = 0
					model[id] = tr
				}
			}
			checkAgainst(t, s, model)
		}
		for _, h := range history {
			checkAgainst(t, h.s, h.model)
		}
	})
}

func checkAgainst(t *rapid.T, s *State, model map[uint64]Tracked) {
	got := s.Tracked()
	if len(got) != len(model) || s.Len() != len(model) {
		t.Fatalf("%d entries (Len %d), model %d", len(got), s.Len(), len(model))
	}
	for i, tr := range got {
		if i > 0 && got[i-1].RouteID >= tr.RouteID {
			t.Fatalf("entries out of order")
		}
		want, ok := model[tr.RouteID]
		if !ok || want.CooldownUntilMs != tr.CooldownUntilMs || want.ConsecutiveOver != tr.ConsecutiveOver {
			t.Fatalf("route %d: %+v, model %+v", tr.RouteID, tr, want)
		}
		if g, ok := s.Get(tr.RouteID); !ok || g.CooldownUntilMs != tr.CooldownUntilMs {
			t.Fatalf("Get(%d) disagrees with Tracked", tr.RouteID)
		}
	}
}
