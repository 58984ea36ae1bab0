package node

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/sim"
)

// End-to-end tests of automatic splitting: a three-node
// in-process cluster, the simulated data plane putting load on it, and
// checks against the replicated state and each node's raft log. Time runs
// fast rather than fake: steps of 100–200 ms keep minutes of columns within
// seconds of CI time.

// totalPerMin is a workload's whole weighted load per minute (write 4,
// read 1) at rate ops/s with the given write fraction.
func totalPerMin(rate int, writes float64) uint64 {
	return uint64(float64(rate) * 60 * (writes*4 + (1-writes)*1))
}

// newAutoCluster starts three nodes with automatic splitting on and cfg
// as the bootstrap config; initial routes bound the simulator's key space.
func newAutoCluster(t *testing.T, cfg *api.Config, tweak func(*Config)) (*testCluster, sim.KeySpace) {
	t.Helper()
	ks, err := sim.NewKeySpace(sim.DefaultKeySpace)
	if err != nil {
		t.Fatal(err)
	}
	on := true
	c := newTestCluster(t, 3, func(n *Config) {
		n.AutoSplit = &on
		n.BootstrapConfig = proto.CloneOf(cfg)
		n.InitialSplits = ks.SplitKeys(1)
		if tweak != nil {
			tweak(n)
		}
	})
	return c, ks
}

// simRun is a simulator running against a test cluster.
type simRun struct {
	s    *sim.Sim
	stop context.CancelFunc
	done chan error
	cl   *client.Client
}

func (c *testCluster) startSim(t testing.TB, workload string, opts sim.WorkloadOptions, rate int, d time.Duration, seed uint64) *simRun {
	return c.startSimSampled(t, workload, opts, rate, d, seed, 0)
}

