//go:build jepsen

package jepsen

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/checker"
	"github.com/hotsplit/hotsplit/jepsen/cluster"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// finishOpts are the integrity parts of the end of a run.
type finishOpts struct {
	// skewSettle > 0: heal every clock, wait this long, then sample each
	// node's HLC − wall.
	skewSettle time.Duration
	damaged    []checker.DamagedLog
}

// finish heals every fault, waits for the cluster to come back together,
// samples every node's (applied index, state hash) and catalog history,
// stops the nodes and reads their raft logs.
func finish(ctx context.Context, c *cluster.Cluster, logf func(string, ...any), opts finishOpts) (checker.Input, error) {
	var in checker.Input
	hctx, cancel := context.WithTimeout(ctx, 45*time.Second+opts.skewSettle)
	defer cancel()
	for _, n := range c.Nodes {
		switch {
		case n.Paused():
			if err := n.Resume(); err != nil {
				return in, err
			}
		case !n.Running():
			if err := n.Start(); err != nil {
				return in, err
			}
		}
	}
	for _, n := range c.Nodes {
		if err := n.WaitServing(hctx); err != nil {
			return in, fmt.Errorf("%w: %w", errNoConvergence, err)
		}
	}
	if err := c.Heal(hctx); err != nil {
		return in, fmt.Errorf("heal links: %w", err)
	}
	for _, n := range c.Nodes {
		if err := n.WaitReady(hctx); err != nil {
			return in, fmt.Errorf("%w: %w", errNoConvergence, err)
		}
		// A restarted node starts with clean fault state; the others may
		// still hold a failpoint or a clock offset.
		if err := n.SetFailpoint(hctx, cluster.Failpoint{}); err != nil {
			return in, err
		}
	}
	if opts.skewSettle > 0 {
		if err := settleClocks(hctx, c, opts.skewSettle, &in); err != nil {
			return in, err
		}
		logf("clocks healed; HLC − wall %v ms after %v", in.SkewMs, opts.skewSettle)
	}
	nodes, versions, committed, err := sample(hctx, c)
	if err != nil {
		return in, err
	}
	in.Committed = committed
	for i := range nodes {
		if err := watch(hctx, c, c.Nodes[i], versions[i], &nodes[i]); err != nil {
			return in, err
		}
	}
	in.Nodes = nodes
	c.Close()
	in.Logs = map[string][]raftlog.Entry{}
	for _, n := range c.Nodes {
		entries, err := raftlog.Read(filepath.Join(n.DataDir, "raft.db"))
		if err != nil {
			return in, fmt.Errorf("node %s: %w", n.ID, err)
		}
		in.Logs[n.ID] = entries
	}
	for _, d := range opts.damaged {
		if d.Entries, err = raftlog.ReadAny(d.Path); err != nil {
			return in, fmt.Errorf("damaged log of %s: %w", d.Node, err)
		}
		in.Damaged = append(in.Damaged, d)
	}
	logf("collected: committed index %d; log lengths %v", committed, logLengths(in.Logs))
	return in, nil
}

// settleClocks sets every node's clock offset to zero (the last clock
// heal), waits settle, and records each node's HLC − wall against its own
// clock.
func settleClocks(ctx context.Context, c *cluster.Cluster, settle time.Duration, in *checker.Input) error {
	for _, n := range c.Nodes {
		if err := n.SetClock(ctx, 0); err != nil {
			return err
		}
	}
	if !sleepUntil(ctx, time.Now().Add(settle)) {
		return ctx.Err()
	}
	in.SkewMs, in.SkewBoundMs = map[string]uint64{}, uint64(skewBound.Milliseconds())
	for _, n := range c.Nodes {
		st, err := n.State(ctx)
		if err != nil {
			return err
		}
		in.SkewMs[n.ID] = st.HLCSkewMs
	}
	return nil
}

func logLengths(logs map[string][]raftlog.Entry) map[string]int {
	m := map[string]int{}
	for id, l := range logs {
		m[id] = len(l)
	}
	return m
}

// sample polls every node's /jepsen/state together, every 20 ms, until an
// applied index has been seen on every node (at least 1 s of samples, at
// most 10 s), and returns the samples, each node's last catalog version
// and the highest applied index seen.
func sample(ctx context.Context, c *cluster.Cluster) ([]checker.NodeFinal, []uint64, uint64, error) {
	nodes := make([]checker.NodeFinal, len(c.Nodes))
	for i, n := range c.Nodes {
		nodes[i] = checker.NodeFinal{ID: n.ID, Hashes: map[uint64]string{}}
	}
	var committed uint64
	versions := make([]uint64, len(c.Nodes))
	t0 := time.Now()
	for time.Since(t0) < 10*time.Second {
		states := make([]cluster.State, len(c.Nodes))
		errs := make([]error, len(c.Nodes))
		var wg sync.WaitGroup
		for i, n := range c.Nodes {
			wg.Add(1)
			go func() { defer wg.Done(); states[i], errs[i] = n.State(ctx) }()
		}
		wg.Wait()
		for i, st := range states {
			if errs[i] != nil {
				continue
			}
			nodes[i].Hashes[st.AppliedIndex] = st.Hash
			committed = max(committed, st.AppliedIndex)
			versions[i] = st.CatalogVersion
		}
		if time.Since(t0) >= time.Second && commonIndex(nodes) {
			return nodes, versions, committed, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, nil, 0, fmt.Errorf("%w: no applied index seen on every node within 10 s", errNoConvergence)
}

func commonIndex(nodes []checker.NodeFinal) bool {
	for idx := range nodes[0].Hashes {
		all := true
		for _, n := range nodes[1:] {
			if _, ok := n.Hashes[idx]; !ok {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// watchHistory is how many versions back a node's catalog history is
// read: within every node's kept delta history (1024).
const watchHistory = 1000

// watch reads one node's own catalog history, up to version upTo, from
// that node alone.
func watch(ctx context.Context, c *cluster.Cluster, n *cluster.Node, upTo uint64, f *checker.NodeFinal) error {
	from := uint64(1)
	if upTo > watchHistory {
		from = upTo - watchHistory
	}
	f.WatchFrom = from
	creds, err := c.ClientTLS("jepsen-finish", "admin")
	if err != nil {
		return err
	}
	cc, err := grpc.NewClient(n.GRPCAddr, grpc.WithTransportCredentials(credentials.NewTLS(creds)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return err
	}
	defer cc.Close()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := api.NewCatalogClient(cc).WatchRoutes(wctx, &api.WatchRoutesRequest{FromVersion: from})
	if err != nil {
		return fmt.Errorf("node %s: watch: %w", n.ID, err)
	}
	cur := from
	for cur < upTo {
		ev, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("node %s: watch from %d stopped at version %d of %d: %w", n.ID, from, cur, upTo, err)
		}
		switch e := ev.GetEvent().(type) {
		case *api.WatchRoutesResponse_SnapshotPage:
			f.StartRoutes = append(f.StartRoutes, e.SnapshotPage.GetRoutes()...)
			if e.SnapshotPage.GetLast() {
				f.WatchFrom, cur = e.SnapshotPage.GetVersion(), e.SnapshotPage.GetVersion()
				if f.StartRoutes == nil {
					f.StartRoutes = []*api.RouteDescriptor{}
				}
			}
		case *api.WatchRoutesResponse_Delta:
			f.Deltas = append(f.Deltas, e.Delta)
			cur = e.Delta.GetVersion()
		}
	}
	return nil
}
