package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/transport"
)

// testCluster is an in-process cluster on 127.0.0.1 with fast raft timing.
type testCluster struct {
	t     testing.TB
	dir   string
	mu    sync.Mutex
	nodes map[string]*Node
	cfgs  map[string]Config
	conns map[string]*grpc.ClientConn
}

func quietLogger() *slog.Logger {
	if testing.Verbose() && os.Getenv("HOTSPLIT_TEST_LOGS") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func fastTiming(c *Config) {
	c.HeartbeatTimeout = 150 * time.Millisecond
	c.ElectionTimeout = 150 * time.Millisecond
	c.LeaderLeaseTimeout = 100 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.CeilingWindow = 500 * time.Millisecond
}

func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// newTestCluster starts n nodes: n1 bootstraps, the others join it.
func newTestCluster(t testing.TB, n int, tweak func(*Config)) *testCluster {
	return newTestClusterIn(t, t.TempDir(), n, tweak)
}

// newTestClusterIn is newTestCluster with data dirs under dir.
func newTestClusterIn(t testing.TB, dir string, n int, tweak func(*Config)) *testCluster {
	t.Helper()
	c := &testCluster{t: t, dir: dir, nodes: map[string]*Node{}, cfgs: map[string]Config{}, conns: map[string]*grpc.ClientConn{}}
	t.Cleanup(c.stopAll)
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		cfg := Config{ID: id, DataDir: filepath.Join(c.dir, id), Logger: quietLogger()}
		fastTiming(&cfg)
		if i == 1 {
			cfg.Bootstrap = true
		} else {
			cfg.Join = []string{c.node("n1").GRPCAddr()}
		}
		if tweak != nil {
			tweak(&cfg)
		}
		c.start(cfg)
		if i == 1 {
			c.waitLeaderReady(10 * time.Second)
		}
	}
	c.waitVoters(n, 60*time.Second) // joins retry at a loaded machine's pace
	return c
}

// start runs a node with cfg on fresh loopback listeners; the advertised
// addresses are fixed on first start so a restarted node keeps them. A
// node runs TLS with certificates under <dir>/certs unless cfg sets TLS or
// Insecure.
func (c *testCluster) start(cfg Config) *Node {
	c.t.Helper()
	if prev, ok := c.cfgs[cfg.ID]; ok {
		cfg.RaftAddr, cfg.GRPCAddr = prev.RaftAddr, prev.GRPCAddr
	} else {
		r, g := listen(c.t), listen(c.t)
		cfg.RaftAddr, cfg.GRPCAddr = r.Addr().String(), g.Addr().String()
		r.Close()
		g.Close()
		if len(cfg.Join) > 0 && !cfg.Insecure {
			c.admit(cfg.ID, cfg.RaftAddr)
		}
	}
	if cfg.TLS == nil && !cfg.Insecure {
		cfg.TLS = nodeTLS(c.t, filepath.Join(c.dir, "certs"), cfg.ID)
	}
	if cfg.Limits.Rate == nil {
		// Every test client is the one test admin: per-identity rate limits
		// would throttle the load tests (transport's unit tests cover them).
		cfg.Limits.Rate = &transport.RateLimits{}
	}
	n, err := Start(cfg)
	if err != nil {
		c.t.Fatalf("start %s: %v", cfg.ID, err)
	}
	c.mu.Lock()
	c.nodes[cfg.ID], c.cfgs[cfg.ID] = n, cfg
	c.mu.Unlock()
	return n
}

// admit lets a new node join with its own certificate, as an admin does
// with `hotsplitctl cluster add` (cluster version 2).
func (c *testCluster) admit(id, raftAddr string) {
	c.t.Helper()
	// A leader whose fence has not committed yet, or a leader change on a
	// loaded machine, answers Unavailable or an unknown outcome: admitting
	// again replaces the admission, which is harmless before the node runs.
	testutil.WaitFor(c.t, 30*time.Second, "admission of "+id, func() bool {
		lead := c.waitLeaderReady(20 * time.Second)
		_, err := c.clusterClient(lead).Admit(ctxT(c.t, 10*time.Second), &api.AdmitRequest{NodeId: id, RaftAddr: raftAddr})
		if code := status.Code(err); code != codes.OK && code != codes.Unavailable && code != codes.Unknown {
			c.t.Fatalf("admit %s: %v", id, err)
		}
		return err == nil
	})
}

func (c *testCluster) node(id string) *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[id]
}

func (c *testCluster) running() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*Node
	for _, id := range sortedKeys(c.nodes) {
		out = append(out, c.nodes[id])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := 1; i < len(ks); i++ {
		for j := i; j > 0 && ks[j-1] > ks[j]; j-- {
			ks[j-1], ks[j] = ks[j], ks[j-1]
		}
	}
	return ks
}

// stop shuts a node down gracefully and forgets it (its data dir stays).
func (c *testCluster) stop(id string) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	if cc := c.conns[id]; cc != nil {
		cc.Close()
		delete(c.conns, id)
	}
	c.mu.Unlock()
	if n == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil {
		c.t.Logf("close %s: %v", id, err)
	}
}

