package placement

import (
	"fmt"
	"testing"

	"github.com/hotsplit/hotsplit/catalog"
)

const capacity = 1_000_000

// threeGroups: routes 1..6 over keys a..f; 1-2 in group 1, 3-4 in group 2,
// 5-6 in group 3.
func threeGroups(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, err := catalog.NewInGroups([][]byte{[]byte("b"), []byte("c"), []byte("d"), []byte("e"), []byte("f")}, []uint64{1, 1, 2, 2, 3, 3})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func groups(reported ...bool) []Group {
	gs := []Group{{ID: 1, Capacity: capacity}, {ID: 2, Capacity: capacity}, {ID: 3, Capacity: capacity}}
	for i := range gs {
		gs[i].Reported = i >= len(reported) || reported[i]
	}
	return gs
}

var cfg = Config{Windows: 3, CooldownMs: 60_000, MaxMovesPerCycle: 1, MarginBP: 1000}

// run folds n identical columns from 1000 ms apart and returns the last
// decision.
func run(in Input, prev State, n int) (State, []Plan, []Decline) {
	var plans []Plan
	var declines []Decline
	for i := range n {
		in.NowMs = uint64(1000 * (i + 1))
		prev, plans, declines = Decide(in, prev)
	}
	return prev, plans, declines
}

func TestDecide(t *testing.T) {
	cat := threeGroups(t)
	// Group 1 at 1.4 C: a hot key's route at 0.5 C beside a warm range at
	// 0.9 C, which fits in no group; the others at 0.2 C and 0.3 C.
	hot := map[uint64]uint64{1: 500_000, 2: 900_000, 3: 100_000, 4: 100_000, 5: 200_000, 6: 100_000}
	base := Input{Config: cfg, Groups: groups(), Catalog: cat, Loads: hot, Enabled: true}
	for _, tc := range []struct {
		name     string
		in       func(Input) Input
		columns  int
		want     string
		declines string
	}{
		{"not yet: two columns over", nil, 2, "", ""},
		{"the hottest route to the group with most headroom", nil, 3, "r1 1->2 load 500000 from 1400000 peak 200000", ""},
		{"uniform load moves nothing", func(in Input) Input {
			in.Loads = map[uint64]uint64{1: 200_000, 2: 200_000, 3: 200_000, 4: 200_000, 5: 200_000, 6: 200_000}
			return in
		}, 5, "", ""},
		{"switch off", func(in Input) Input { in.Enabled = false; return in }, 3, "", "g1 switch"},
		{"a live move on the source", func(in Input) Input { in.BusyGroups = map[uint64]bool{1: true}; return in }, 3, "", "g1 live_move"},
		{"the movable route in a live op: none fits", func(in Input) Input { in.BusyRoutes = map[uint64]bool{1: true}; return in }, 3,
			"", "g1 no_room r2"},
		{"the hottest route is about to be split: split first", func(in Input) Input { in.Splitting = map[uint64]bool{2: true}; return in }, 3,
			"", "g1 split_first"},
		{"a colder route about to be split does not hold the hottest back", func(in Input) Input {
			in.Loads = map[uint64]uint64{1: 500_000, 2: 400_000, 3: 100_000, 4: 100_000, 5: 200_000, 6: 100_000}
			in.Groups = groups()
			in.Groups[0].Capacity = 800_000
			in.Splitting = map[uint64]bool{2: true}
			return in
		}, 3, "r1 1->2 load 500000 from 900000 peak 200000", ""},
		{"no group with room", func(in Input) Input {
			in.Loads = map[uint64]uint64{1: 1_500_000, 3: 800_000, 5: 800_000}
			return in
		}, 3, "", "g1 no_room r1"},
		{"the cool side moves when the hot one fits nowhere", func(in Input) Input {
			in.Loads = map[uint64]uint64{1: 950_000, 2: 300_000, 3: 300_000, 5: 300_000}
			return in
		}, 3, "r2 1->2 load 300000 from 1250000 peak 300000", ""},
		{"the roomy group is silent", func(in Input) Input { in.Groups = groups(true, false, true); return in }, 3,
			"r1 1->3 load 500000 from 1400000 peak 300000", ""},
		{"every target silent", func(in Input) Input { in.Groups = groups(true, false, false); return in }, 3, "", "g1 silent_target r1"},
		{"a draining group sheds its idle routes too", func(in Input) Input {
			in.Loads = map[uint64]uint64{3: 10}
			in.Groups = groups()
			in.Groups[0].Draining = true
			return in
		}, 3, "r1 1->3 load 0 from 0 peak 0", ""},
		{"budget", func(in Input) Input {
			in.Loads = map[uint64]uint64{1: 600_000, 2: 500_000, 3: 600_000, 4: 450_000}
			in.Groups = append(groups(), Group{ID: 4, Capacity: capacity, Reported: true})
			return in
		}, 3, "r1 1->3 load 600000 from 1100000 peak 0", "g2 budget"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base
			if tc.in != nil {
				in = tc.in(in)
			}
			_, plans, declines := run(in, State{}, tc.columns)
			if got := planText(plans); got != tc.want {
				t.Errorf("plans %q, want %q", got, tc.want)
			}
			if got := declineText(declines); got != tc.declines {
				t.Errorf("declines %q, want %q", got, tc.declines)
			}
		})
	}
}

