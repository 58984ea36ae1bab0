package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// splitChain makes n splits at increasing keys through node via, each in
// the rightmost route.
func (c *testCluster) splitChain(via string, n int, prefix string) {
	c.t.Helper()
	cl := c.catalogClient(via)
	route := c.node(via).FSM().State().Catalog().Lookup([]byte(prefix + "\xff")).ID
	for i := range n {
		req := &api.SplitRangeRequest{RouteId: route, SplitKey: fmt.Appendf(nil, "%s%06d", prefix, i), RequestId: requestID()}
		var resp *api.SplitRangeResponse
		// A leader change on a loaded machine leaves a split's outcome
		// unknown or refuses it as unavailable: ask again with the same
		// request id, which answers the first outcome if it committed.
		testutil.WaitFor(c.t, 30*time.Second, fmt.Sprintf("split %d", i), func() bool {
			var err error
			resp, err = cl.SplitRange(ctxT(c.t, 10*time.Second), req)
			switch status.Code(err) {
			case codes.OK:
				return true
			case codes.Unknown, codes.Unavailable:
				return false
			}
			c.t.Fatalf("split %d: %v", i, err)
			return false
		})
		route = resp.Right.RouteId
	}
}

func TestIntegrationSnapshotsCompactAndInstall(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.SnapshotThreshold = 200
		cfg.SnapshotInterval = 50 * time.Millisecond
		cfg.TrailingLogs = 20
	})
	leader := c.leader()
	c.splitChain(leader, 1000, "k")
	testutil.WaitFor(t, 30*time.Second, "every node to compact its log", func() bool {
		for _, n := range c.running() {
			if first, _ := n.stores.Logs.FirstIndex(); first <= 1 {
				return false
			}
		}
		return true
	})
	c.waitBusinessConverged(10 * time.Second)

	// A node joining now cannot replay the log from the start: it must
	// install a snapshot.
	cfg := Config{ID: "n4", DataDir: c.dir + "/n4", Logger: quietLogger(), Join: []string{c.node(leader).GRPCAddr()}}
	fastTiming(&cfg)
	n4 := c.start(cfg)
	c.waitVoters(4, 30*time.Second)
	c.waitBusinessConverged(20 * time.Second) // all four, the join's SetMember included
	if idx := n4.Raft().Stats()["last_snapshot_index"]; idx == "0" {
		t.Fatalf("n4 caught up without installing a snapshot (last_snapshot_index %s)", idx)
	}
	if v := n4.FSM().State().Catalog().Len(); v != 1001 {
		t.Fatalf("n4 holds %d routes, want 1001", v)
	}
}

// writeSnapshot puts a snapshot of st at index into dataDir's snapshot
// store, with a valid CRC, and returns its id.
func writeSnapshot(t *testing.T, dataDir string, index, term uint64, conf raft.Configuration, st *api.StateSnapshot) string {
	t.Helper()
	store, err := raft.NewFileSnapshotStore(dataDir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	sink, err := store.Create(raft.SnapshotVersionMax, index, term, conf, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsm.WriteSnapshot(sink, index, st); err != nil {
		sink.Cancel()
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

// brokenCopy returns st with a catalog whose first route stops short of the
// next one: a gap, which Restore must refuse.
func brokenCopy(st *api.StateSnapshot) *api.StateSnapshot {
	b := st
	b.Catalog.Routes[0].End = append([]byte(nil), "a-gap"...)
	return b
}

func TestIntegrationBrokenSnapshotIsRefused(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 1, nil)
	c.splitChain("n1", 20, "k")
	n1 := c.node("n1")
	if err := n1.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	want := businessHash(t, n1)
	st := n1.FSM().State()
	conf := n1.Raft().GetConfiguration().Configuration()
	index, term := st.Index(), n1.Raft().CurrentTerm()
	good := st.Proto()
	c.stop("n1")

	// A newer snapshot that breaks an invariant, beside a valid older one:
	// the node refuses to start rather than silently fall back to the older
	// one, naming the snapshot and the invariant.
	broken := writeSnapshot(t, c.cfgs["n1"].DataDir, index+5, term, conf, brokenCopy(good))
	cfg := c.cfgs["n1"]
	cfg.Bootstrap = false
	cfg.RaftListener, cfg.GRPCListener = listen(t), listen(t)
	if n, err := Start(cfg); err == nil {
		n.Close(ctxT(t, 5*time.Second))
		t.Fatal("a node whose newest snapshot breaks a catalog invariant started from an older one")
	} else if !strings.Contains(err.Error(), broken) || !strings.Contains(err.Error(), "invariant") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("start error is not one line naming the snapshot %s and the invariant: %v", broken, err)
	}
	// Without it, the node starts from the older one.
	if err := os.RemoveAll(filepath.Join(c.cfgs["n1"].DataDir, "snapshots", broken)); err != nil {
		t.Fatal(err)
	}
	c.restart("n1")
	c.waitLeaderReady(10 * time.Second)
	if got := businessHash(t, c.node("n1")); got != want {
		t.Fatalf("after removing the broken snapshot the node holds %s, want %s", got, want)
	}
	c.stop("n1")

	// The broken snapshot alone: the node must not start.
	dir := t.TempDir()
	writeSnapshot(t, dir, index, term, conf, brokenCopy(st.Proto()))
	cfg = Config{ID: "n1", DataDir: dir, RaftAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Logger: quietLogger(), TLS: nodeTLS(t, t.TempDir(), "n1")}
	cfg.RaftListener, cfg.GRPCListener = listen(t), listen(t)
	n, err := Start(cfg)
	if err == nil {
		n.Close(ctxT(t, 5*time.Second))
		t.Fatal("a node whose only snapshot breaks a catalog invariant started")
	}
	if !strings.Contains(err.Error(), "invariant") || strings.Count(err.Error(), "\n") != 0 {
		t.Fatalf("start error is not one clear line naming the invariant: %v", err)
	}
	t.Logf("refusal: %v", err)
}
