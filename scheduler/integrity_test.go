package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
)

func rep(id string, format uint32, hash string) *api.StateReport {
	return &api.StateReport{NodeId: id, Index: 9, HashFormat: format, Hash: []byte(hash)}
}

func TestJudgeReports(t *testing.T) {
	skipped := &api.StateReport{NodeId: "s", Outcome: api.StateOutcome_STATE_OUTCOME_SKIPPED}
	unreachable := &api.StateReport{NodeId: "u", Outcome: api.StateOutcome_STATE_OUTCOME_UNREACHABLE}
	const (
		agrees    = api.StateOutcome_STATE_OUTCOME_AGREES
		diverged  = api.StateOutcome_STATE_OUTCOME_DIVERGED
		undecided = api.StateOutcome_STATE_OUTCOME_UNDECIDED
		skip      = api.StateOutcome_STATE_OUTCOME_SKIPPED
		unreach   = api.StateOutcome_STATE_OUTCOME_UNREACHABLE
	)
	for _, tc := range []struct {
		name     string
		reports  []*api.StateReport
		want     []api.StateOutcome
		diverged []string
	}{
		{"all agree", []*api.StateReport{rep("a", 1, "x"), rep("b", 1, "x"), rep("c", 1, "x")}, []api.StateOutcome{agrees, agrees, agrees}, nil},
		{"one of three differs", []*api.StateReport{rep("a", 1, "x"), rep("b", 1, "y"), rep("c", 1, "x")}, []api.StateOutcome{agrees, diverged, agrees}, []string{"b"}},
		{"the leader differs", []*api.StateReport{rep("a", 1, "y"), rep("b", 1, "x"), rep("c", 1, "x")}, []api.StateOutcome{diverged, agrees, agrees}, []string{"a"}},
		// Two of three cannot outvote anyone without a strict majority.
		{"a skipped member: two disagree", []*api.StateReport{rep("a", 1, "x"), rep("b", 1, "y"), skipped}, []api.StateOutcome{undecided, undecided, skip}, nil},
		{"a skipped member: two agree", []*api.StateReport{rep("a", 1, "x"), rep("b", 1, "x"), skipped}, []api.StateOutcome{agrees, agrees, skip}, nil},
		{"three distinct", []*api.StateReport{rep("a", 1, "x"), rep("b", 1, "y"), rep("c", 1, "z")}, []api.StateOutcome{undecided, undecided, undecided}, nil},
		// A rolling upgrade: another hash format is never compared.
		{"mixed formats", []*api.StateReport{rep("a", 1, "x"), rep("b", 2, "q"), rep("c", 1, "x")}, []api.StateOutcome{agrees, undecided, agrees}, nil},
		{"five, two off", []*api.StateReport{rep("a", 1, "x"), rep("b", 1, "y"), rep("c", 1, "x"), rep("d", 1, "y"), rep("e", 1, "x")},
			[]api.StateOutcome{agrees, diverged, agrees, diverged, agrees}, []string{"b", "d"}},
		{"five, unreachable ones", []*api.StateReport{rep("a", 1, "x"), unreachable, rep("c", 1, "y"), rep("d", 1, "x"), rep("e", 1, "x")},
			[]api.StateOutcome{agrees, unreach, diverged, agrees, agrees}, []string{"c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeReports(tc.reports)
			if !slices.Equal(got, tc.diverged) {
				t.Fatalf("diverged %v, want %v", got, tc.diverged)
			}
			for i, r := range tc.reports {
				if r.GetOutcome() != tc.want[i] {
					t.Fatalf("report %s: %v, want %v", r.GetNodeId(), r.GetOutcome(), tc.want[i])
				}
			}
		})
	}
}

