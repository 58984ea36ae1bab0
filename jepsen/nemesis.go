//go:build jepsen

package jepsen

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/hotsplit/hotsplit/jepsen/checker"
	"github.com/hotsplit/hotsplit/jepsen/cluster"
	"github.com/hotsplit/hotsplit/jepsen/history"
)

// FaultKind names one nemesis.
type FaultKind string

// Faults. Each is injected for a bounded time and then healed.
const (
	// KillRandom: SIGKILL a random running node; restart it at heal.
	KillRandom FaultKind = "kill-random"
	// KillLeader: SIGKILL the leader; restart it at heal.
	KillLeader FaultKind = "kill-leader"
	// PauseLeader: SIGSTOP the leader; SIGCONT at heal.
	PauseLeader FaultKind = "pause-leader"
	// IsolateLeader: cut every link (raft and gRPC, both ways) between the
	// leader and the other nodes.
	IsolateLeader FaultKind = "isolate-leader"
	// PartitionHalves: a random minority against the majority.
	PartitionHalves FaultKind = "partition-majority-minority"
	// IsolateFollower: cut one random follower off.
	IsolateFollower FaultKind = "isolate-follower"
	// ClockSkew: shift every node's HLC source by a random offset in
	// [-MaxClockOffset, MaxClockOffset] (kept until the next ClockSkew or a
	// restart), then isolate the leader so that leadership moves between
	// skewed clocks.
	ClockSkew FaultKind = "clock-skew"
	// ClockBehindLeader: set the leader's HLC source MaxClockOffset ahead
	// and every other node's MaxClockOffset behind, then isolate the
	// leader, so that leadership always moves from the fastest clock to a
	// slower one: the move the fence ceiling exists for.
	ClockBehindLeader FaultKind = "clock-behind-leader"
	// TimestampFlood: FloodClients clients take batches of FloodBatch
	// timestamps back to back; the oracle must wait for the clock rather
	// than run ahead of it. Every batch issued enters the history.
	TimestampFlood FaultKind = "timestamp-flood"
	// ClockStraddle: shift one follower's clock StraddleBelow or (every
	// other time) StraddleAbove ahead — on either side of the scenario's
	// --maxClockOffset — and transfer leadership to it. Beyond the bound it
	// must never establish its fence and leadership must move on within 2 s
	// (a finding otherwise); within it, it may lead. Heal: its clock back.
	ClockStraddle FaultKind = "clock-straddle"
	// BitFlip: stop a follower, flip a byte inside the Data of a committed
	// entry of its raft.db (found through a read-only bbolt open), restart
	// it: it must stop at once with one ERROR line naming the entry (a
	// finding otherwise). Heal: remove it from the cluster, keep its damaged
	// log for the checker, and bring it back empty under a new id (docs/design.md#interfaces).
	BitFlip FaultKind = "bit-flip"
)

// Timestamp flood and clock straddle parameters.
const (
	FloodClients  = 64
	FloodBatch    = 10_000
	StraddleBelow = time.Second
	StraddleAbove = 3 * time.Second
)

// MaxClockOffset bounds ClockSkew's offsets and is ClockBehindLeader's.
const MaxClockOffset = 3 * time.Second

// clockSettle is how long ClockBehindLeader lets the leader run on its new
// clock before cutting it off: a leader whose clock jumps ahead refuses
// timestamps until it renews its ceiling (every 250 ms), and the fault
// needs it to hand out some from the new clock.
const clockSettle = time.Second

// lead is the time a fault of kind k spends being injected before its
// hold starts.
func lead(k FaultKind) time.Duration {
	switch k {
	case ClockBehindLeader:
		return clockSettle
	case ClockStraddle:
		// the monitor's verdict, the transfer, 2 s of watching
		return 4 * time.Second
	case BitFlip:
		// a graceful stop, the restart that must fail
		return 3 * time.Second
	}
	return 0
}

// Fault is one planned fault: injected At after the workload starts, for
// For, on targets chosen at injection time with Pick (the leader is only
// known then).
type Fault struct {
	At, For time.Duration
	Kind    FaultKind
	Pick    uint64
	Offsets []int64 // ClockSkew: per node, ms
}

func (f Fault) String() string {
	s := fmt.Sprintf("+%.1fs %s for %.1fs", f.At.Seconds(), f.Kind, f.For.Seconds())
	if len(f.Offsets) > 0 {
		s += fmt.Sprintf(" offsets %v ms", f.Offsets)
	}
	return s
}

