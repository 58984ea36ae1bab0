package transport

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/scheduler"
)

// appliedFSM returns an FSM that applied cmds in order, each stamped 1 ms
// after the last; every one must succeed.
func appliedFSM(t *testing.T, cmds ...*api.Command) *fsm.FSM {
	t.Helper()
	f := fsm.New(fsm.Options{Logger: slog.New(slog.DiscardHandler), Halt: func(err error) { t.Fatalf("halt: %v", err) }})
	applyFrom(t, f, 0, cmds...)
	return f
}

// applyFrom applies cmds to f as log entries after index `after`, each at
// the next millisecond of a fixed clock, and fails unless each is OK.
func applyFrom(t *testing.T, f *fsm.FSM, after int, cmds ...*api.Command) {
	t.Helper()
	for j, c := range cmds {
		i := after + j
		c.Hlc = hlc.Make(1_700_000_000_000+uint64(i), 0)
		b, err := fsm.EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := f.Apply(&raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: b}).(*fsm.Result)
		if res == nil || res.GetCode() != api.ResultCode_RESULT_CODE_OK {
			t.Fatalf("command %d (%T): %v", i, c.GetBody(), res)
		}
	}
}

func bootstrapCmd(routes int, cfg *api.Config) *api.Command {
	splits := make([][]byte, routes-1)
	for i := range splits {
		splits[i] = fmt.Appendf(nil, "k%03d", i)
	}
	return &api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "c1", InitialSplits: splits, GroupId: 1, Config: cfg, AutoSplit: true}}}
}

// Status warns when columns lag more than two steps and when live routes
// reach 90% of max_auto_routes, and not a moment before either.
func TestOperationWarnings(t *testing.T) {
	column := &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: 1000, AtMs: 2000, StepMs: 1000, Reporters: []string{"dn1"}}}}
	cases := []struct {
		name     string
		routes   int
		maxAuto  uint32
		column   bool
		nowMs    uint64
		lag, cap bool
	}{
		{name: "no column yet", routes: 10, maxAuto: 100, nowMs: 60_000},
		{name: "two steps exactly", routes: 10, maxAuto: 100, column: true, nowMs: 4000},
		{name: "over two steps", routes: 10, maxAuto: 100, column: true, nowMs: 4001, lag: true},
		{name: "just below 90%", routes: 10, maxAuto: 12, column: true, nowMs: 2500},
		{name: "at 90%", routes: 9, maxAuto: 10, column: true, nowMs: 2500, cap: true},
		{name: "at the cap, lagging", routes: 10, maxAuto: 10, column: true, nowMs: 9000, lag: true, cap: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmds := []*api.Command{bootstrapCmd(tc.routes, &api.Config{StepMs: 1000, MaxAutoRoutes: tc.maxAuto})}
			if tc.column {
				cmds = append(cmds, column)
			}
			s := &Server{cfg: Config{FSM: appliedFSM(t, cmds...)}}
			w := strings.Join(s.operationWarnings(s.cfg.FSM.State(), tc.nowMs), "\n")
			if got := strings.Contains(w, "load columns lag"); got != tc.lag {
				t.Errorf("lag warning %v, want %v: %q", got, tc.lag, w)
			}
			if got := strings.Contains(w, "of max_auto_routes"); got != tc.cap {
				t.Errorf("cap warning %v, want %v: %q", got, tc.cap, w)
			}
			if tc.nowMs == 9000 && !strings.Contains(w, "committed 7s ago, over two steps of 1s") {
				t.Errorf("lag warning does not say how long: %q", w)
			}
		})
	}
}