// A member is judged diverged only when a strict majority of all members
// holds one other hash of its format, and agrees only when a strict
// majority holds its own.
func TestJudgeReportsProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 7).Draw(t, "members")
		var reports []*api.StateReport
		for i := range n {
			id := fmt.Sprintf("n%d", i)
			switch rapid.IntRange(0, 5).Draw(t, "kind") {
			case 0:
				reports = append(reports, &api.StateReport{NodeId: id, Outcome: api.StateOutcome_STATE_OUTCOME_SKIPPED})
			case 1:
				reports = append(reports, &api.StateReport{NodeId: id, Outcome: api.StateOutcome_STATE_OUTCOME_UNREACHABLE})
			default:
				reports = append(reports, rep(id, uint32(rapid.IntRange(1, 2).Draw(t, "format")), rapid.SampledFrom([]string{"x", "y", "z"}).Draw(t, "hash")))
			}
		}
		diverged := judgeReports(reports)
		count := func(format uint32, hash []byte) int {
			c := 0
			for _, r := range reports {
				if len(r.GetHash()) > 0 && r.GetHashFormat() == format && bytes.Equal(r.GetHash(), hash) {
					c++
				}
			}
			return c
		}
		for _, r := range reports {
			switch r.GetOutcome() {
			case api.StateOutcome_STATE_OUTCOME_AGREES:
				if count(r.GetHashFormat(), r.GetHash())*2 <= n {
					t.Fatalf("%s agrees without a majority: %v", r.GetNodeId(), reports)
				}
			case api.StateOutcome_STATE_OUTCOME_DIVERGED:
				if !slices.Contains(diverged, r.GetNodeId()) {
					t.Fatalf("%s diverged but not listed", r.GetNodeId())
				}
				found := false
				for _, o := range reports {
					if len(o.GetHash()) > 0 && o.GetHashFormat() == r.GetHashFormat() && !bytes.Equal(o.GetHash(), r.GetHash()) && count(o.GetHashFormat(), o.GetHash())*2 > n {
						found = true
					}
				}
				if !found {
					t.Fatalf("%s diverged without a majority on another hash of its format: %v", r.GetNodeId(), reports)
				}
			case api.StateOutcome_STATE_OUTCOME_UNSPECIFIED:
				t.Fatalf("%s left without an outcome", r.GetNodeId())
			}
		}
	})
}

// replicas applies the same log to three FSMs, each with a state checker
// wired to the others as if over the network.
type replicas struct {
	ids      []string
	fsms     map[string]*fsm.FSM
	checks   map[string]*StateChecker
	diverged chan string
	index    uint64
}

func newReplicas(t *testing.T) *replicas {
	r := &replicas{ids: []string{"n1", "n2", "n3"}, fsms: map[string]*fsm.FSM{}, checks: map[string]*StateChecker{}, diverged: make(chan string, 3)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	clock := hlc.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, id := range r.ids {
		captures := NewStateCaptures()
		f := fsm.New(fsm.Options{Logger: log, OnCheckState: captures.Capture, Halt: func(err error) { t.Errorf("%s halted: %v", id, err) }})
		c := NewStateChecker(StateCheckConfig{Self: id, Logger: log, CollectTimeout: 5 * time.Second,
			PeerHash: func(ctx context.Context, m *api.Member, index uint64) (*api.StateReport, error) {
				return r.checks[m.GetNodeId()].Report(ctx, index)
			},
			Diverged: func(uint64, *fsm.State, *api.CheckStateResponse) { r.diverged <- id },
		}, captures, f, clock)
		r.fsms[id], r.checks[id] = f, c
		wg.Add(1)
		go func() { defer wg.Done(); c.Run(ctx) }()
	}
	r.applyAll(t, &api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", GroupId: 1, ClusterVersion: clusterversion.Version2}}})
	for _, id := range r.ids {
		r.applyAll(t, &api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: id, GrpcAddr: "x:1", SupportedVersion: 2}}}})
	}
	return r
}

func (r *replicas) applyAll(t *testing.T, cmd *api.Command, only ...string) {
	t.Helper()
	r.index++
	cmd.Hlc = hlc.Make(uint64(hlc.WallSource()), r.index)
	b, err := fsm.EncodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range r.ids {
		if len(only) == 0 || slices.Contains(only, id) {
			r.fsms[id].Apply(&raft.Log{Index: r.index, Term: 1, Type: raft.LogCommand, Data: b})
		}
	}
}

