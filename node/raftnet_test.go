package node

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
	newTCP := func() *raft.NetworkTransport {
		tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	recv := mainLoopHeartbeats{newTCP()}
	send := newTCP()
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
