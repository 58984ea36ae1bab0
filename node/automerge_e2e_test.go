package node

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/sim"
)

// Automatic merges end to end on a three-node TLS cluster at version 3.
// The bootstrap's split keys are the operator's: a hot key is isolated by
// an automatic two-step op, then, under a light uniform load, the leader's
// scheduler steps the merge ops the detector plans — through the one
// proposer, as MergeRange entries — until the isolation's two automatic
// boundaries are gone and the operator's layout is back; many more cold
// columns merge nothing further. Every replica applies the same merges, and
// a replay of the log reproduces the state.
func TestIntegrationAutoMergesColdRoutes(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 4000, 200
	const mergeWindows = 4
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 5 * stepMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10,
		MergeWindows: proto.Uint32(mergeWindows), MergeDelayMs: proto.Uint64(0)}
	c, ks := newAutoCluster(t, cfg, nil)
	initial := starts(c.leaderNode().FSM().State().Catalog())
	if len(initial) != 3 || pinned(c.leaderNode().FSM().State().Catalog()) != 2 {
		t.Fatalf("initial routes %q, %d pinned: want 3, the two split keys pinned", initial, pinned(c.leaderNode().FSM().State().Catalog()))
	}

	// A hot key, isolated by the detector: two automatic boundaries.
	opts := sim.DefaultWorkloadOptions()
	opts.HotShare = 0.9
	run := c.startSimSampled(t, sim.HotKey, opts, rate, 15*time.Second, 1, 1)
	w, _ := sim.ParseWorkload(sim.HotKey, opts)
	lo, _, _ := w.Hotspot(0)
	hot := ks.Key(lo)
	testutil.WaitFor(t, 15*time.Second, "the hot key alone in a route", func() bool {
		r := c.leaderRouteOf(hot)
		return r != nil && bytes.Equal(r.Start, hot) && bytes.Equal(r.End, append(bytes.Clone(hot), 0))
	})
	run.halt()
	if r := c.leaderRouteOf(hot); r.OperatorStart {
		t.Fatalf("the isolated route %v is pinned: an automatic split's boundary", r)
	}

	// Cold: the automatic boundaries merge away, the operator's stay.
	run = c.startSim(t, sim.Uniform, sim.DefaultWorkloadOptions(), 400, 30*time.Second, 2)
	var from uint64 // the last column when the merges were done
	testutil.WaitFor(t, 20*time.Second, "the isolation merged away", func() bool {
		n := c.leaderNode()
		if n == nil || n.FSM().State().Catalog().Len() != 3 {
			return false
		}
		from = n.FSM().State().LastColumnAtMs()
		return true
	})
	// Then 3 x merge_windows more columns, which must merge nothing more.
	testutil.WaitFor(t, 20*time.Second, "three merge windows of cold columns after the merges", func() bool {
		n := c.leaderNode()
		return n != nil && n.FSM().State().LastColumnAtMs() >= from+3*mergeWindows*stepMs
	})
	run.halt()
	c.waitConverged(10 * time.Second)

	st := c.leaderNode().FSM().State()
	if got := starts(st.Catalog()); !slices.Equal(got, initial) || pinned(st.Catalog()) != 2 {
		t.Fatalf("routes start at %q with %d pinned, want the operator's %q, pinned", got, pinned(st.Catalog()), initial)
	}
	// The state against the replay of the log up to its index: entries
	// (a fence renewal) may commit after it was read.
	log := commands(t, c.leaderNode())
	var prefix []logEntry
	steps := 0
	for _, e := range log {
		if e.index > st.Index() {
			continue
		}
		prefix = append(prefix, e)
		if m := e.cmd.GetMergeRange(); m != nil && m.GetOpId() != 0 && m.GetActor() == "scheduler" && e.cmd.GetMinVersion() >= 3 {
			steps++
		}
	}
	replayed, splits := replayLog(t, prefix)
	if replayed.State().Hash() != st.Hash() {
		t.Fatal("a replay of the log does not reproduce the state")
	}
	// Every automatic boundary merged away (the isolation's two, or more
	// had the detector cut elsewhere first), none of the operator's.
	var applied, merged int
	for _, d := range st.Decisions() {
		if d.GetKind() == api.DecisionKind_DECISION_KIND_MERGE_APPLIED {
			applied++
		}
	}
	for _, op := range st.Ops() {
		if op.GetKind() == api.OpKind_OP_KIND_MERGE && op.GetState() == api.OpState_OP_STATE_DONE {
			merged++
		}
	}
	if len(splits) < 2 || applied != len(splits) || merged != len(splits) || steps != len(splits) || len(st.LiveOps()) != 0 {
		t.Fatalf("%d automatic split steps; %d MERGE_APPLIED decisions, %d merge ops done, %d merge steps by the scheduler, live ops %v: want one merge per automatic boundary",
			len(splits), applied, merged, steps, st.LiveOps())
	}
	if r := st.Catalog().Lookup(hot); !r.Merged() || !r.OperatorStart {
		t.Fatalf("the route of the hot key %v (pinned %v) is not the merge that kept the operator's start", r, r.OperatorStart)
	}
}

// starts lists the routes' starts in key order.
func starts(c *catalog.Catalog) []string {
	var out []string
	c.Ascend(func(r *catalog.RouteDescriptor) bool { out = append(out, string(r.Start)); return true })
	return out
}

// pinned counts the routes whose start an operator placed.
func pinned(c *catalog.Catalog) int {
	n := 0
	c.Ascend(func(r *catalog.RouteDescriptor) bool {
		if r.OperatorStart {
			n++
		}
		return true
	})
	return n
}
