package node

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// TestIntegrationTimestampFlood: 64 clients take batches of 10,000
// timestamps from the leader for 10 s. Before the oracle waited for the
// clock, a flood like this carried the 16-bit logical part into the
// physical part until the HLC stood seconds ahead of the wall clock. Now
// every batch is unique, batches that ended before another began are below
// it, and afterwards the HLC is within one fence window of the leader's
// clock — and of every follower's.
func TestIntegrationTimestampFlood(t *testing.T) {
	skipShort(t)
	const clients, batch, flood = 64, 10_000, 10 * time.Second
	c := newTestCluster(t, 3, nil)
	leader := c.waitLeaderReady(10 * time.Second)
	cl := c.catalogClient(leader)
	window := c.cfgs[leader].CeilingWindow

	ctx, cancel := context.WithTimeout(context.Background(), flood)
	defer cancel()
	var (
		mu          sync.Mutex
		calls       []tsCall
		unavailable atomic.Int64
		wg          sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []tsCall
			for i := 0; ctx.Err() == nil && i < 1_000_000; i++ {
				t0 := time.Now()
				resp, err := cl.GetTimestamp(ctx, &api.GetTimestampRequest{Count: batch})
				switch {
				case err == nil:
					mine = append(mine, tsCall{t0, time.Now(), resp.First, resp.Count})
				case status.Code(err) == codes.Unavailable:
					// Definitely not issued: waited for the clock in vain, or
					// the fence was being renewed or re-established.
					if unavailable.Add(1) == 1 {
						t.Logf("first unavailable: %v", err)
					}
				case ctx.Err() == nil && !endOfFlood(ctx, err):
					t.Errorf("GetTimestamp: %v", err)
					return
				}
			}
			mu.Lock()
			calls = append(calls, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)

	n := c.node(leader)
	ahead := time.Duration(n.clock.AheadMs(n.clock.Last())) * time.Millisecond
	if ahead > window {
		t.Fatalf("after the flood the HLC is %v ahead of the leader's clock, more than one fence window (%v)", ahead, window)
	}
	for _, f := range c.running() {
		if skew := time.Duration(f.hlcSkewSeconds() * float64(time.Second)); skew < 0 || skew > window {
			t.Fatalf("node %s reports HLC − wall %v, want within [0, %v]", f.ID(), skew, window)
		}
	}
	checkRealTimeOrder(t, calls)
	sort.Slice(calls, func(i, j int) bool { return calls[i].first < calls[j].first })
	for i := 1; i < len(calls); i++ {
		if prev := calls[i-1]; prev.first+uint64(prev.count) > calls[i].first {
			t.Fatalf("batches overlap: [%s, +%d) and %s", hlc.Format(prev.first), prev.count, hlc.Format(calls[i].first))
		}
	}
	perSec := float64(len(calls)) * batch / elapsed.Seconds()
	t.Logf("flood: %d clients × %d per call for %v: %d batches, %.2fM timestamps/s (bound 65.5M/s), %d unavailable; HLC − wall after: %v",
		clients, batch, elapsed.Round(time.Millisecond), len(calls), perSec/1e6, unavailable.Load(), ahead)
}

// endOfFlood reports whether err is the flood's own deadline, seen by the
// server a moment before the client's timer fires.
func endOfFlood(ctx context.Context, err error) bool {
	dl, _ := ctx.Deadline()
	return status.Code(err) == codes.DeadlineExceeded && time.Until(dl) < 500*time.Millisecond
}
