package node

import (
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/sim"
)

// Automatic merges end to end on a three-node TLS cluster at version 3:
// under a light uniform load every route is cold, so the leader's
// scheduler steps the merge ops the detector plans — through the one
// proposer, as MergeRange entries — until one route is left; every replica
// applies the same merges, and a replay of the log reproduces the state.
func TestIntegrationAutoMergesColdRoutes(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 400, 200
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 5 * stepMs, CandidateWindows: 3, Threshold: 100 * totalPerMin(rate, 0.5),
		MergeWindows: proto.Uint32(4), MergeDelayMs: proto.Uint64(0)}
	c, _ := newAutoCluster(t, cfg, nil)
	if n := c.leaderNode().FSM().State().Catalog().Len(); n != 3 {
		t.Fatalf("%d initial routes, want 3", n)
	}
	run := c.startSim(t, sim.Uniform, sim.DefaultWorkloadOptions(), rate, 20*time.Second, 1)
	testutil.WaitFor(t, 20*time.Second, "the cold routes merged into one", func() bool {
		n := c.leaderNode()
		return n != nil && n.FSM().State().Catalog().Len() == 1
	})
	run.halt()
	c.waitConverged(10 * time.Second)

	st := c.leaderNode().FSM().State()
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
	if applied != 2 || merged != 2 || len(st.LiveOps()) != 0 {
		t.Fatalf("%d MERGE_APPLIED decisions, %d merge ops done, live ops %v: want two merges", applied, merged, st.LiveOps())
	}
	if r := st.Catalog().Lookup(nil); !r.Merged() {
		t.Fatalf("the one route left %v was not made by a merge", r)
	}
	log := commands(t, c.leaderNode())
	steps := 0
	for _, e := range log {
		if m := e.cmd.GetMergeRange(); m != nil && m.GetOpId() != 0 && m.GetActor() == "scheduler" && e.cmd.GetMinVersion() >= 3 {
			steps++
		}
	}
	replayed, _ := replayLog(t, log)
	if steps < 2 || replayed.State().Hash() != st.Hash() {
		t.Fatalf("%d merge steps proposed by the scheduler in the log; replay hash equal: %v", steps, replayed.State().Hash() == st.Hash())
	}
}
