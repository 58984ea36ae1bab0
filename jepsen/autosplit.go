//go:build jepsen

package jepsen

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/jepsen/cluster"
	"github.com/hotsplit/hotsplit/jepsen/model"
	"github.com/hotsplit/hotsplit/sim"
)

// AutoSplit drives automatic splits in a scenario: the simulated data
// plane runs its phases one after another against the cluster, and the
// "exit right after an op's step 1 applies on the leader" failpoint is
// armed on every node before the load starts.
type AutoSplit struct {
	Phases   []SimPhase
	Rate     int // simulated operations per second
	SimNodes int
	// Failpoint arms after-op-step 1 (leader only) on every node; the first
	// node it stops is restarted after RestartAfter, and the failpoint is
	// cleared everywhere once it tripped.
	Failpoint    bool
	RestartAfter time.Duration
	// MinAutoSplits and MinAutoMerges are how many automatic splits and
	// merges the checked history must hold.
	MinAutoSplits, MinAutoMerges int
}

// SimPhase is one simulator run.
type SimPhase struct {
	Workload string
	Duration time.Duration
}

// failpointLine is what a node prints when the step-1 failpoint stops it.
var failpointLine = regexp.MustCompile(`jepsen failpoint after-op-step: exiting after op (\d+) step 1 applied at index (\d+)`)

// autoRun is one scenario's simulator and failpoint watcher.
type autoRun struct {
	cfg   AutoSplit
	logf  func(format string, args ...any)
	c     *cluster.Cluster
	start time.Time
	wg    sync.WaitGroup

	mu      sync.Mutex // guards the fields below
	evs     []string
	tripped *cluster.Node
	stats   []string
}

func (a *autoRun) note(format string, args ...any) {
	line := fmt.Sprintf("+%6.2fs ", time.Since(a.start).Seconds()) + fmt.Sprintf(format, args...)
	a.logf("auto %s", line)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.evs = append(a.evs, line)
}

func (a *autoRun) events() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.evs...)
}

func (a *autoRun) notes() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.stats...)
}

// startAuto arms the failpoint and starts the simulator phases and the
// failpoint watcher; both stop when ctx ends.
func startAuto(ctx context.Context, c *cluster.Cluster, cfg AutoSplit, seed uint64, start time.Time, logf func(string, ...any)) *autoRun {
	a := &autoRun{cfg: cfg, c: c, start: start, logf: logf}
	if cfg.Failpoint {
		for _, n := range c.Nodes {
			if err := n.SetFailpoint(ctx, cluster.Failpoint{Name: "after-op-step", Step: 1, LeaderOnly: true}); err != nil {
				a.note("arming the failpoint on %s: %v", n.ID, err)
			}
		}
		a.note("failpoint after-op-step 1 (leader only) armed on every node")
		a.wg.Add(1)
		go func() { defer a.wg.Done(); a.watchFailpoint(ctx) }()
	}
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.runSim(ctx, seed) }()
	return a
}

func (a *autoRun) wait() { a.wg.Wait() }

