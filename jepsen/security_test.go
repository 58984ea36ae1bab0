//go:build jepsen

package jepsen

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/jepsen/cluster"
)

// TestIntegrationRaftPortRefusesPlaintext replays the raft-port attack on
// a plaintext port against a secure 3-process cluster: from a plain TCP client, an
// AppendEntries at a higher term carrying an entry (encoded by raft's own
// transport), then six AppendEntries whose bytes do not decode. Against
// the plaintext build the first was committed and the second made every
// node exit for good; now no byte reaches raft: every node stays up, below
// the attacker's term, with the same state (business hash: the state
// without the fence and the request table, which move on their own), and
// each node counts the refused handshakes.
func TestIntegrationRaftPortRefusesPlaintext(t *testing.T) {
	if testing.Short() {
		t.Skip("real processes")
	}
	dir, err := os.MkdirTemp(suiteEnv.Base, "raft-port-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{Binary: suiteEnv.Binary, Dir: dir, Nodes: 3, Args: baseArgs})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WaitLeader(ctx); err != nil {
		t.Fatal(err)
	}
	before := settledStates(t, ctx, c)

	attacker, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	for _, n := range c.Nodes {
		req := &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(attacker.LocalAddr())},
			Term:      before[n.ID].Term + 5, PrevLogEntry: before[n.ID].LastIndex, PrevLogTerm: before[n.ID].Term,
			Entries:           []*raft.Log{{Index: before[n.ID].LastIndex + 1, Term: before[n.ID].Term + 5, Type: raft.LogCommand, Data: []byte("set_auto_split")}},
			LeaderCommitIndex: before[n.ID].LastIndex + 1,
		}
		var resp raft.AppendEntriesResponse
		if err := attacker.AppendEntries(raft.ServerID(n.ID), raft.ServerAddress(n.RaftAddr), req, &resp); err == nil {
			t.Fatalf("%s answered a plaintext AppendEntries: %+v", n.ID, resp)
		}
		for i := range 6 {
			if err := sendGarbage(n.RaftAddr, i); err != nil {
				t.Fatalf("%s: %v", n.ID, err)
			}
		}
	}
	after := settledStates(t, ctx, c)
	for _, n := range c.Nodes {
		if !n.Running() {
			t.Fatalf("%s exited: %v", n.ID, n.Exits())
		}
		b, a := before[n.ID], after[n.ID]
		// An election of its own (a loaded machine, 300 ms timeouts) may
		// move the term on by one or two; the attacker's term is five up.
		if a.Term >= b.Term+5 || a.BusinessHash != b.BusinessHash {
			t.Errorf("%s: term %d -> %d (the attacker sent %d), business hash %s -> %s", n.ID, b.Term, a.Term, b.Term+5, b.BusinessHash, a.BusinessHash)
		}
		if got := refusedHandshakes(t, ctx, n); got < 7 {
			t.Errorf("%s counted %d refused raft handshakes, want at least 7", n.ID, got)
		}
	}
}

// sendGarbage writes rpcAppendEntries (0) and bytes msgpack cannot
// decode, then waits for the node to close the connection.
func sendGarbage(addr string, i int) error {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write(append([]byte{0x00, 0xc1, 0xc1, 0xc1}, fmt.Appendf(nil, "garbage %d", i)...)); err != nil {
		return fmt.Errorf("write garbage: %w", err)
	}
	if _, err := io.ReadAll(conn); err != nil {
		return fmt.Errorf("garbage %d: the connection was not closed cleanly: %w", i, err)
	}
	return nil
}

// settledStates waits until every node reports one business hash at its
// current term and returns the states.
func settledStates(t *testing.T, ctx context.Context, c *cluster.Cluster) map[string]cluster.State {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out := map[string]cluster.State{}
		same := true
		for _, n := range c.Nodes {
			st, err := n.State(ctx)
			if err != nil {
				t.Fatal(err)
			}
			out[n.ID] = st
			same = same && st.BusinessHash == out[c.Nodes[0].ID].BusinessHash
		}
		if same {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("nodes never agreed on one business state: %+v", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

var refusedHandshake = regexp.MustCompile(`(?m)^hotsplit_raft_conns_refused_total\{reason="handshake"\} (\d+)`)

func refusedHandshakes(t *testing.T, ctx context.Context, n *cluster.Node) int {
	t.Helper()
	m, err := n.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	match := refusedHandshake.FindStringSubmatch(m)
	if match == nil {
		t.Fatalf("%s: no hotsplit_raft_conns_refused_total{reason=\"handshake\"} in /metrics", n.ID)
	}
	v, _ := strconv.Atoi(match[1])
	return v
}
