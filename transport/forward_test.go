package transport

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
)

// fakeRaft is a follower whose leader the test moves.
type fakeRaft struct {
	RaftView
	mu     sync.Mutex
	leader string
}

func (f *fakeRaft) LeaderWithID() (raft.ServerAddress, raft.ServerID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return "", raft.ServerID(f.leader)
}
func (f *fakeRaft) State() raft.RaftState { return raft.Follower }

func (f *fakeRaft) setLeader(id string) {
	f.mu.Lock()
	f.leader = id
	f.mu.Unlock()
}

// hungLeader is a gRPC server whose Leader call never answers (a paused
// leader: the connection is up, nothing comes back).
type hungLeader struct {
	api.UnimplementedClusterServer
	calls chan struct{}
}

func (h *hungLeader) Leader(ctx context.Context, _ *api.LeaderRequest) (*api.LeaderResponse, error) {
	h.calls <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

func startHung(t *testing.T) (string, *hungLeader) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hungLeader{calls: make(chan struct{}, 4)}
	g := grpc.NewServer()
	api.RegisterClusterServer(g, h)
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return ln.Addr().String(), h
}

func forwardServer(t *testing.T, r RaftView, timeout time.Duration) *Server {
	t.Helper()
	peers := NewPeers("n2", grpc.WithTransportCredentials(insecure.NewCredentials()))
	t.Cleanup(func() { peers.Close() })
	return New(Config{NodeID: "n2", FSM: fsm.New(fsm.Options{}), Raft: r, ForwardTimeout: timeout, Peers: peers})
}

func callLeader(ctx context.Context, cc *grpc.ClientConn) (*api.LeaderResponse, error) {
	return api.NewClusterClient(cc).Leader(ctx, &api.LeaderRequest{})
}

// A forward to a leader that stopped answering is abandoned as soon as this
// node learns of another leader: a mutation's outcome is then unknown (it
// was sent), with the new leader as the hint; a read is definite.
func TestForwardAbandonedWhenLeaderChanges(t *testing.T) {
	addr, hung := startHung(t)
	r := &fakeRaft{leader: "n1"}
	s := forwardServer(t, r, time.Minute)
	hint := &api.LeaderHint{LeaderId: "n1", LeaderGrpcAddr: addr}
	for _, mutation := range []bool{true, false} {
		r.setLeader("n1")
		done := make(chan error, 1)
		go func() {
			_, err := forward(context.Background(), s, hint, mutation, "rid", callLeader)
			done <- err
		}()
		<-hung.calls // the request reached the hung leader
		// An election in progress (no leader known) does not abandon it:
		// the old leader may still answer.
		r.setLeader("")
		s.NoteLeaderChange()
		select {
		case err := <-done:
			t.Fatalf("abandoned while no other leader was known: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		start := time.Now()
		r.setLeader("n3")
		s.NoteLeaderChange()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("the forward went on after a new leader was known")
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("abandoned %v after the change", took)
		}
		code, outcome, _ := outcomeOf(t, err)
		wantCode, wantOutcome := codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED
		if mutation {
			wantCode, wantOutcome = codes.Unknown, api.Outcome_OUTCOME_UNKNOWN
		}
		if code != wantCode || outcome != wantOutcome || !strings.Contains(status.Convert(err).Message(), "abandoned") {
			t.Errorf("mutation=%v: %v (outcome %v), want %v/%v saying it was abandoned", mutation, err, outcome, wantCode, wantOutcome)
		}
	}
}

// Without a leader change, the forward's own deadline ends it, well before
// a client's long timeout.
func TestForwardHasItsOwnDeadline(t *testing.T) {
	addr, hung := startHung(t)
	s := forwardServer(t, &fakeRaft{leader: "n1"}, 300*time.Millisecond)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := forward(ctx, s, &api.LeaderHint{LeaderId: "n1", LeaderGrpcAddr: addr}, false, "", callLeader)
	select {
	case <-hung.calls:
	case <-time.After(5 * time.Second):
		t.Fatalf("the hung leader never saw the forwarded call (err %v)", err)
	}
	if took := time.Since(start); took > 2*time.Second || status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("after %v: %v, want Unavailable naming the forward deadline", took, err)
	}
}

// A leader that accepts no connection within the dial bound: nothing was
// sent, so even a mutation is definitely not applied, and the dead leader
// is not handed back as the hint.
func TestForwardToUnreachableLeaderIsDefinite(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	s := forwardServer(t, &fakeRaft{leader: "n1"}, time.Minute)
	_, err := forward(context.Background(), s, &api.LeaderHint{LeaderId: "n1", LeaderGrpcAddr: dead}, true, "rid", callLeader)
	if code, outcome, hint := outcomeOf(t, err); code != codes.Unavailable || outcome != api.Outcome_OUTCOME_NOT_APPLIED || hint != nil {
		t.Fatalf("%v (outcome %v, hint %v), want a definite Unavailable without a hint", err, outcome, hint)
	}
}