// startSimSampled is startSim with the data nodes' sketch sample rate (0:
// keyviz's default, 1 in 16).
func (c *testCluster) startSimSampled(t testing.TB, workload string, opts sim.WorkloadOptions, rate int, d time.Duration, seed uint64, sampleRate uint32) *simRun {
	t.Helper()
	var eps []string
	for _, n := range c.running() {
		eps = append(eps, n.GRPCAddr())
	}
	cl, err := client.New(client.Config{Endpoints: eps, TLS: adminTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := sim.ParseWorkload(workload, opts)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.Config{Cluster: cl, Workload: w, Nodes: 3, Rate: rate, Duration: d, Seed: seed, SampleRate: sampleRate, Identity: testAdmin, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &simRun{s: s, stop: cancel, done: make(chan error, 1), cl: cl}
	go func() { r.done <- s.Run(ctx) }()
	t.Cleanup(func() { r.halt(); cl.Close() })
	return r
}

// halt stops the simulator and waits for it.
func (r *simRun) halt() {
	r.stop()
	<-r.done
	r.done <- nil // keep halt idempotent
}

// logEntry is one decoded command of a node's raft log.
type logEntry struct {
	index, term uint64
	cmd         *api.Command
}

// commands decodes every command in a node's raft log, in order.
func commands(t testing.TB, n *Node) []logEntry {
	t.Helper()
	first, _ := n.stores.Logs.FirstIndex()
	last, _ := n.stores.Logs.LastIndex()
	var out []logEntry
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := n.stores.Logs.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.DecodeCommand(l.Data)
		if err != nil {
			t.Fatalf("log index %d: %v", i, err)
		}
		out = append(out, logEntry{l.Index, l.Term, cmd})
	}
	return out
}

// onsetMs is the window start of the first committed column with load.
func onsetMs(t *testing.T, log []logEntry) uint64 {
	t.Helper()
	for _, e := range log {
		// The load of every reported route (version 3), or rows (below).
		if col := e.cmd.GetObserveColumn(); col != nil && (col.GetRouteLoads().Len() > 0 || len(col.Rows) > 0) {
			return col.WindowStartMs
		}
	}
	t.Fatal("no column with load in the log")
	return 0
}

// appliedStep is an op step the FSM applied, with its parent route as it
// was just before.
type appliedStep struct {
	entry  logEntry
	parent *catalog.RouteDescriptor
	op     *api.Op
}

// replayLog applies log to a fresh FSM and returns it with every op step it
// applied; halts fail the test.
func replayLog(t testing.TB, log []logEntry) (*fsm.FSM, []appliedStep) {
	t.Helper()
	f := fsm.New(fsm.Options{Logger: slog.New(slog.DiscardHandler), Halt: func(err error) { t.Fatalf("replay halted: %v", err) }})
	var steps []appliedStep
	for _, e := range log {
		var parent *catalog.RouteDescriptor
		var op *api.Op
		if sr := e.cmd.GetSplitRange(); sr != nil && sr.OpId != 0 && f.State().Bootstrapped() {
			parent, _ = f.State().Catalog().Route(sr.RouteId)
			op, _ = f.State().Op(sr.OpId)
		}
		data, err := fsm.EncodeCommand(e.cmd)
		if err != nil {
			t.Fatal(err)
		}
		res := f.Apply(&raft.Log{Index: e.index, Term: e.term, Type: raft.LogCommand, Data: data}).(*fsm.Result)
		if parent != nil && res.GetCode() == api.ResultCode_RESULT_CODE_OK && !res.Duplicate {
			steps = append(steps, appliedStep{e, parent, op})
		}
	}
	return f, steps
}

// routeOf returns the route holding key, read from node id's FSM.
func (c *testCluster) routeOf(id string, key []byte) *catalog.RouteDescriptor {
	return c.node(id).FSM().State().Catalog().Lookup(key)
}

// leaderRouteOf is routeOf on the ready leader, or nil during an election,
// for polls: a leader lost under load must not panic the test binary.
func (c *testCluster) leaderRouteOf(key []byte) *catalog.RouteDescriptor {
	id := c.leader()
	if id == "" {
		return nil
	}
	return c.routeOf(id, key)
}

func TestIntegrationAutoIsolatesHotKey(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 4000, 200
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 5 * stepMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10}
	c, ks := newAutoCluster(t, cfg, nil)
	opts := sim.DefaultWorkloadOptions()
	opts.HotShare = 0.9 // the hot key is 90% of its route's traffic
	// Every operation feeds the sketch: at ~800 operations per 200 ms
	// column, 1-in-16 sampling leaves the hot key's lower bound noisy
	// enough (±15%) to fall under topKeyShare now and then, and the
	// detector then rightly takes the median first.
	run := c.startSimSampled(t, sim.HotKey, opts, rate, 6*time.Second, 1, 1)
	w, _ := sim.ParseWorkload(sim.HotKey, opts)
	lo, _, _ := w.Hotspot(0)
	hot := ks.Key(lo)
	testutil.WaitFor(t, 15*time.Second, "the hot key alone in a route", func() bool {
		r := c.leaderRouteOf(hot)
		return r != nil && bytes.Equal(r.Start, hot) && bytes.Equal(r.End, append(bytes.Clone(hot), 0))
	})
	run.halt()
	c.waitConverged(10 * time.Second)

	log := commands(t, c.leaderNode())
	onset := onsetMs(t, log)
	_, steps := replayLog(t, log)
	if len(steps) != 2 || steps[0].op.GetOrigin() != api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND {
		t.Fatalf("applied %d steps, want the two steps of one compound isolation", len(steps))
	}
	doneMs := hlc.Physical(steps[1].entry.cmd.Hlc)
	took := float64(doneMs-onset) / stepMs
	t.Logf("onset at %d, isolated %.1f steps later (op %d)", onset, took, steps[0].op.GetOpId())
	if limit := float64(cfg.CandidateWindows + 3); took > limit {
		t.Fatalf("isolation took %.1f steps from onset, limit %v", took, limit)
	}
}

func TestIntegrationAutoSplitsHotRangeUntilCool(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 4000, 200
	threshold := totalPerMin(rate, 0.5) * 3 / 10
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 3 * stepMs, CandidateWindows: 3, Threshold: threshold, MaxSplitsPerCycle: 1}
	c, ks := newAutoCluster(t, cfg, nil)
	opts := sim.DefaultWorkloadOptions()
	run := c.startSim(t, sim.HotRange, opts, rate, 40*time.Second, 2)
	w, _ := sim.ParseWorkload(sim.HotRange, opts)
	lo, hi, _ := w.Hotspot(0)
	loKey, hiKey := ks.Key(lo), ks.Key(hi)
	overlaps := func(r *catalog.RouteDescriptor) bool {
		return bytes.Compare(r.Start, hiKey) < 0 && (r.Unbounded() || bytes.Compare(loKey, r.End) < 0)
	}
	// Cool: no live op, and for several columns in a row no route of the
	// range scored at or above the threshold.
	coolColumns := 0
	var lastCol uint64
	testutil.WaitFor(t, 30*time.Second, "no route of the hot range above the threshold", func() bool {
		st := c.leaderNode().FSM().State()
		if st.LastColumnAtMs() == lastCol {
			return false
		}
		lastCol = st.LastColumnAtMs()
		hot := len(st.LiveOps()) > 0
		st.Catalog().Ascend(func(r *catalog.RouteDescriptor) bool {
			if overlaps(r) {
				if tr, ok := st.Detector().Get(r.ID); ok && (tr.LastScore >= threshold || tr.ConsecutiveOver > 0) {
					hot = true
				}
			}
			return true
		})
		if hot {
			coolColumns = 0
		} else {
			coolColumns++
		}
		return coolColumns >= 5
	})
	run.halt()
	_, steps := replayLog(t, commands(t, c.leaderNode()))
	pieces := 0
	c.leaderNode().FSM().State().Catalog().Ascend(func(r *catalog.RouteDescriptor) bool {
		if overlaps(r) {
			pieces++
		}
		return true
	})
	t.Logf("%d automatic splits; the hot range now spans %d routes", len(steps), pieces)
	if len(steps) < 2 || pieces < 3 {
		t.Fatalf("%d splits, hot range in %d routes: not split enough to cool down", len(steps), pieces)
	}
	// New clusters run with balance split keys (from cluster version 2): a
	// range splits at the balance point of its evidence (version 1: the
	// sub-bucket median).
	for _, s := range steps {
		if s.op.GetOrigin() != api.SplitOrigin_SPLIT_ORIGIN_BALANCE {
			t.Fatalf("op %d has origin %v, want balance", s.op.GetOpId(), s.op.GetOrigin())
		}
	}
}