// Plan is a seeded fault schedule.
type Plan []Fault

// Timing bounds a plan: each fault is held for [HoldMin, HoldMax), with
// [GapMin, GapMax) of healed time after it; the first fault comes after
// 1.5-2.5 s and the last is healed 2 s before the window ends.
type Timing struct {
	HoldMin, HoldMax, GapMin, GapMax time.Duration
}

// DefaultTiming holds faults 2-4 s with 1.5-3 s healed in between.
var DefaultTiming = Timing{HoldMin: 2 * time.Second, HoldMax: 4 * time.Second, GapMin: 1500 * time.Millisecond, GapMax: 3 * time.Second}

func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// NewPlan draws a schedule for a workload window: faults of the given
// kinds, in shuffled rounds of all of them, timed by tm.
func NewPlan(rng *rand.Rand, kinds []FaultKind, tm Timing, window time.Duration, nodes int) Plan {
	var p Plan
	if len(kinds) == 0 {
		return p
	}
	at := between(rng, 1500*time.Millisecond, 2500*time.Millisecond)
	var round []FaultKind
	for {
		// Kinds come in shuffled rounds, so every kind is drawn early.
		if len(round) == 0 {
			round = append(round, kinds...)
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		f := Fault{At: at, For: between(rng, tm.HoldMin, tm.HoldMax), Kind: round[0], Pick: rng.Uint64()}
		round = round[1:]
		if f.At+lead(f.Kind)+f.For > window-2*time.Second {
			return p
		}
		if f.Kind == ClockSkew {
			for range nodes {
				f.Offsets = append(f.Offsets, rng.Int64N(2*MaxClockOffset.Milliseconds()+1)-MaxClockOffset.Milliseconds())
			}
		}
		p = append(p, f)
		at = f.At + lead(f.Kind) + f.For + between(rng, tm.GapMin, tm.GapMax)
	}
}

func (p Plan) String() string {
	parts := make([]string, len(p))
	for i, f := range p {
		parts[i] = f.String()
	}
	return strings.Join(parts, "; ")
}

// nemesis injects a Plan into a cluster and logs what it actually did.
type nemesis struct {
	c    *cluster.Cluster
	logf func(format string, args ...any)
	// rec receives the timestamp flood's batches.
	rec *history.Recorder

	mu       sync.Mutex // guards the fields below
	events   []string
	findings []string
	damaged  []checker.DamagedLog
	clockSet time.Time // when a clock was last shifted or healed
}

func (n *nemesis) finding(format string, args ...any) {
	n.mu.Lock()
	n.findings = append(n.findings, fmt.Sprintf(format, args...))
	n.mu.Unlock()
}

// Findings are the faults' own acceptance failures.
func (n *nemesis) Findings() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.findings...)
}

// Damaged are the logs the bit flips left behind, for the checker.
func (n *nemesis) Damaged() []checker.DamagedLog {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]checker.DamagedLog(nil), n.damaged...)
}

func (n *nemesis) clockShifted() {
	n.mu.Lock()
	n.clockSet = time.Now()
	n.mu.Unlock()
}

func (n *nemesis) note(start time.Time, format string, args ...any) {
	line := fmt.Sprintf("+%6.2fs ", time.Since(start).Seconds()) + fmt.Sprintf(format, args...)
	n.mu.Lock()
	n.events = append(n.events, line)
	n.mu.Unlock()
	n.logf("nemesis %s", line)
}

// Events returns the log of injected and healed faults.
func (n *nemesis) Events() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.events...)
}

// run injects each fault of plan at its time and heals it after its
// length; it returns when the plan is done or ctx ends (healing the fault
// in progress either way).
func (n *nemesis) run(ctx context.Context, plan Plan, start time.Time) {
	for _, f := range plan {
		if !sleepUntil(ctx, start.Add(f.At)) {
			return
		}
		heal, what, err := n.inject(ctx, f)
		if err != nil {
			n.note(start, "%s skipped: %v", f.Kind, err)
			continue
		}
		n.note(start, "inject %s", what)
		sleepUntil(ctx, time.Now().Add(f.For))
		// Most heals take milliseconds; a bit flip's replacement (remove,
		// admit, restart, catch up) needs seconds more on a loaded machine,
		// and one cut short leaves the node on its damaged log.
		hctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := heal(hctx); err != nil {
			n.note(start, "heal %s: %v", f.Kind, err)
		} else {
			n.note(start, "healed %s", f.Kind)
		}
		cancel()
	}
}

