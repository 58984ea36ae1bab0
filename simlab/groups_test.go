package simlab

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/hotsplit/hotsplit/sim"
)

// groupRelief runs the hot-key relief scenario over three groups (the CI
// subset of docs/benchmarks.md's table): a hot key at 0.5 C of the other
// groups' capacity C among uniform load of 0.2 C per group, in a group
// whose capacity is 0.5 C, so that it runs at 1.4 times its capacity. With
// crossGroup on, the hot key is isolated and then moved.
func groupRelief(t *testing.T, crossGroup bool, hotShare float64, seed uint64) (Result, []byte) {
	t.Helper()
	const c = 1_000_000
	o := sim.DefaultWorkloadOptions()
	o.HotShare = hotShare
	w, err := sim.ParseWorkload(sim.HotKey, o)
	if err != nil {
		t.Fatal(err)
	}
	lo, _, _ := w.Hotspot(0)
	hot := w.Keys().Key(lo)
	// Six-way initial splits spread over the three groups; the hot key's
	// group is the small one.
	splits := w.Keys().SplitKeys(6)
	caps := []uint64{c, c, c}
	caps[hotGroup(splits, hot)] = c / 2
	cfg := SuiteConfig()
	cfg.CrossGroup = crossGroup
	// Load in thresholds (50,000 weighted ops/min): 0.5 C hot + 0.6 C
	// uniform = 1.1 C = 22 thresholds.
	res, err := Run(Spec{Workload: w, Config: cfg, Load: 22, Columns: 30, Seed: seed, Nodes: 3, InitialSplits: splits,
		GroupCapacities: caps, Watch: [][]byte{hot}})
	if err != nil {
		t.Fatal(err)
	}
	return res, hot
}

// hotGroup is the index of the group (of three) that a bootstrap over
// splits gives the route holding key: contiguous runs in key order.
func hotGroup(splits [][]byte, key []byte) int {
	route := 0
	for route < len(splits) && bytes.Compare(key, splits[route]) >= 0 {
		route++
	}
	return route * 3 / (len(splits) + 1)
}

// TestGroupRelief: with cross_group on, the group holding the hot key
// drops below its capacity once the key is isolated and moved, and the
// move carries the hot key's route; with it off the group stays over. Under
// uniform load nothing moves.
func TestGroupRelief(t *testing.T) {
	on, hot := groupRelief(t, true, 0.4545, 1)
	off, _ := groupRelief(t, false, 0.4545, 1)
	if on.IsolatedAt[0] < 0 || off.IsolatedAt[0] < 0 {
		t.Fatalf("the hot key was not isolated: %d / %d", on.IsolatedAt[0], off.IsolatedAt[0])
	}
	if len(on.Moves) != 1 || !bytes.Equal(on.Moves[0].Start, hot) || on.Moves[0].ShareOfSourceLoadBP < 5000 {
		t.Fatalf("moves %+v, want one, of the hot key's route [%q, …)", on.Moves, hot)
	}
	if len(off.Moves) != 0 {
		t.Fatalf("moves with cross_group off: %+v", off.Moves)
	}
	src := int(on.Moves[0].From - 1)
	last := func(r Result, g int) float64 { return r.GroupLoads[len(r.GroupLoads)-1][g] }
	if last(on, src) >= 1 || last(off, src) < 1.2 {
		t.Fatalf("the hot group ends at %.2f of its capacity with moves, %.2f without", last(on, src), last(off, src))
	}
	for g := range 3 {
		if last(on, g) >= 1 {
			t.Errorf("group %d ends at %.2f of its capacity", g+1, last(on, g))
		}
	}
	t.Logf("the move carried %d bp of its group's load", on.Moves[0].ShareOfSourceLoadBP)
	t.Logf("isolated after column %d, moved after column %d; the hot group %.2f -> %.2f of its capacity (%.2f without moves); groups at the end %s",
		on.IsolatedAt[0], on.Moves[0].Column, on.GroupLoads[on.IsolatedAt[0]][src], last(on, src), last(off, src), fmtLoads(on.GroupLoads[len(on.GroupLoads)-1]))

	uniform, _ := groupRelief(t, true, 0.0001, 2)
	if len(uniform.Moves) != 0 {
		t.Fatalf("moves under uniform load: %+v", uniform.Moves)
	}
}

func fmtLoads(ls []float64) string {
	s := ""
	for i, l := range ls {
		s += fmt.Sprintf("%sg%d %.2f", map[bool]string{true: "", false: ", "}[i == 0], i+1, l)
	}
	return s
}
