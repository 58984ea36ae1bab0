package placement

import (
	"testing"

	"pgregory.net/rapid"

	"github.com/hotsplit/hotsplit/catalog"
)

// Whatever the loads, groups and busy sets, a plan moves a loaded (or
// draining) ACTIVE route that no live op holds, from its own group to
// another ACTIVE group that is not busy, has reported in every deciding
// column and keeps the margin after the move; at most MaxMovesPerCycle
// plans, each group in at most one, and no route twice within the
// cooldown.
func TestDecideProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(t, "routes")
		var splits [][]byte
		var gids []uint64
		for i := range n {
			if i > 0 {
				splits = append(splits, []byte{byte('a' + i)})
			}
			gids = append(gids, uint64(rapid.IntRange(1, 4).Draw(t, "route-group")))
		}
		cat, err := catalog.NewInGroups(splits, gids)
		if err != nil {
			t.Fatal(err)
		}
		var gs []Group
		for id := uint64(1); id <= 4; id++ {
			gs = append(gs, Group{ID: id, Capacity: uint64(rapid.IntRange(1, 1000).Draw(t, "capacity")),
				Draining: rapid.IntRange(0, 5).Draw(t, "draining") == 0, Reported: rapid.IntRange(0, 5).Draw(t, "silent") > 0})
		}
		c := Config{Windows: uint32(rapid.IntRange(1, 3).Draw(t, "windows")), CooldownMs: 5000,
			MaxMovesPerCycle: uint32(rapid.IntRange(0, 3).Draw(t, "budget")), MarginBP: uint32(rapid.IntRange(0, 5000).Draw(t, "margin"))}
		st := State{}
		for col := range rapid.IntRange(1, 6).Draw(t, "columns") {
			in := Input{Config: c, Groups: gs, Catalog: cat, Loads: map[uint64]uint64{}, BusyRoutes: map[uint64]bool{}, BusyGroups: map[uint64]bool{},
				NowMs: uint64(1000 * (col + 1)), Enabled: rapid.IntRange(0, 5).Draw(t, "off") > 0}
			for id := uint64(1); id <= uint64(n); id++ {
				in.Loads[id] = uint64(rapid.IntRange(0, 800).Draw(t, "load"))
				in.BusyRoutes[id] = rapid.IntRange(0, 6).Draw(t, "busy-route") == 0
			}
			for _, g := range gs {
				in.BusyGroups[g.ID] = rapid.IntRange(0, 6).Draw(t, "busy-group") == 0
			}
			prev := st
			var plans []Plan
			st, plans, _ = Decide(in, prev)
			if uint32(len(plans)) > c.MaxMovesPerCycle || (!in.Enabled && len(plans) > 0) {
				t.Fatalf("%d plans, budget %d, enabled %v", len(plans), c.MaxMovesPerCycle, in.Enabled)
			}
			used := map[uint64]bool{}
			for _, p := range plans {
				r, _ := cat.Route(p.RouteID)
				from, to := gs[p.From-1], gs[p.To-1]
				limit := to.Capacity * uint64(10_000-c.MarginBP) / 10_000
				switch {
				case r.GroupID != p.From || p.From == p.To || in.BusyRoutes[p.RouteID]:
					t.Fatalf("plan %+v moves route %v", p, r)
				case to.Draining || in.BusyGroups[p.To] || in.BusyGroups[p.From] || used[p.From] || used[p.To]:
					t.Fatalf("plan %+v to or from a busy or draining group", p)
				case p.Load == 0 && !from.Draining:
					t.Fatalf("plan %+v moves an idle route off a group that is not draining", p)
				case p.ToPeak+p.Load > limit:
					t.Fatalf("plan %+v leaves the target over %d", p, limit)
				case st.Groups[p.To-1].Reported < c.Windows:
					t.Fatalf("plan %+v to a group that did not report in every deciding column", p)
				}
				for _, m := range prev.Moved {
					if m.RouteID == p.RouteID && in.NowMs < m.AtMs+c.CooldownMs {
						t.Fatalf("plan %+v within the cooldown of %+v", p, m)
					}
				}
				used[p.From], used[p.To] = true, true
			}
		}
	})
}