// sleepUntil waits for t or ctx; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func (n *nemesis) inject(ctx context.Context, f Fault) (heal func(context.Context) error, what string, err error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	switch f.Kind {
	case KillRandom, KillLeader:
		var victim *cluster.Node
		if f.Kind == KillLeader {
			if victim, err = n.c.WaitLeader(lctx); err != nil {
				return nil, "", err
			}
		} else {
			running := n.running()
			if len(running) == 0 {
				return nil, "", fmt.Errorf("no running node")
			}
			victim = running[f.Pick%uint64(len(running))]
		}
		if err := victim.Kill(); err != nil {
			return nil, "", err
		}
		restart := func(ctx context.Context) error {
			if err := victim.Start(); err != nil {
				return err
			}
			// Serving before the next fault, so that it can be told its links.
			return victim.WaitServing(ctx)
		}
		return restart, fmt.Sprintf("%s: SIGKILL %s", f.Kind, victim.ID), nil
	case PauseLeader:
		leader, err := n.c.WaitLeader(lctx)
		if err != nil {
			return nil, "", err
		}
		if err := leader.Pause(); err != nil {
			return nil, "", err
		}
		return func(context.Context) error { return leader.Resume() }, fmt.Sprintf("%s: SIGSTOP %s", f.Kind, leader.ID), nil
	case ClockBehindLeader:
		leader, err := n.c.WaitLeader(lctx)
		if err != nil {
			return nil, "", err
		}
		for _, node := range n.c.Nodes {
			if !node.Running() || node.Paused() {
				continue
			}
			offset := -MaxClockOffset.Milliseconds()
			if node == leader {
				offset = MaxClockOffset.Milliseconds()
			}
			if err := node.SetClock(lctx, offset); err != nil {
				return nil, "", err
			}
		}
		n.clockShifted()
		if !sleepUntil(ctx, time.Now().Add(clockSettle)) {
			return nil, "", ctx.Err()
		}
		return n.partition(lctx, f.Kind, []*cluster.Node{leader}, n.others(leader))
	case TimestampFlood:
		return n.flood(ctx)
	case ClockStraddle:
		return n.straddle(ctx, f)
	case BitFlip:
		return n.bitFlip(ctx, f)
	case IsolateLeader, ClockSkew:
		if f.Kind == ClockSkew {
			defer n.clockShifted()
			for i, node := range n.c.Nodes {
				if node.Running() && !node.Paused() {
					if err := node.SetClock(lctx, f.Offsets[i%len(f.Offsets)]); err != nil {
						return nil, "", err
					}
				}
			}
		}
		leader, err := n.c.WaitLeader(lctx)
		if err != nil {
			return nil, "", err
		}
		return n.partition(lctx, f.Kind, []*cluster.Node{leader}, n.others(leader))
	case IsolateFollower:
		leader, err := n.c.WaitLeader(lctx)
		if err != nil {
			return nil, "", err
		}
		followers := n.others(leader)
		f := followers[f.Pick%uint64(len(followers))]
		return n.partition(lctx, IsolateFollower, []*cluster.Node{f}, n.others(f))
	case PartitionHalves:
		nodes := append([]*cluster.Node(nil), n.c.Nodes...)
		r := rand.New(rand.NewPCG(f.Pick, 0))
		r.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
		minority := (len(nodes) - 1) / 2
		return n.partition(lctx, PartitionHalves, nodes[:minority], nodes[minority:])
	}
	return nil, "", fmt.Errorf("unknown fault %q", f.Kind)
}

func (n *nemesis) partition(ctx context.Context, kind FaultKind, a, b []*cluster.Node) (func(context.Context) error, string, error) {
	if err := n.c.Partition(ctx, a, b); err != nil {
		n.c.Heal(ctx)
		return nil, "", err
	}
	return n.c.Heal, fmt.Sprintf("%s: %s | %s", kind, ids(a), ids(b)), nil
}

func (n *nemesis) running() []*cluster.Node {
	var out []*cluster.Node
	for _, node := range n.c.Nodes {
		if node.Running() && !node.Paused() {
			out = append(out, node)
		}
	}
	return out
}

func (n *nemesis) others(x *cluster.Node) []*cluster.Node {
	var out []*cluster.Node
	for _, node := range n.c.Nodes {
		if node != x {
			out = append(out, node)
		}
	}
	return out
}

func ids(nodes []*cluster.Node) string {
	s := make([]string, len(nodes))
	for i, n := range nodes {
		s[i] = n.ID
	}
	return strings.Join(s, ",")
}