func (a *autoRun) runSim(ctx context.Context, seed uint64) {
	creds, err := a.c.ClientTLS("jepsen-sim", "admin")
	if err != nil {
		a.note("sim client: %v", err)
		return
	}
	cl, err := client.New(client.Config{Endpoints: a.c.Endpoints(), Actor: "jepsen-sim", RequestTimeout: 3 * time.Second, TLS: creds})
	if err != nil {
		a.note("sim client: %v", err)
		return
	}
	defer cl.Close()
	for i, ph := range a.cfg.Phases {
		w, err := sim.ParseWorkload(ph.Workload, sim.DefaultWorkloadOptions())
		if err != nil {
			a.note("sim phase %d: %v", i, err)
			return
		}
		s, err := sim.New(sim.Config{Cluster: cl, Workload: w, Nodes: a.cfg.SimNodes, Rate: a.cfg.Rate, Duration: ph.Duration,
			Seed: seed + uint64(i), RunID: fmt.Sprintf("j%d-%d", seed%100000, i), Identity: "jepsen-sim"})
		if err != nil {
			a.note("sim phase %d: %v", i, err)
			return
		}
		a.note("sim phase %d: %s at %d ops/s for %v", i, ph.Workload, a.cfg.Rate, ph.Duration)
		err = s.Run(ctx)
		st := s.Stats()
		line := fmt.Sprintf("sim phase %d (%s): %d ops, %d acked, %d late, %d refused; catalog v%d, %d routes; err %v",
			i, ph.Workload, st.Ops, st.OpsAcked, st.OpsLate, st.OpsRefused, st.CatalogVersion, st.Routes, err)
		a.note("%s", line)
		a.mu.Lock()
		a.stats = append(a.stats, line)
		a.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// maxTrips bounds how many leaders the failpoint may stop while it waits
// for a two-step op: the detector may plan one-step (median) ops first.
const maxTrips = 4

// opPlannedLine is how a node logs an op the detector planned.
var opPlannedLine = regexp.MustCompile(`msg="fsm: op planned" .*\bop_id=(\d+) .*\bsteps=(\d+)`)

// watchFailpoint waits for the failpoint to stop a node (exit status 137)
// and reads from that node's log which op it interrupted. It clears the
// failpoint everywhere at once — before a next leader could apply the same
// step entry late and trip too — and restarts the node after RestartAfter.
// A one-step op does not count: each node is armed again once it has
// applied past that entry. A two-step op ends the hunt.
func (a *autoRun) watchFailpoint(ctx context.Context) {
	seen := map[string]int{}
	for _, n := range a.c.Nodes {
		seen[n.ID] = len(n.Exits())
	}
	for trips := 0; trips < maxTrips; trips++ {
		n := a.waitTrip(ctx, seen)
		if n == nil {
			a.clearFailpoints(ctx)
			return
		}
		a.clearFailpoints(ctx)
		op, idx, steps := a.interrupted(n)
		a.note("failpoint stopped %s (exit 137) after step 1 of op %d at index %d, a %d-step op", n.ID, op, idx, steps)
		if steps == 2 {
			a.mu.Lock()
			a.tripped = n
			a.mu.Unlock()
			a.restartLater(ctx, n)
			return
		}
		// The others are armed again while the stopped node restarts, so
		// that the next op's step 1 is not missed.
		restarted := make(chan struct{})
		go func() { defer close(restarted); a.restartLater(ctx, n) }()
		err := a.rearmAfter(ctx, idx)
		<-restarted
		if err != nil {
			a.note("re-arming the failpoint: %v", err)
			a.clearFailpoints(ctx)
			a.restartTripped(ctx)
			return
		}
		a.note("failpoint re-armed on every node")
	}
	a.note("failpoint: %d trips without a two-step op; giving up", maxTrips)
	a.clearFailpoints(ctx)
}

// restartTripped restarts every node whose last run ended at a
// failpoint (status 137) and is down. While rearmAfter waits for a node
// that is down for another fault, it does not watch for trips: an armed
// node that leads then can apply the same step entry late, trip, and would
// otherwise stay down for the rest of the run.
func (a *autoRun) restartTripped(ctx context.Context) {
	for _, n := range a.c.Nodes {
		exits := n.Exits()
		if !n.Running() && len(exits) > 0 && exits[len(exits)-1].Status == 137 {
			a.note("failpoint also stopped %s while re-arming", n.ID)
			a.restartLater(ctx, n)
		}
	}
}

// restartLater restarts n after RestartAfter (unless ctx ends first).
func (a *autoRun) restartLater(ctx context.Context, n *cluster.Node) {
	if !sleepUntil(ctx, time.Now().Add(a.cfg.RestartAfter)) {
		return
	}
	if err := n.Start(); err != nil {
		a.note("restart %s: %v", n.ID, err)
		return
	}
	a.note("restarted %s", n.ID)
}

// rearmAfter arms the failpoint again on each node as soon as that node
// serves and has applied log index idx (so that it cannot trip on that
// entry again by applying it late as a new leader); it gives up after 15 s.
func (a *autoRun) rearmAfter(ctx context.Context, idx uint64) error {
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	armed := map[string]bool{}
	for len(armed) < len(a.c.Nodes) {
		for _, n := range a.c.Nodes {
			if armed[n.ID] {
				continue
			}
			if st, err := n.State(wctx); err != nil || st.AppliedIndex < idx {
				continue
			}
			if err := n.SetFailpoint(wctx, cluster.Failpoint{Name: "after-op-step", Step: 1, LeaderOnly: true}); err != nil {
				return err
			}
			armed[n.ID] = true
		}
		if len(armed) < len(a.c.Nodes) && !sleepUntil(wctx, time.Now().Add(20*time.Millisecond)) {
			return fmt.Errorf("only %d of %d nodes applied index %d in time", len(armed), len(a.c.Nodes), idx)
		}
	}
	return nil
}

// waitTrip polls for a node whose process exited with status 137.
func (a *autoRun) waitTrip(ctx context.Context, seen map[string]int) *cluster.Node {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, n := range a.c.Nodes {
			exits := n.Exits()
			tripped := false
			for _, e := range exits[seen[n.ID]:] {
				tripped = tripped || e.Status == 137
			}
			seen[n.ID] = len(exits)
			if tripped {
				return n
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// interrupted reads the op and log index the failpoint stopped n after,
// and the op's number of steps as n logged when it applied the plan.
func (a *autoRun) interrupted(n *cluster.Node) (op, index uint64, steps int) {
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		return 0, 0, 0
	}
	fps := failpointLine.FindAllSubmatch(b, -1)
	if len(fps) == 0 {
		return 0, 0, 0
	}
	last := fps[len(fps)-1]
	op, _ = strconv.ParseUint(string(last[1]), 10, 64)
	index, _ = strconv.ParseUint(string(last[2]), 10, 64)
	for _, m := range opPlannedLine.FindAllSubmatch(b, -1) {
		if id, _ := strconv.ParseUint(string(m[1]), 10, 64); id == op {
			steps, _ = strconv.Atoi(string(m[2]))
		}
	}
	return op, index, steps
}

func (a *autoRun) clearFailpoints(ctx context.Context) {
	for _, m := range a.c.Nodes {
		if m.Running() && !m.Paused() {
			if err := m.SetFailpoint(context.WithoutCancel(ctx), cluster.Failpoint{}); err != nil {
				a.note("clearing the failpoint on %s: %v", m.ID, err)
			}
		}
	}
}

// accept checks the scenario's own acceptance on the checked history: at
// least MinAutoSplits automatic splits and MinAutoMerges automatic merges,
// and — with the failpoint — the op
// whose step 1 stopped the leader finished its step 2 under a later term
// (the next leader), each step applied once.
func (a *autoRun) accept(replay *model.Replay, c *cluster.Cluster) []string {
	var out []string
	auto := 0
	for _, s := range replay.Splits {
		if s.Auto() {
			auto++
		}
	}
	if auto < a.cfg.MinAutoSplits {
		out = append(out, fmt.Sprintf("only %d automatic splits in the checked history, want at least %d", auto, a.cfg.MinAutoSplits))
	}
	merges := 0
	for _, m := range replay.Merges {
		if m.Auto() {
			merges++
		}
	}
	if merges < a.cfg.MinAutoMerges {
		out = append(out, fmt.Sprintf("only %d automatic merges in the checked history, want at least %d", merges, a.cfg.MinAutoMerges))
	}
	if !a.cfg.Failpoint {
		return out
	}
	a.mu.Lock()
	tripped := a.tripped
	a.mu.Unlock()
	if tripped == nil {
		return append(out, "the step-1 failpoint never interrupted a two-step op")
	}
	b, err := os.ReadFile(tripped.LogPath)
	if err != nil {
		return append(out, fmt.Sprintf("read %s: %v", tripped.LogPath, err))
	}
	all := failpointLine.FindAllSubmatch(b, -1)
	if len(all) == 0 {
		return append(out, fmt.Sprintf("%s exited 137 but its log has no failpoint line", tripped.ID))
	}
	m := all[len(all)-1]
	op, _ := strconv.ParseUint(string(m[1]), 10, 64)
	idx, _ := strconv.ParseUint(string(m[2]), 10, 64)
	var step1, step2 *model.SplitEvent
	for i := range replay.Splits {
		s := &replay.Splits[i]
		switch {
		case s.OpID == op && s.Step == 1:
			step1 = s
		case s.OpID == op && s.Step == 2:
			step2 = s
		}
	}
	desc := fmt.Sprintf("op %d (failpoint on %s after step 1 at index %d)", op, tripped.ID, idx)
	switch {
	case step1 == nil || step1.Index != idx:
		out = append(out, desc+": step 1 is not applied at that index in the log")
	case step2 == nil:
		out = append(out, desc+": step 2 never applied — not a two-step isolation, or never finished")
	case step2.Term <= step1.Term:
		out = append(out, fmt.Sprintf("%s: step 2 applied in term %d, not after step 1's term %d", desc, step2.Term, step1.Term))
	default:
		a.mu.Lock()
		a.stats = append(a.stats, fmt.Sprintf("interrupted two-step op %d: step 1 at index %d (term %d) stopped %s; step 2 at index %d (term %d) by the next leader; %d automatic splits and %d automatic merges in all",
			op, step1.Index, step1.Term, tripped.ID, step2.Index, step2.Term, auto, merges))
		a.mu.Unlock()
	}
	return out
}