// A moved route does not move again within the cooldown; after it, it
// may.
func TestDecideCooldown(t *testing.T) {
	cat := threeGroups(t)
	in := Input{Config: cfg, Groups: groups(), Catalog: cat, Loads: map[uint64]uint64{1: 600_000, 2: 500_000}, Enabled: true}
	st, plans, _ := run(in, State{}, 3)
	if len(plans) != 1 || len(st.Moved) != 1 || st.Moved[0] != (Moved{RouteID: 1, AtMs: 3000}) {
		t.Fatalf("plans %v moved %v", plans, st.Moved)
	}
	// The move has not committed (the route still in group 1): the next
	// column may not move it again.
	in.NowMs = 4000
	in.BusyRoutes = map[uint64]bool{2: true}
	if _, plans, declines := Decide(in, st); len(plans) != 0 || declineText(declines) != "g1 cooldown" {
		t.Fatalf("within the cooldown: %v %v", plans, declines)
	}
	in.NowMs = 3000 + cfg.CooldownMs
	if next, plans, _ := Decide(in, st); len(plans) != 1 || len(next.Moved) != 1 || next.Moved[0].AtMs != in.NowMs {
		t.Fatalf("after the cooldown: %v %v", plans, next.Moved)
	}
}

// The state keeps Windows loads per group and forgets a streak broken by
// one column under capacity.
func TestDecideState(t *testing.T) {
	cat := threeGroups(t)
	in := Input{Config: cfg, Groups: groups(), Catalog: cat, Loads: map[uint64]uint64{1: 1_500_000}, Enabled: false}
	st, _, _ := run(in, State{}, 5)
	if g := st.Groups[0]; g.Over != 5 || len(g.Loads) != 3 || g.Reported != 5 {
		t.Fatalf("group 1 after 5 columns: %+v", g)
	}
	in.Loads = map[uint64]uint64{1: 10}
	st, _, _ = Decide(in, st)
	if g := st.Groups[0]; g.Over != 0 || g.Loads[2] != 10 {
		t.Fatalf("after a cool column: %+v", g)
	}
}

func planText(ps []Plan) string {
	s := ""
	for _, p := range ps {
		s += fmt.Sprintf("r%d %d->%d load %d from %d peak %d", p.RouteID, p.From, p.To, p.Load, p.FromLoad, p.ToPeak)
	}
	return s
}

func declineText(ds []Decline) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += "; "
		}
		s += fmt.Sprintf("g%d %s", d.GroupID, d.Reason)
		if d.RouteID != 0 {
			s += fmt.Sprintf(" r%d", d.RouteID)
		}
	}
	return s
}
