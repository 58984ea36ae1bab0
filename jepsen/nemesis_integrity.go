//go:build jepsen

package jepsen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/jepsen/checker"
	"github.com/hotsplit/hotsplit/jepsen/cluster"
	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// The integrity faults: a timestamp flood, a clock on either
// side of --maxClockOffset, and a flipped byte in a follower's log.

// floodClient is the history's client id of flood client i.
func floodClient(i int) int { return 10_000 + i }

// flood starts FloodClients clients taking FloodBatch timestamps back to
// back until healed; every batch issued enters the history, so the
// checker's timestamp order covers them.
func (n *nemesis) flood(context.Context) (func(context.Context) error, string, error) {
	fctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var issued, refused atomic.Int64
	eps := n.c.Endpoints()
	for i := range FloodClients {
		rot := append(slices.Clone(eps[i%len(eps):]), eps[:i%len(eps)]...)
		creds, err := n.c.ClientTLS(fmt.Sprintf("jepsen-flood-%d", i), "reporter")
		if err != nil {
			stop()
			wg.Wait()
			return nil, "", err
		}
		cl, err := client.New(client.Config{Endpoints: rot, RequestTimeout: time.Second, DialTimeout: time.Second, MaxRetries: -1, TLS: creds})
		if err != nil {
			stop()
			wg.Wait()
			return nil, "", err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for j := 0; j < 100_000 && fctx.Err() == nil; j++ {
				op := history.Op{Client: floodClient(i), Kind: history.GetTimestamp, Call: n.rec.Now(), Count: FloodBatch}
				resp, err := cl.GetTimestamp(fctx, &api.GetTimestampRequest{Count: FloodBatch})
				if err != nil {
					refused.Add(1) // definitely none issued, or never seen
					continue
				}
				op.Return, op.Status, op.First = n.rec.Now(), history.OK, resp.GetFirst()
				n.rec.Add(op)
				issued.Add(1)
			}
		}()
	}
	heal := func(context.Context) error {
		stop()
		wg.Wait()
		n.logf("nemesis: timestamp flood issued %d batches of %d (%d calls refused or cut off)", issued.Load(), FloodBatch, refused.Load())
		return nil
	}
	return heal, fmt.Sprintf("%s: %d clients × %d timestamps per call", TimestampFlood, FloodClients, FloodBatch), nil
}

// pickFollower picks a running follower of the current leader.
func (n *nemesis) pickFollower(ctx context.Context, pick uint64) (*cluster.Node, error) {
	leader, err := n.c.WaitLeader(ctx)
	if err != nil {
		return nil, err
	}
	var followers []*cluster.Node
	for _, x := range n.running() {
		if x != leader {
			followers = append(followers, x)
		}
	}
	if len(followers) == 0 {
		return nil, fmt.Errorf("no running follower")
	}
	return followers[pick%uint64(len(followers))], nil
}

// straddle shifts a follower's clock below or above the bound and makes
// it leader.
func (n *nemesis) straddle(ctx context.Context, f Fault) (func(context.Context) error, string, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	x, err := n.pickFollower(lctx, f.Pick)
	if err != nil {
		return nil, "", err
	}
	above := f.Pick%2 == 0
	offset := StraddleBelow
	if above {
		offset = StraddleAbove
	}
	if err := x.SetClock(lctx, offset.Milliseconds()); err != nil {
		return nil, "", err
	}
	n.clockShifted()
	heal := func(ctx context.Context) error {
		defer n.clockShifted()
		return x.SetClock(ctx, 0)
	}
	side := "below"
	if above {
		side = "above"
		if err := waitNode(lctx, x, func(st cluster.State) bool { return st.ClockOff }); err != nil {
			n.finding("clock-straddle: %s, %v ahead, never judged its clock off: %v", x.ID, offset, err)
			return heal, "", nil
		}
	} else if !sleepUntil(ctx, time.Now().Add(1500*time.Millisecond)) { // a few monitor rounds
		return heal, "", ctx.Err()
	}
	admin, err := n.c.ClientTLS("jepsen-admin", "admin")
	if err != nil {
		return heal, "", err
	}
	cl, err := client.New(client.Config{Endpoints: n.c.Endpoints(), RequestTimeout: 5 * time.Second, TLS: admin})
	if err != nil {
		return heal, "", err
	}
	defer cl.Close()
	refusals := countInLog(x, "refusing leadership")
	_, terr := cl.TransferLeadership(lctx, &api.TransferLeadershipRequest{ToNodeId: x.ID})
	what := fmt.Sprintf("%s: %s %v ahead (%s the bound), leadership transferred to it (%v)", ClockStraddle, x.ID, offset, side, terr)
	if above {
		n.watchRefusal(ctx, x)
		what += fmt.Sprintf("; it won and gave away %d term(s)", countInLog(x, "refusing leadership")-refusals)
	}
	return heal, what, nil
}

// countInLog counts the lines of x's process log holding s.
func countInLog(x *cluster.Node, s string) int {
	b, _ := os.ReadFile(x.LogPath)
	return strings.Count(string(b), s)
}