// A request that finds no leader is held through the election: it goes on
// the moment a leader is known, and is answered before its caller's
// deadline when none comes.
func TestAwaitLeaderHoldsThroughAnElection(t *testing.T) {
	f := appliedFSM(t, bootstrapCmd(1, nil),
		&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", GrpcAddr: "127.0.0.1:1", RaftAddr: "127.0.0.1:2", SupportedVersion: 1}}}})
	r := &fakeRaft{}
	s := New(Config{NodeID: "n2", FSM: f, Raft: r, Sched: &scheduler.Scheduler{}, Logger: slog.New(slog.DiscardHandler)})

	t.Run("a leader becomes known", func(t *testing.T) {
		r.setLeader("")
		go func() {
			time.Sleep(100 * time.Millisecond) // the election's length, as the caller sees it
			r.setLeader("n1")
			s.NoteLeaderChange()
		}()
		start := time.Now()
		if s.awaitLeader(context.Background()) {
			t.Fatal("a follower reported itself ready")
		}
		if took := time.Since(start); took < 100*time.Millisecond || took >= electionHold {
			t.Fatalf("held %v, want from the change (100ms) until before the hold's end (%v)", took, electionHold)
		}
		if h := s.leaderHint(); h.GetLeaderGrpcAddr() != "127.0.0.1:1" {
			t.Fatalf("hint %v after the hold", h)
		}
	})
	t.Run("the caller's deadline comes first", func(t *testing.T) {
		r.setLeader("")
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		defer cancel()
		start := time.Now()
		s.awaitLeader(ctx)
		took := time.Since(start)
		if ctx.Err() != nil {
			t.Fatalf("held %v, past the caller's deadline", took)
		}
		if took < 400*time.Millisecond-holdMargin-50*time.Millisecond {
			t.Fatalf("gave up after %v, want about %v", took, 400*time.Millisecond-holdMargin)
		}
	})
	t.Run("no leader within the hold", func(t *testing.T) {
		r.setLeader("")
		start := time.Now()
		s.awaitLeader(context.Background())
		if took := time.Since(start); took < electionHold-50*time.Millisecond {
			t.Fatalf("gave up after %v, want about %v", took, electionHold)
		}
	})
}

type fixedHealth struct{ r *api.HealthResponse }

func (h fixedHealth) Report() *api.HealthResponse { return h.r }

// A follower keeps naming a dead leader until its election timeout; its
// Leader answer says how long it has not heard from it and that it is
// unreachable. The leader itself, or a node without health, adds nothing.
func TestLeaderAnswerSaysTheLeaderIsUnreachable(t *testing.T) {
	health := fixedHealth{&api.HealthResponse{Members: []*api.MemberStatus{
		{Member: &api.Member{NodeId: "n1"}, Health: &api.MemberHealth{Reachable: false, Contacted: true, LastContactMs: 2300}},
		{Member: &api.Member{NodeId: "n2"}, Health: &api.MemberHealth{Reachable: true}},
	}}}
	follower := &Server{cfg: Config{NodeID: "n2", Raft: &fakeRaft{leader: "n1"}, Health: health}}
	resp := &api.LeaderResponse{LeaderId: "n1"}
	follower.leaderContact(resp)
	if !resp.GetLeaderUnreachable() || resp.GetLeaderLastContactMs() != 2300 {
		t.Fatalf("follower's answer %v, want the leader unreachable for 2300 ms", resp)
	}
	for name, s := range map[string]*Server{
		"the leader answering":  {cfg: Config{NodeID: "n1", Raft: &fakeRaft{leader: "n1"}, Health: health}},
		"no health monitor":     {cfg: Config{NodeID: "n2", Raft: &fakeRaft{leader: "n1"}}},
		"no leader to speak of": {cfg: Config{NodeID: "n2", Raft: &fakeRaft{}, Health: health}},
	} {
		resp := &api.LeaderResponse{LeaderId: s.cfg.Raft.(*fakeRaft).leader}
		s.leaderContact(resp)
		if resp.GetLeaderUnreachable() || resp.GetLeaderLastContactMs() != 0 {
			t.Errorf("%s: %v, want no contact fields", name, resp)
		}
	}
}