func TestIntegrationAutoUniformBelowThresholdNeverSplits(t *testing.T) {
	skipShort(t)
	const rate, stepMs, steps = 4000, 200, 60
	// Each route carries a quarter of the threshold, the edge of cold:
	// automatic merges are off, so the catalog may not change at all.
	cfg := &api.Config{StepMs: stepMs, CooldownMs: stepMs, Threshold: 2 * totalPerMin(rate, 0.5), MaxMergesPerCycle: proto.Uint32(0)}
	c, _ := newAutoCluster(t, cfg, nil)
	run := c.startSim(t, sim.Uniform, sim.DefaultWorkloadOptions(), rate, steps*stepMs*time.Millisecond, 3)
	<-run.done
	run.done <- nil
	c.waitConverged(10 * time.Second)
	log := commands(t, c.leaderNode())
	columns := 0
	for _, e := range log {
		// The load of every reported route (version 3), or rows (below).
		if col := e.cmd.GetObserveColumn(); col != nil && (col.GetRouteLoads().Len() > 0 || len(col.Rows) > 0) {
			columns++
		}
	}
	st := c.leaderNode().FSM().State()
	t.Logf("%d columns with load committed; catalog version %d", columns, st.Catalog().Version())
	if columns < steps-5 {
		t.Fatalf("only %d columns committed in %d steps: the load did not reach the detector", columns, steps)
	}
	if v := st.Catalog().Version(); v != catalog.InitialVersion || len(st.Ops()) != 0 {
		t.Fatalf("uniform load below the threshold split: catalog version %d, ops %v", v, st.Ops())
	}
}