// watchRefusal: for 2 s after a transfer to x, whose clock is off, x never
// leads with its fence established, and within them another node does.
// Seeing that leader once is enough: a state call lost to a loaded machine
// in the last round is not a finding.
func (n *nemesis) watchRefusal(ctx context.Context, x *cluster.Node) {
	deadline := time.Now().Add(2 * time.Second)
	var other bool
	for {
		for _, m := range n.running() {
			sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			st, err := m.State(sctx)
			cancel()
			switch {
			case err != nil:
			case m == x && st.Ready:
				n.finding("clock-straddle: %s established its fence with its clock off (term %d)", x.ID, st.Term)
				return
			case m != x && st.RaftState == "Leader" && st.Ready:
				other = true
			}
		}
		if time.Now().After(deadline) {
			if !other {
				n.finding("clock-straddle: no other node leads 2 s after leadership went to %s, whose clock is off", x.ID)
			}
			return
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return
		}
	}
}

func waitNode(ctx context.Context, x *cluster.Node, cond func(cluster.State) bool) error {
	for {
		st, err := x.State(ctx)
		if err == nil && cond(st) {
			return nil
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return fmt.Errorf("%w (last %+v, %v)", ctx.Err(), st, err)
		}
	}
}

// bitFlip stops a follower, flips a byte of a committed entry's Data in its
// raft.db and restarts it; it must stop with one line naming the entry.
func (n *nemesis) bitFlip(ctx context.Context, f Fault) (func(context.Context) error, string, error) {
	lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	x, err := n.pickFollower(lctx, f.Pick)
	if err != nil {
		return nil, "", err
	}
	if err := x.Stop(10 * time.Second); err != nil {
		return nil, "", err
	}
	restart := func(context.Context) error { return x.Start() }
	db := filepath.Join(x.DataDir, "raft.db")
	entries, err := raftlog.ReadAny(db)
	if err != nil {
		return restart, "", err
	}
	// A command in the first half of the log: long committed (only the tail
	// of a follower's log can be uncommitted). No snapshot truncates a
	// jepsen log, so every entry lies above the last snapshot index.
	var cmds []raftlog.Entry
	for _, e := range entries[:len(entries)/2] {
		if e.Type == raft.LogCommand && len(e.Data) > 8 {
			cmds = append(cmds, e)
		}
	}
	if len(cmds) == 0 {
		return restart, "", fmt.Errorf("%s: no command entry to damage", x.ID)
	}
	e := cmds[(f.Pick>>8)%uint64(len(cmds))]
	copies, err := flipDataByte(db, e.Index, e.Data)
	if err != nil {
		return restart, "", err
	}
	if err := x.Start(); err != nil {
		return nil, "", err
	}
	outcome := n.expectFailStop(x, e.Index)
	old := x.ID
	heal := func(ctx context.Context) error { return n.replace(ctx, x, old, e.Index) }
	return heal, fmt.Sprintf("%s: %s entry %d flipped (%d copies in the file); restarted: %s", BitFlip, old, e.Index, copies, outcome), nil
}

// expectFailStop waits for x to stop after a bit flip and judges how.
func (n *nemesis) expectFailStop(x *cluster.Node, index uint64) string {
	select {
	case <-x.Exited():
	case <-time.After(20 * time.Second):
		x.Kill()
		n.finding("bit-flip: %s kept running on a log whose entry %d changed", x.ID, index)
		return "kept running"
	}
	exits := x.Exits()
	status := exits[len(exits)-1].Status
	b, _ := os.ReadFile(x.LogPath)
	out := string(b)
	if i := strings.LastIndex(out, "=== jepsen: start #"); i >= 0 {
		out = out[i:]
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	switch {
	case status <= 0:
		n.finding("bit-flip: %s exited with status %d, want a non-zero exit of its own", x.ID, status)
	case strings.Contains(out, "panic:") || strings.Contains(out, "goroutine "):
		n.finding("bit-flip: %s's output holds a Go panic", x.ID)
	case strings.Count(out, "level=ERROR") != 1 || !strings.Contains(last, "level=ERROR") ||
		!strings.Contains(last, fmt.Sprintf("entry %d", index)) || !strings.Contains(last, "raft.db"):
		n.finding("bit-flip: %s did not stop with one ERROR line naming entry %d and raft.db; last line %q", x.ID, index, last)
	}
	return fmt.Sprintf("exit %d: %s", status, last)
}

// replace removes x (under its old id) from the cluster, keeps its damaged
// log for the checker, and starts it again empty under a new id.
func (n *nemesis) replace(ctx context.Context, x *cluster.Node, old string, index uint64) error {
	var others []string
	for _, m := range n.c.Nodes {
		if m != x {
			others = append(others, m.GRPCAddr)
		}
	}
	admin, err := n.c.ClientTLS("jepsen-admin", "admin")
	if err != nil {
		return err
	}
	cl, err := client.New(client.Config{Endpoints: others, RequestTimeout: 3 * time.Second, TLS: admin})
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		_, err := cl.Remove(ctx, &api.RemoveRequest{NodeId: old})
		if err == nil {
			break
		}
		if !sleepUntil(ctx, time.Now().Add(200*time.Millisecond)) {
			return fmt.Errorf("remove %s: %w", old, err)
		}
	}
	kept := filepath.Join(filepath.Dir(x.DataDir), old+"-raft.db.damaged")
	if err := os.Rename(filepath.Join(x.DataDir, "raft.db"), kept); err != nil {
		return err
	}
	n.mu.Lock()
	n.damaged = append(n.damaged, checker.DamagedLog{Node: old, Path: kept, Index: index})
	n.mu.Unlock()
	if err := n.c.Rename(ctx, x, old+"b", others); err != nil {
		return err
	}
	if err := x.Start(); err != nil {
		return err
	}
	return x.WaitServing(ctx)
}
