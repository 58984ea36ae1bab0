package sim

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
	server "github.com/hotsplit/hotsplit/node"
	"github.com/hotsplit/hotsplit/pki"
)

// TestIntegrationRunAgainstCluster runs the simulator against a real
// in-process node (raft, FSM, scheduler, transport) with automatic splitting
// on and a 500 ms step: every operation must end up in a column the leader
// committed (none late, none refused), and the hotkey workload's hot key
// must end up isolated in a route [H, H·0x00).
func TestIntegrationRunAgainstCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster node and runs for seconds")
	}
	w := mustWorkload(t, HotKey, nil)
	raftLn, grpcLn := listenLocal(t), listenLocal(t)
	on := true
	nodeTLS, clientTLS := testTLS(t)
	n, err := server.Start(server.Config{
		TLS: nodeTLS,
		ID:  "n1", DataDir: filepath.Join(t.TempDir(), "n1"), Bootstrap: true,
		RaftAddr: raftLn.Addr().String(), GRPCAddr: grpcLn.Addr().String(),
		RaftListener: raftLn, GRPCListener: grpcLn,
		InitialSplits: w.Keys().SplitKeys(1),
		AutoSplit:     &on,
		// A step and grace long enough that a report held up by a loaded
		// machine (two shared cores, other work beside) still makes its
		// column: the test is about counting, not about how fast.
		BootstrapConfig:  &api.Config{StepMs: 500, GraceMs: 500, CooldownMs: 2000},
		HeartbeatTimeout: 150 * time.Millisecond, ElectionTimeout: 150 * time.Millisecond,
		LeaderLeaseTimeout: 100 * time.Millisecond, CommitTimeout: 5 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Halt:   func(err error) { t.Errorf("node halted: %v", err) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Close(ctx)
	})
	cl, err := client.New(client.Config{Endpoints: []string{n.GRPCAddr()}, TLS: clientTLS})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	testutil.WaitFor(t, waitLimit, "the step to be 500 ms", func() bool {
		resp, err := cl.GetConfig(context.Background(), &api.GetConfigRequest{})
		return err == nil && resp.GetConfig().GetStepMs() == 500
	})

	s := newSim(t, Config{Cluster: cl, Workload: w, Nodes: 3, Rate: 3000, Duration: 5 * time.Second, Seed: 5})
	if err := runFor(t, s, 30*time.Second); err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := s.Stats()
	t.Logf("%d ops in %v: %d acknowledged, %d late, %d refused; %d columns, catalog v%d with %d routes",
		st.Ops, st.Elapsed, st.OpsAcked, st.OpsLate, st.OpsRefused, st.Columns.ColumnsClosed, st.CatalogVersion, st.Routes)
	if st.Ops != st.Planned || st.OpsAcked != st.Ops || st.OpsLate != 0 || st.OpsRefused != 0 || st.UnknownRoute != 0 {
		t.Errorf("stats %+v", st)
	}

	lo, _, _ := w.Hotspot(0)
	hot := w.Keys().Key(lo)
	isolated := append(bytes.Clone(hot), 0)
	var routes *api.ListRoutesResponse
	testutil.WaitFor(t, waitLimit, "the hot key's isolation", func() bool {
		routes, err = cl.ListAllRoutes(context.Background(), api.Consistency_CONSISTENCY_LINEARIZABLE)
		if err != nil {
			return false
		}
		for _, r := range routes.GetRoutes() {
			if bytes.Equal(r.GetStart(), hot) && bytes.Equal(r.GetEnd(), isolated) {
				return true
			}
		}
		return false
	})
}

func listenLocal(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// testTLS writes a CA and a node certificate for n1 (127.0.0.1) and returns
// the node's files and a client config of a reporter+reader certificate, as
// a data node embedding keyviz would hold.
func testTLS(t *testing.T) (*server.TLSFiles, *tls.Config) {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("sim-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &server.TLSFiles{CertFile: filepath.Join(dir, "n1.crt"), KeyFile: filepath.Join(dir, "n1.key"), CAFile: filepath.Join(dir, "ca.crt")}
	if err := ca.Write(f.CAFile, filepath.Join(dir, "ca.key"), false); err != nil {
		t.Fatal(err)
	}
	node, err := ca.NewNode("n1", pki.NodeOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := node.Write(f.CertFile, f.KeyFile, false); err != nil {
		t.Fatal(err)
	}
	p, err := ca.NewClient("sim", []string{"reporter", "reader"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := p.ClientTLS(ca.Pool())
	if err != nil {
		t.Fatal(err)
	}
	return f, cfg
}
