package raftnet

import (
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestHeartbeatsReachTheMainLoop sends a heartbeat to a wrapped transport
// that was given a heartbeat handler: the handler must not run and the RPC
// must arrive on the consumer channel that raft's main loop reads.
func TestHeartbeatsReachTheMainLoop(t *testing.T) {
	recv := Transport{newTCP(t), newAckTracker()}
	send := newTCP(t)
	fastPath := make(chan raft.RPC, 1)
	recv.SetHeartbeatHandler(func(rpc raft.RPC) { fastPath <- rpc })

	// A heartbeat as raft's replication sends it: term, leader and
	// nothing else.
	hb := &raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ID: []byte("n2"), Addr: []byte(send.LocalAddr())}, Term: 7}
	done := make(chan error, 1)
	go func() {
		var resp raft.AppendEntriesResponse
		done <- send.AppendEntries("n1", recv.LocalAddr(), hb, &resp)
	}()
	select {
	case rpc := <-recv.Consumer():
		if got := rpc.Command.(*raft.AppendEntriesRequest).Term; got != 7 {
			t.Fatalf("consumer got term %d, want 7", got)
		}
		rpc.Respond(&raft.AppendEntriesResponse{Term: 7}, nil)
	case <-fastPath:
		t.Fatal("the heartbeat took the transport's fast path")
	case <-time.After(5 * time.Second):
		t.Fatal("the heartbeat never arrived")
	}
	if err := <-done; err != nil {
		t.Fatalf("heartbeat: %v", err)
	}
}

// A verification counts a peer only for an accepted AppendEntries of the
// same term sent at or after it began; a quorum is self plus enough such
// peers; a waiter wakes on the next record.
func TestAckTrackerCountsOnlyFreshAnswers(t *testing.T) {
	a := newAckTracker()
	voters := []raft.ServerID{"n1", "n2", "n3"}
	since := time.Now()
	a.record("n2", 5, since.Add(-time.Millisecond)) // sent before: a stale answer
	a.record("n3", 4, since.Add(time.Millisecond))  // an older term
	ok, changed := a.ackedSince(since, 5, "n1", voters)
	if ok {
		t.Fatal("counted an answer sent before the verification, or of another term")
	}
	a.record("n3", 5, since.Add(2*time.Millisecond))
	select {
	case <-changed:
	default:
		t.Fatal("a waiter was not woken by a record")
	}
	a.doneWaiting()
	if ok, _ := a.ackedSince(since, 5, "n1", voters); !ok {
		t.Fatal("self and a fresh answer of the term are a quorum of three")
	}
	five := []raft.ServerID{"n1", "n2", "n3", "n4", "n5"}
	if ok, _ := a.ackedSince(since, 5, "n1", five); ok {
		t.Fatal("two of five counted as a quorum")
	}
	a.doneWaiting()
	if ok, _ := a.ackedSince(since, 5, "n1", []raft.ServerID{"n1"}); !ok {
		t.Fatal("a single voter is its own quorum")
	}
}

// The transport records an accepted AppendEntries with a send time taken
// before the request left, and nothing for a refusal.
func TestTransportRecordsAcceptedAppendEntries(t *testing.T) {
	recv := newTCP(t)
	send := Transport{newTCP(t), newAckTracker()}
	for _, accept := range []bool{false, true} {
		before := time.Now()
		done := make(chan error, 1)
		go func() {
			var resp raft.AppendEntriesResponse
			done <- send.AppendEntries("n2", recv.LocalAddr(), &raft.AppendEntriesRequest{Term: 7}, &resp)
		}()
		select {
		case rpc := <-recv.Consumer():
			rpc.Respond(&raft.AppendEntriesResponse{Term: 7, Success: accept}, nil)
		case <-time.After(5 * time.Second):
			t.Fatal("the request never arrived")
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		got, _ := send.acks.ackedSince(before, 7, "n1", []raft.ServerID{"n1", "n2"})
		if got != accept {
			t.Fatalf("accepted=%v: counted %v", accept, got)
		}
		if !got {
			send.acks.doneWaiting()
		}
	}
}

// newTCP is a raft TCP transport on a loopback port, closed with the test.
func newTCP(t *testing.T) *raft.NetworkTransport {
	t.Helper()
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}