// restart starts a stopped node again from its data dir.
func (c *testCluster) restart(id string) *Node {
	c.t.Helper()
	cfg := c.cfgs[id]
	cfg.Bootstrap, cfg.Join = false, nil
	return c.start(cfg)
}

func (c *testCluster) stopAll() {
	for _, id := range sortedKeys(c.nodes) {
		c.stop(id)
	}
}

func (c *testCluster) conn(id string) *grpc.ClientConn {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := c.conns[id]; ok {
		return cc
	}
	creds := adminCreds(c.t)
	if c.cfgs[id].Insecure {
		creds = grpc.WithTransportCredentials(insecure.NewCredentials())
	}
	cc, err := grpc.NewClient(c.cfgs[id].GRPCAddr, creds)
	if err != nil {
		c.t.Fatal(err)
	}
	c.conns[id] = cc
	return cc
}

func (c *testCluster) catalogClient(id string) api.CatalogClient {
	return api.NewCatalogClient(c.conn(id))
}
func (c *testCluster) autoClient(id string) api.AutoSplitClient {
	return api.NewAutoSplitClient(c.conn(id))
}
func (c *testCluster) clusterClient(id string) api.ClusterClient {
	return api.NewClusterClient(c.conn(id))
}

// leader returns the id of the node whose leader duties are ready.
func (c *testCluster) leader() string {
	for _, n := range c.running() {
		if n.Scheduler().IsReady() {
			return n.ID()
		}
	}
	return ""
}

func (c *testCluster) waitLeaderReady(d time.Duration) string {
	c.t.Helper()
	var id string
	testutil.WaitFor(c.t, d, "a ready leader", func() bool { id = c.leader(); return id != "" && c.node(id).FSM().State().Bootstrapped() })
	return id
}

// leaderNode is the node whose leader duties are ready, waiting (bounded)
// through an election: c.node(c.leader()) is nil while there is none.
func (c *testCluster) leaderNode() *Node {
	c.t.Helper()
	return c.node(c.waitLeaderReady(10 * time.Second))
}

func (c *testCluster) followers() []string {
	var out []string
	for _, n := range c.running() {
		if n.Raft().State() != raft.Leader {
			out = append(out, n.ID())
		}
	}
	return out
}

func (c *testCluster) waitVoters(n int, d time.Duration) {
	c.t.Helper()
	testutil.WaitFor(c.t, d, fmt.Sprintf("%d voters", n), func() bool {
		id := c.leader()
		if id == "" {
			return false
		}
		f := c.node(id).Raft().GetConfiguration()
		if f.Error() != nil {
			return false
		}
		voters := 0
		for _, s := range f.Configuration().Servers {
			if s.Suffrage == raft.Voter {
				voters++
			}
		}
		return voters == n
	})
}

// waitConverged waits until every running node has applied the leader's
// last index and all state hashes agree; it returns the common hash.
func (c *testCluster) waitConverged(d time.Duration) [32]byte {
	c.t.Helper()
	var h [32]byte
	testutil.WaitFor(c.t, d, "all nodes on one state hash", func() bool {
		nodes := c.running()
		if len(nodes) == 0 {
			return false
		}
		h = nodes[0].FSM().State().Hash()
		idx := nodes[0].FSM().State().Index()
		for _, n := range nodes[1:] {
			st := n.FSM().State()
			if st.Index() != idx || st.Hash() != h {
				return false
			}
		}
		return true
	})
	return h
}

func requestID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// businessHash is stateBusinessHash of the node (statehash.go).
func businessHash(t testing.TB, n *Node) string {
	t.Helper()
	h, err := stateBusinessHash(n.FSM().State())
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// waitBusinessConverged waits until every running node shows the same
// business state and returns its hash.
func (c *testCluster) waitBusinessConverged(d time.Duration) string {
	c.t.Helper()
	var h string
	testutil.WaitFor(c.t, d, "all nodes on one business state", func() bool {
		nodes := c.running()
		h = businessHash(c.t, nodes[0])
		for _, n := range nodes[1:] {
			if businessHash(c.t, n) != h {
				return false
			}
		}
		return true
	})
	return h
}

// forgetHalted releases what a node that halted itself (under a test's
// Config.Halt) still holds, and drops it from the cluster.
func (c *testCluster) forgetHalted(id string) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	c.mu.Unlock()
	<-n.Halted()
	n.closeOnce.Do(func() {}) // halt already stopped gRPC and raft
	n.cancel()
	n.wg.Wait()
	n.peers.Close()
	n.stores.Close()
	n.closeListeners()
}

// metricSample reads one sample of a metric from n's registry: the one
// whose (single) label has the given value, or the unlabelled one for "".
func metricSample(t testing.TB, n *Node, name, label string) float64 {
	t.Helper()
	mfs, err := n.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if (label == "" && len(m.GetLabel()) == 0) || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == label) {
				if g := m.GetGauge(); g != nil {
					return g.GetValue()
				}
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no sample of %s{%s}", name, label)
	return 0
}