func TestIntegrationAutoFollowsShiftingHotspotRespectingCooldown(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 4000, 200
	const cooldownMs = 5 * stepMs
	shift := 4 * time.Second
	cfg := &api.Config{StepMs: stepMs, CooldownMs: cooldownMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10}
	c, ks := newAutoCluster(t, cfg, nil)
	opts := sim.DefaultWorkloadOptions()
	opts.ShiftEvery = shift
	run := c.startSim(t, sim.Shift, opts, rate, 3*shift, 4)
	<-run.done
	run.done <- nil
	c.waitConverged(10 * time.Second)
	log := commands(t, c.leaderNode())
	onset := onsetMs(t, log)
	_, steps := replayLog(t, log)
	w, _ := sim.ParseWorkload(sim.Shift, opts)
	followed := map[int]bool{}
	for _, s := range steps {
		commitMs := hlc.Physical(s.entry.cmd.Hlc)
		// No automatic split of a route before its split_at_hlc + cooldown,
		// except the middle child a live op's next step consumes.
		middle := s.entry.cmd.GetSplitRange().Step > 1
		if born := s.parent.SplitAtHLC; born != 0 && !middle && commitMs < hlc.Physical(born)+cooldownMs {
			t.Fatalf("op %d split r%d at %d ms, %d ms after it was created (cooldown %d)", s.op.GetOpId(), s.parent.ID, commitMs, commitMs-hlc.Physical(born), cooldownMs)
		}
		// Which hotspot did it follow? Detection lags a few steps.
		for phase := range 3 {
			lo, hi, _ := w.Hotspot(time.Duration(phase) * shift)
			r := s.parent
			if bytes.Compare(r.Start, ks.Key(hi)) < 0 && (r.Unbounded() || bytes.Compare(ks.Key(lo), r.End) < 0) {
				at := time.Duration(commitMs-onset) * time.Millisecond
				if at >= time.Duration(phase)*shift && at < time.Duration(phase+1)*shift+2*time.Second {
					followed[phase] = true
				}
			}
		}
	}
	t.Logf("%d automatic splits; hotspot phases followed: %v", len(steps), followed)
	if len(followed) < 2 {
		t.Fatalf("splits followed only phases %v of the moving hotspot", followed)
	}
}

// TestIntegrationSwitchOrdering shows, in the log, that an op step
// committed after a disable does nothing but leave the op PAUSED; enable
// resumes it at its next step; an op paused longer than op_ttl is aborted
// as stale; both commands go through a follower.
func TestIntegrationSwitchOrdering(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 4000, 200
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 5 * stepMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10, OpTtlMs: 1000}
	// Planned ops wait 2 s before their first step: long enough to act on.
	c, _ := newAutoCluster(t, cfg, func(n *Config) { n.OpStepDelay = 2 * time.Second })
	run := c.startSim(t, sim.HotKey, sim.DefaultWorkloadOptions(), rate, 30*time.Second, 5)
	defer run.halt()
	follower := c.followers()[0]
	setSwitch := func(on bool) {
		t.Helper()
		_, err := c.autoClient(follower).SetEnabled(ctxT(t, 10*time.Second), &api.SetEnabledRequest{Enabled: on, Actor: "test", Reason: "ordering test", RequestId: requestID()})
		if err != nil {
			t.Fatal(err)
		}
	}
	pendingOp := func() *api.Op {
		var op *api.Op
		testutil.WaitFor(t, 15*time.Second, "a planned op", func() bool {
			ops := c.leaderNode().FSM().State().LiveOps()
			if len(ops) == 1 && ops[0].State == api.OpState_OP_STATE_PENDING {
				op = ops[0]
			}
			return op != nil
		})
		return op
	}
	opState := func(id uint64) *api.Op {
		op, _ := c.leaderNode().FSM().State().Op(id)
		return op
	}

	// 1. Paused longer than op_ttl, then enabled: aborted as stale.
	stale := pendingOp()
	setSwitch(false)
	if op := opState(stale.OpId); op.State != api.OpState_OP_STATE_PAUSED {
		t.Fatalf("after disable op %d is %v", stale.OpId, op.State)
	}
	paused := opState(stale.OpId)
	testutil.WaitFor(t, 5*time.Second, "the pause to outlast op_ttl on the leader's clock", func() bool {
		now := hlc.Physical(c.leaderNode().Scheduler().Clock().Now())
		return now > hlc.Physical(paused.PausedAtHlc)+cfg.OpTtlMs
	})
	setSwitch(true)
	if op := opState(stale.OpId); op.State != api.OpState_OP_STATE_ABORTED || op.AbortReason != api.OpAbortReason_OP_ABORT_REASON_STALE {
		t.Fatalf("op %d paused past op_ttl is %v/%v after enable, want ABORTED/STALE", stale.OpId, op.State, op.AbortReason)
	}

	// 2. A step decided before the disable and committed after it: the
	// test proposes it itself, as a scheduler that read the switch just
	// before the disable would.
	op := pendingOp()
	setSwitch(false)
	version := c.leaderNode().FSM().State().Catalog().Version()
	leader := c.leaderNode()
	res, err := leader.Scheduler().Proposer().Propose(ctxT(t, 10*time.Second), &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{
		RouteId: op.TargetRouteId, SplitKey: op.SplitKeys[0], OpId: op.OpId, Step: 1, Actor: "stale scheduler"}}})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OP_PAUSED {
		t.Fatalf("step after disable answered %v, want OP_PAUSED", res.GetCode())
	}
	if v := leader.FSM().State().Catalog().Version(); v != version || opState(op.OpId).State != api.OpState_OP_STATE_PAUSED {
		t.Fatalf("a step after the disable changed the catalog (%d -> %d) or the op (%v)", version, v, opState(op.OpId).State)
	}
	// The log shows the order: the disable, then the step.
	var disableAt, stepAt uint64
	for _, e := range commands(t, leader) {
		if s := e.cmd.GetSetAutoSplit(); s != nil && !s.Enabled {
			disableAt = e.index
		}
		if s := e.cmd.GetSplitRange(); s != nil && s.OpId == op.OpId && s.Actor == "stale scheduler" {
			stepAt = e.index
		}
	}
	t.Logf("log: disable at index %d, op %d step 1 at index %d -> OP_PAUSED", disableAt, op.OpId, stepAt)
	if disableAt == 0 || stepAt <= disableAt {
		t.Fatalf("disable at %d, step at %d", disableAt, stepAt)
	}

	// 3. Enable resumes it at its next step; the scheduler finishes it.
	setSwitch(true)
	testutil.WaitFor(t, 15*time.Second, "the resumed op to finish", func() bool { return opState(op.OpId).State == api.OpState_OP_STATE_DONE })
	if got := opState(op.OpId); got.NextStep != uint32(len(got.SplitKeys))+1 {
		t.Fatalf("done op at next step %d with %d keys", got.NextStep, len(got.SplitKeys))
	}
	c.waitBusinessConverged(10 * time.Second)
}

