//go:build jepsen

package jepsen

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/jepsen/cluster"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// TestIntegrationClockOffsetNodeNeverLeads: a follower's clock is shifted
// 2 s ahead (--maxClockOffset is 500 ms). Made leader by a leadership
// transfer, it never completes its fence, issues a timestamp or proposes:
// no entry of the log and no timestamp handed out carries its clock, and
// leadership moves on within 2 s. As the offset persists, it stops with
// one line.
func TestIntegrationClockOffsetNodeNeverLeads(t *testing.T) {
	const offset = 2 * time.Second
	c := &faultRig{faultCluster(t, "--clockOffsetHalt", "10s")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x, offAt, fromIndex := c.shiftAFollower(t, ctx, offset)
	t.Logf("%s judged its clock off %v after the shift", x.ID, time.Since(offAt).Round(time.Millisecond))

	// Timestamps handed out meanwhile must not come from x's clock.
	var ahead atomic.Int64 // the most a timestamp was ahead of the wall clock, ms
	var issued atomic.Int64
	tsCtx, stopTS := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		cl := clientOf(t, c.Cluster, c.Nodes...)
		for i := 0; i < 100_000 && tsCtx.Err() == nil; i++ {
			cctx, ccancel := context.WithTimeout(tsCtx, time.Second)
			resp, err := cl.GetTimestamp(cctx, &api.GetTimestampRequest{Count: 1})
			ccancel()
			if err == nil {
				issued.Add(1)
				if d := int64(hlc.Physical(resp.GetFirst())) - time.Now().UnixMilli(); d > ahead.Load() {
					ahead.Store(d)
				}
			}
		}
	}()

	// Sample every node's state from before the transfer on.
	type sample struct {
		at    time.Time
		node  *cluster.Node
		state cluster.State
	}
	var (
		smu     sync.Mutex
		samples []sample
	)
	pollCtx, stopPoll := context.WithCancel(ctx)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 2000 && pollCtx.Err() == nil; i++ {
			for _, n := range c.Nodes {
				sctx, scancel := context.WithTimeout(pollCtx, time.Second)
				st, err := n.State(sctx)
				scancel()
				if err == nil {
					smu.Lock()
					samples = append(samples, sample{time.Now(), n, st})
					smu.Unlock()
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	cl := clientOf(t, c.Cluster, c.Nodes...)
	tctx, tcancel := context.WithTimeout(ctx, 5*time.Second)
	_, err := cl.TransferLeadership(tctx, &api.TransferLeadershipRequest{ToNodeId: x.ID})
	tcancel()
	t.Logf("transfer to %s: %v", x.ID, err)
	// x logs every term it won and gave away.
	var refusedAt time.Time
	var refusedTerm uint64
	testutil.WaitFor(t, 5*time.Second, x.ID+" to refuse a term it won", func() bool {
		for _, line := range strings.Split(lastRun(t, x), "\n") {
			if strings.Contains(line, "refusing leadership") {
				ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
				refusedAt, _ = time.Parse(time.RFC3339Nano, ts)
				_, term, _ := strings.Cut(line, "raft_term=")
				fmt.Sscan(term, &refusedTerm)
				return true
			}
		}
		return false
	})
	var movedAt time.Time
	testutil.WaitFor(t, 5*time.Second, "a ready leader of a later term", func() bool {
		smu.Lock()
		defer smu.Unlock()
		for _, sm := range samples {
			if sm.node == x && sm.state.Ready {
				t.Fatalf("%s established its fence while its clock was off (%+v)", x.ID, sm.state)
			}
			if sm.node != x && sm.state.RaftState == "Leader" && sm.state.Ready && sm.state.Term > refusedTerm {
				movedAt = sm.at
				return true
			}
		}
		return false
	})
	stopPoll()
	if d := movedAt.Sub(refusedAt); d > 2*time.Second {
		t.Fatalf("leadership moved on %v after %s won term %d, want within 2 s", d, x.ID, refusedTerm)
	}
	t.Logf("%s won term %d and leadership moved on within %v", x.ID, refusedTerm, movedAt.Sub(refusedAt).Round(time.Millisecond))

	status := waitExit(t, x, 30*time.Second)
	t.Logf("%s stopped %v after its clock was shifted: %s", x.ID, time.Since(offAt).Round(time.Second),
		assertFailStop(t, x, status, "clock", "--maxClockOffset"))
	stopTS()
	wg.Wait()
	if issued.Load() == 0 {
		t.Fatal("no timestamp was issued during the test")
	}
	if a := time.Duration(ahead.Load()) * time.Millisecond; a >= offset*3/4 {
		t.Fatalf("a timestamp ran %v ahead of the wall clock: %s's clock issued it", a, x.ID)
	}
	c.keepCommitting(t, x, "z1")

	// No entry was stamped by x's clock: every command's HLC is within a
	// fence window of the wall clock of the leader that appended it.
	c.Close()
	for _, n := range c.Nodes {
		entries, err := raftlog.Read(filepath.Join(n.DataDir, "raft.db"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Command == nil || e.Index <= fromIndex {
				continue
			}
			if d := time.Duration(int64(hlc.Physical(e.Command.GetHlc()))-e.AppendedAt.UnixMilli()) * time.Millisecond; d >= offset*3/4 {
				t.Fatalf("%s's log: entry %d (%T) is stamped %v ahead of its leader's wall clock: proposed under %s's clock", n.ID, e.Index, e.Command.GetBody(), d, x.ID)
			}
		}
	}
}

// shiftAFollower shifts a follower's clock by offset and waits until the
// node judges itself off. The test is about a node made leader after that
// verdict: when the term moved while the verdict was pending (an election
// of a loaded machine, which the shifted node may have won), the clock is
// set back, every node's HLC allowed to fall back to its wall clock, and
// another try made; the log is then judged from fromIndex on.
func (c *faultRig) shiftAFollower(t *testing.T, ctx context.Context, offset time.Duration) (x *cluster.Node, offAt time.Time, fromIndex uint64) {
	t.Helper()
	for try := 1; ; try++ {
		x = c.aFollower(t)
		before := stateOf(t, ctx, x)
		if err := x.SetClock(ctx, offset.Milliseconds()); err != nil {
			t.Fatal(err)
		}
		offAt = time.Now()
		waitState(t, x, 10*time.Second, "its clock judged off", func(st cluster.State) bool { return st.ClockOff })
		after := stateOf(t, ctx, x)
		if before.RaftState != "Leader" && after.Term == before.Term {
			return x, offAt, fromIndex
		}
		if try == 3 {
			t.Fatalf("the term moved during each of 3 shifts (last: %s %s term %d -> %d)", x.ID, before.RaftState, before.Term, after.Term)
		}
		t.Logf("%s: the term moved (%d -> %d) before its clock was judged off; setting it back", x.ID, before.Term, after.Term)
		if err := x.SetClock(ctx, 0); err != nil {
			t.Fatal(err)
		}
		waitState(t, x, 10*time.Second, "its clock judged in sync", func(st cluster.State) bool { return !st.ClockOff })
		for _, n := range c.Nodes {
			waitState(t, n, 2*offset+5*time.Second, "its HLC back at its wall clock", func(st cluster.State) bool { return st.HLCSkewMs == 0 })
		}
		for _, n := range c.Nodes {
			fromIndex = max(fromIndex, stateOf(t, ctx, n).LastIndex)
		}
	}
}

func stateOf(t *testing.T, ctx context.Context, n *cluster.Node) cluster.State {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := n.State(sctx)
	if err != nil {
		t.Fatalf("%s: state: %v", n.ID, err)
	}
	return st
}

// waitState polls n's state until cond holds.
func waitState(t *testing.T, n *cluster.Node, d time.Duration, what string, cond func(cluster.State) bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := n.State(ctx)
		cancel()
		if err == nil && cond(st) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not %s after %v (%+v, %v)", n.ID, what, d, st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
