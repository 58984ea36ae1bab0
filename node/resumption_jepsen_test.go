//go:build jepsen

package node

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/sim"
)

// TestIntegrationResumptionAfterStep1 (jepsen build: it uses the apply
// failpoint): the leader is stopped right after step 1 of a two-step
// isolation applies; the next leader applies step 2 exactly once; the hot
// key ends up alone; every replica ends on one state hash. Ten seeds.
func TestIntegrationResumptionAfterStep1(t *testing.T) {
	skipShort(t)
	for seed := uint64(1); seed <= 10; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { resumeOnce(t, seed) })
	}
}

func resumeOnce(t *testing.T, seed uint64) {
	const rate, stepMs = 4000, 200
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 5 * stepMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10}
	c, ks := newAutoCluster(t, cfg, nil)
	tripped := make(chan string, 3)
	for _, id := range []string{"n1", "n2", "n3"} {
		n := c.node(id)
		tripHandlers.Store(id, func(string) {
			// Runs on the tripping node's apply goroutine, right after step 1
			// applied: from here on it must propose nothing, as a process
			// that exits here would. Revoking the fence makes every fenced
			// proposal fail; cancelling stops its duties. The kill follows.
			n.clock.Revoke()
			n.cancel()
			faults.failpoint.Store(nil) // the next leader must not trip too
			tripped <- id
		})
		defer tripHandlers.Delete(id)
	}
	faults.failpoint.Store(&failpoint{Name: "after-op-step", Step: 1, LeaderOnly: true})
	defer faults.failpoint.Store(nil)

	run := c.startSimSampled(t, sim.HotKey, sim.DefaultWorkloadOptions(), rate, 10*time.Second, seed, 1)
	defer run.halt()
	var victim string
	select {
	case victim = <-tripped:
	case <-time.After(20 * time.Second):
		t.Fatal("the failpoint never tripped: no isolation op started")
	}
	c.kill(victim) // the tripped leader stops here, as a crash right after step 1

	w, _ := sim.ParseWorkload(sim.HotKey, sim.DefaultWorkloadOptions())
	lo, _, _ := w.Hotspot(0)
	hot := ks.Key(lo)
	testutil.WaitFor(t, 15*time.Second, "the next leader to finish the isolation", func() bool {
		l := c.leader()
		if l == "" {
			return false
		}
		r := c.routeOf(l, hot)
		return bytes.Equal(r.Start, hot) && bytes.Equal(r.End, append(bytes.Clone(hot), 0))
	})
	run.halt()
	survivor := c.leader()
	log := commands(t, c.node(survivor))
	_, steps := replayLog(t, log)
	var op uint64
	step1Term, step2Term, step2s := uint64(0), uint64(0), 0
	for _, s := range steps {
		if s.op.GetOrigin() != api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND {
			continue
		}
		switch s.entry.cmd.GetSplitRange().Step {
		case 1:
			op, step1Term = s.op.GetOpId(), s.entry.term
		case 2:
			if s.op.GetOpId() == op {
				step2s++
				step2Term = s.entry.term
				t.Logf("op %d: step 1 in term %d, step 2 in term %d (killed leader %s)", op, step1Term, s.entry.term, victim)
			}
		}
	}
	if op == 0 || step2s != 1 {
		t.Fatalf("op %d: step 2 applied %d times", op, step2s)
	}
	if step2Term <= step1Term {
		t.Fatalf("step 2 committed in the killed leader's term %d: the next leader did not resume the op", step2Term)
	}

	// A duplicate of step 2 (as after an ambiguous timeout) is a no-op that
	// answers with the first result.
	before := c.node(survivor).FSM().State().Catalog().Version()
	done, _ := c.node(survivor).FSM().State().Op(op)
	res, err := c.node(survivor).Scheduler().Proposer().Propose(ctxT(t, 10*time.Second), &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{
		RouteId: done.TargetRouteId, SplitKey: done.SplitKeys[1], OpId: op, Step: 2, Actor: "duplicate"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(res.CommandResult, done.StepResults[1]) || c.node(survivor).FSM().State().Catalog().Version() != before {
		t.Fatalf("duplicate step 2 answered %v (first answer %v), catalog %d -> %d", res.CommandResult, done.StepResults[1], before, c.node(survivor).FSM().State().Catalog().Version())
	}

	c.restart(victim)
	c.waitConverged(20 * time.Second) // tracked state, cooldowns and ops included
}