func TestIntegrationAutoStatusAndExplain(t *testing.T) {
	skipShort(t)
	const rate, stepMs = 4000, 200
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 10_000, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10}
	c, ks := newAutoCluster(t, cfg, nil)
	run := c.startSimSampled(t, sim.HotKey, sim.DefaultWorkloadOptions(), rate, 20*time.Second, 6, 1) // exact evidence: see TestIntegrationAutoIsolatesHotKey
	defer run.halt()
	w, _ := sim.ParseWorkload(sim.HotKey, sim.DefaultWorkloadOptions())
	lo, _, _ := w.Hotspot(0)
	hot := ks.Key(lo)
	var iso *catalog.RouteDescriptor
	testutil.WaitFor(t, 15*time.Second, "the isolated hot route to be explained as in cooldown", func() bool {
		iso = c.leaderRouteOf(hot)
		if iso == nil || !bytes.Equal(iso.Start, hot) {
			return false
		}
		tr, ok := c.leaderNode().FSM().State().Detector().Get(iso.ID)
		return ok && tr.Explanation.Reason == detector.ReasonCooldown
	})
	via := c.followers()[0]
	ex, err := c.autoClient(via).Explain(ctxT(t, 5*time.Second), &api.ExplainRequest{RouteId: iso.ID})
	if err != nil {
		t.Fatal(err)
	}
	e := ex.GetTracked().GetExplanation()
	if e.GetReason() != api.Reason_REASON_COOLDOWN || e.GetCooldownLeftMs() == 0 || e.GetScore() < cfg.Threshold || ex.GetRoute().GetRouteId() != iso.ID {
		t.Fatalf("explain of the hot isolated route in cooldown: %v", ex)
	}
	st, err := c.autoClient(via).Status(ctxT(t, 5*time.Second), &api.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.GetSwitch().GetEnabled() || st.GetConfig().GetStepMs() != stepMs || st.GetLastColumnAtMs() == 0 ||
		len(st.GetCooldowns()) == 0 || len(st.GetCandidates()) == 0 || len(st.GetRecent()) == 0 || st.GetLiveRoutes() != uint64(c.leaderNode().FSM().State().Catalog().Len()) {
		t.Fatalf("status lacks something: %v", st)
	}
	origins := map[api.SplitOrigin]bool{}
	for _, d := range st.GetRecent() {
		origins[d.GetOrigin()] = true
	}
	if !origins[api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND] {
		t.Fatalf("recent decisions %v do not show the isolation", st.GetRecent())
	}
	t.Logf("explain r%d: %s, %d ms of cooldown left, score %d; status: %d candidates, %d cooldowns, lag %d ms",
		iso.ID, e.GetReason(), e.GetCooldownLeftMs(), e.GetScore(), len(st.GetCandidates()), len(st.GetCooldowns()), st.GetLastColumnLagMs())
}