func TestStateCheckFindsTheDivergedReplica(t *testing.T) {
	r := newReplicas(t)
	marker := &api.Command{MinVersion: clusterversion.Version2, Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "test"}}}
	r.applyAll(t, marker)
	v, err := r.checks["n1"].Result(ctxFor(t, 10*time.Second), r.index)
	if err != nil || len(v.GetDiverged()) != 0 || len(v.GetReports()) != 3 {
		t.Fatalf("clean check: %v, %v", v, err)
	}
	for _, rp := range v.GetReports() {
		if rp.GetOutcome() != api.StateOutcome_STATE_OUTCOME_AGREES || rp.GetHashFormat() != fsm.StateHashFormat {
			t.Fatalf("clean check report %v", rp)
		}
	}

	// n2 applies an entry the others never see: the same log no longer
	// gives the same state.
	r.index++
	odd, _ := fsm.EncodeCommand(&api.Command{Hlc: hlc.Make(uint64(hlc.WallSource()), 1), Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: 1 << 45}}})
	r.fsms["n2"].Apply(&raft.Log{Index: r.index, Term: 1, Type: raft.LogCommand, Data: odd})
	for _, id := range []string{"n1", "n3"} {
		r.fsms[id].StoreConfiguration(r.index, raft.Configuration{})
	}
	r.applyAll(t, marker)
	for _, id := range r.ids {
		v, err := r.checks[id].Result(ctxFor(t, 10*time.Second), r.index)
		if err != nil || !slices.Equal(v.GetDiverged(), []string{"n2"}) {
			t.Fatalf("%s's verdict: %v, %v; want n2 diverged", id, v, err)
		}
	}
	select {
	case id := <-r.diverged:
		if id != "n2" {
			t.Fatalf("%s stopped, want n2", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the diverged replica was not told")
	}
	if w := r.checks["n1"].Warnings(); len(w) != 1 || !bytes.Contains([]byte(w[0]), []byte("node n2 diverged")) {
		t.Fatalf("warnings %q", w)
	}
	select {
	case id := <-r.diverged:
		t.Fatalf("%s stopped too", id)
	default:
	}
}

func TestStateCheckReportsSkippedAfterASnapshot(t *testing.T) {
	r := newReplicas(t)
	marker := &api.Command{MinVersion: clusterversion.Version2, Body: &api.Command_CheckState{CheckState: &api.CheckState{}}}
	// n3 "installs a snapshot" past the marker: it never applies it.
	r.applyAll(t, marker, "n1", "n2")
	r.fsms["n3"].StoreConfiguration(r.index, raft.Configuration{})
	v, err := r.checks["n1"].Result(ctxFor(t, 10*time.Second), r.index)
	if err != nil {
		t.Fatal(err)
	}
	want := []api.StateOutcome{api.StateOutcome_STATE_OUTCOME_AGREES, api.StateOutcome_STATE_OUTCOME_AGREES, api.StateOutcome_STATE_OUTCOME_SKIPPED}
	for i, rp := range v.GetReports() {
		if rp.GetOutcome() != want[i] {
			t.Fatalf("report %d: %v, want %v", i, rp, want[i])
		}
	}
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// clockRig is a monitor whose peers' clocks are set per test.
type clockRig struct {
	m       *ClockMonitor
	members []*api.Member
	mu      sync.Mutex
	offset  map[string]int64 // ms ahead of the local clock
	delay   map[string]time.Duration
	halted  []error
}

func newClockRig(t *testing.T, maxOffset time.Duration, peers ...string) *clockRig {
	rig := &clockRig{offset: map[string]int64{}, delay: map[string]time.Duration{}}
	local := hlc.New(nil)
	// An in-process ping takes microseconds; the RTT bound leaves room
	// for a loaded machine running the race detector.
	rig.m = NewClockMonitor(ClockConfig{Self: "n1", MaxOffset: maxOffset, MaxRTT: 500 * time.Millisecond, HaltAfter: time.Minute, Logger: slog.New(slog.DiscardHandler),
		Halt: func(err error) { rig.halted = append(rig.halted, err) },
		Ping: func(ctx context.Context, m *api.Member) (int64, error) {
			rig.mu.Lock()
			off, d := rig.offset[m.GetNodeId()], rig.delay[m.GetNodeId()]
			rig.mu.Unlock()
			time.Sleep(d)
			return int64(local.PhysicalNow()) + off, nil
		}}, nil, local)
	for _, id := range append([]string{"n1"}, peers...) {
		rig.members = append(rig.members, &api.Member{NodeId: id, GrpcAddr: id + ":1"})
	}
	return rig
}

func (r *clockRig) round(now time.Time) {
	r.m.now = func() time.Time { return now }
	for _, mem := range r.members[1:] {
		r.m.measure(context.Background(), mem)
	}
	r.m.evaluate(r.members)
}

func TestClockMonitorOffFromAMajority(t *testing.T) {
	for _, tc := range []struct {
		name    string
		offsets map[string]int64
		delays  map[string]time.Duration
		off     bool
	}{
		{"in sync", map[string]int64{"n2": 3, "n3": -2}, nil, false},
		{"both others ahead", map[string]int64{"n2": 2000, "n3": 1900}, nil, true},
		{"both others behind", map[string]int64{"n2": -2000, "n3": -1000}, nil, true}, // 1000: off by more than the bound even after a slow in-process ping
		// One peer off: that peer is the odd one, not this node.
		{"one other off", map[string]int64{"n2": 2000, "n3": 0}, nil, false},
		// A sample whose round trip exceeds the bound says nothing.
		{"slow answers", map[string]int64{"n2": 2000, "n3": 2000}, map[string]time.Duration{"n2": 600 * time.Millisecond, "n3": 600 * time.Millisecond}, false},
		{"just within the bound", map[string]int64{"n2": 450, "n3": 450}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rig := newClockRig(t, 500*time.Millisecond, "n2", "n3")
			rig.offset, rig.delay = tc.offsets, tc.delays
			if rig.delay == nil {
				rig.delay = map[string]time.Duration{}
			}
			rig.round(time.Now())
			if got := rig.m.Off(); got != tc.off {
				t.Fatalf("Off = %v, want %v (warnings %q)", got, tc.off, rig.m.Warnings())
			}
			if tc.off && (len(rig.m.Warnings()) == 0 || !bytes.Contains([]byte(rig.m.Warnings()[0]), []byte("node n1 is off"))) {
				t.Fatalf("warnings %q do not name this node", rig.m.Warnings())
			}
		})
	}
}

func TestClockMonitorHaltsWhenTheOffsetPersists(t *testing.T) {
	rig := newClockRig(t, 500*time.Millisecond, "n2", "n3")
	rig.offset = map[string]int64{"n2": 5000, "n3": 5000}
	t0 := time.Now()
	rig.round(t0)
	rig.round(t0.Add(30 * time.Second))
	if len(rig.halted) != 0 || !rig.m.Off() {
		t.Fatalf("halted after 30 s (%v) or not off", rig.halted)
	}
	// A break resets the count.
	rig.offset = map[string]int64{"n2": 0, "n3": 0}
	rig.round(t0.Add(40 * time.Second))
	rig.offset = map[string]int64{"n2": 5000, "n3": 5000}
	rig.round(t0.Add(50 * time.Second))
	rig.round(t0.Add(100 * time.Second))
	if len(rig.halted) != 0 {
		t.Fatalf("halted %v although the offset broke off at +40 s", rig.halted)
	}
	rig.round(t0.Add(111 * time.Second))
	if len(rig.halted) == 0 || !bytes.Contains([]byte(rig.halted[0].Error()), []byte("n2 +5s")) {
		t.Fatalf("no halt after a minute off, or it does not name the offsets: %v", rig.halted)
	}
}

// A verdict stands while too few peers answer in time to make a new one:
// an off node whose pings go slow (an overloaded machine) does not lead
// on its bad clock, and it halts only on fresh evidence.
func TestClockMonitorVerdictStandsWithoutEvidence(t *testing.T) {
	rig := newClockRig(t, 500*time.Millisecond, "n2", "n3")
	rig.offset = map[string]int64{"n2": 2000, "n3": 2000}
	t0 := time.Now()
	rig.round(t0)
	if !rig.m.Off() {
		t.Fatalf("not off with both others 2 s ahead (warnings %q)", rig.m.Warnings())
	}
	// Both peers answer too slowly for their samples to count; the old
	// samples age out.
	rig.delay = map[string]time.Duration{"n2": 600 * time.Millisecond, "n3": 600 * time.Millisecond}
	rig.round(t0.Add(10 * time.Second))
	if !rig.m.Off() {
		t.Fatal("stale samples cleared the verdict: the node could lead on its bad clock")
	}
	rig.round(t0.Add(2 * time.Minute))
	if len(rig.halted) != 0 {
		t.Fatalf("halted without fresh evidence: %v", rig.halted)
	}
	// One peer answers and is in sync, the other is still slow: one
	// sample is no majority either way.
	rig.offset = map[string]int64{"n2": 0, "n3": 0}
	rig.delay = map[string]time.Duration{"n3": 600 * time.Millisecond}
	rig.round(t0.Add(2*time.Minute + time.Second))
	if !rig.m.Off() {
		t.Fatal("one peer's sample cleared the verdict")
	}
	// Both answer in sync: back within the bound.
	rig.delay = map[string]time.Duration{}
	rig.round(t0.Add(2*time.Minute + 2*time.Second))
	if rig.m.Off() || len(rig.halted) != 0 {
		t.Fatalf("off %v, halted %v after a majority measured it in sync", rig.m.Off(), rig.halted)
	}
}