// TestIntegrationAutoReplayIsDeterministic: after a simulated run of 150
// columns of 100 ms, a shifting hotspot and a leader change every 2.5 s,
// replaying each node's log into a fresh FSM gives the node's own state
// hash, and all nodes agree.
func TestIntegrationAutoReplayIsDeterministic(t *testing.T) {
	skipShort(t)
	const rate, stepMs, columns = 4000, 100, 150
	const every = 2500 * time.Millisecond // a shift, and a leader change
	cfg := &api.Config{StepMs: stepMs, CooldownMs: 10 * stepMs, CandidateWindows: 3, Threshold: totalPerMin(rate, 0.5) * 3 / 10}
	c, _ := newAutoCluster(t, cfg, nil)
	opts := sim.DefaultWorkloadOptions()
	opts.ShiftEvery = every
	run := c.startSim(t, sim.Shift, opts, rate, columns*stepMs*time.Millisecond, 7)
	changes := 0
	for deadline := time.Now().Add(columns*stepMs*time.Millisecond + time.Second); time.Now().Before(deadline); {
		select {
		case err := <-run.done:
			run.done <- err
			deadline = time.Now()
			continue
		case <-time.After(every):
		}
		if _, err := c.clusterClient(c.followers()[0]).TransferLeadership(ctxT(t, 10*time.Second), &api.TransferLeadershipRequest{}); err != nil {
			t.Logf("transfer: %v", err)
		} else {
			changes++
		}
	}
	run.halt()
	c.waitConverged(10 * time.Second)
	// Each node's state at its applied index i against a replay of exactly
	// its log entries up to i (the node keeps applying fence renewals, and a
	// log's tail may hold entries not yet committed).
	var common uint64 = 1 << 63
	prefixes := map[string][]logEntry{}
	for _, n := range c.running() {
		st := n.FSM().State()
		var prefix []logEntry
		for _, e := range commands(t, n) {
			if e.index <= st.Index() {
				prefix = append(prefix, e)
			}
		}
		f, steps := replayLog(t, prefix)
		if f.State().Hash() != st.Hash() {
			t.Fatalf("%s: replaying its log to index %d gives %x, the node holds %x", n.ID(), st.Index(), f.State().Hash(), st.Hash())
		}
		t.Logf("%s: %d commands to index %d, %d automatic split steps, replay hash matches", n.ID(), len(prefix), st.Index(), len(steps))
		if len(steps) == 0 {
			t.Fatalf("%s: no automatic split step in its log: the replay tested nothing the detector decided", n.ID())
		}
		prefixes[n.ID()] = prefix
		common = min(common, st.Index())
	}
	// And all nodes agree on the state at the index they all reached.
	var atCommon [32]byte
	for id, log := range prefixes {
		var upTo []logEntry
		for _, e := range log {
			if e.index <= common {
				upTo = append(upTo, e)
			}
		}
		g, _ := replayLog(t, upTo)
		if atCommon == ([32]byte{}) {
			atCommon = g.State().Hash()
		} else if g.State().Hash() != atCommon {
			t.Fatalf("%s: state at index %d differs from another node's", id, common)
		}
	}
	t.Logf("%d leader changes", changes)
	if changes < 2 {
		t.Fatalf("%d leader changes: the run must cross several terms", changes)
	}
}
