package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	dto "github.com/prometheus/client_model/go"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/node/raftnet"
	"github.com/hotsplit/hotsplit/pki"
)

// serialAt dials addr over TLS (ALPN protos, with the client certificate
// of cfg) and returns the serial the server presents on this new
// connection.
func serialAt(t *testing.T, addr string, cfg *tls.Config, protos ...string) *big.Int {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName, cfg.NextProtos = "127.0.0.1", protos
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// memberTLS is a client config holding a fresh node certificate for id.
func memberTLS(t *testing.T, id string) *tls.Config {
	t.Helper()
	dir := t.TempDir()
	cfg := pairTLS(t, writeNodeCert(t, &TLSFiles{CertFile: filepath.Join(dir, id+".crt"), KeyFile: filepath.Join(dir, id+".key")}, id))
	cfg.ServerName = "127.0.0.1"
	return cfg
}

// TestIntegrationTLSRotationUnderLoad replaces the certificate and key of
// all three nodes while splits, linearizable reads and timestamps run
// through long-lived clients and through fresh clients that each make new
// connections: no request fails, and a new connection to each node's gRPC,
// raft and HTTP port after the rotation is shown the new certificate.
func TestIntegrationTLSRotationUnderLoad(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.HTTPAddr = "127.0.0.1:0" })
	var eps []string
	for _, n := range c.running() {
		eps = append(eps, n.GRPCAddr())
	}
	long, err := client.New(client.Config{Endpoints: eps, TLS: adminTLS(t), RequestTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer long.Close()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var (
		wg       sync.WaitGroup
		ops      atomic.Int64
		failMu   sync.Mutex
		failures []string
	)
	fail := func(what string, err error) {
		failMu.Lock()
		failures = append(failures, fmt.Sprintf("%s: %v", what, err))
		failMu.Unlock()
	}
	loop := func(name string, op func(i int) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 5000 && ctx.Err() == nil; i++ {
				if err := op(i); err != nil {
					if ctx.Err() != nil {
						return // stopped by the test
					}
					fail(name, err)
					return
				}
				ops.Add(1)
			}
		}()
	}
	loop("split", func(i int) error {
		key := fmt.Appendf(nil, "k%06d", i)
		r, err := long.GetRoute(ctx, &api.GetRouteRequest{Key: key})
		if err != nil {
			return err
		}
		_, err = long.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r.Route.RouteId, SplitKey: key})
		return err
	})
	loop("timestamp", func(int) error {
		_, err := long.GetTimestamp(ctx, &api.GetTimestampRequest{Count: 10})
		return err
	})
	loop("fresh client read", func(i int) error {
		cl, err := client.New(client.Config{Endpoints: []string{eps[i%len(eps)]}, TLS: adminTLS(t), RequestTimeout: 10 * time.Second})
		if err != nil {
			return err
		}
		defer cl.Close()
		_, err = cl.ListRoutes(ctx, &api.ListRoutesRequest{PageSize: 10})
		return err
	})
	testutil.WaitFor(t, 20*time.Second, "load running", func() bool { return ops.Load() > 30 })

	newSerial := map[string]*big.Int{}
	for _, n := range c.running() {
		p := writeNodeCert(t, c.cfgs[n.ID()].TLS, n.ID())
		newSerial[n.ID()] = p.Cert.SerialNumber
	}
	for _, n := range c.running() {
		testutil.WaitFor(t, 10*time.Second, n.ID()+" on its new certificate", func() bool {
			return n.TLSCertificate().SerialNumber.Cmp(newSerial[n.ID()]) == 0
		})
	}
	rotatedAt := ops.Load()
	testutil.WaitFor(t, 30*time.Second, "load after the rotation", func() bool { return ops.Load() > rotatedAt+150 })
	for _, n := range c.running() {
		want := newSerial[n.ID()]
		for port, got := range map[string]*big.Int{
			"gRPC": serialAt(t, n.GRPCAddr(), adminTLS(t), "h2"),
			"raft": serialAt(t, n.RaftAddr(), memberTLS(t, "n1")),
			"HTTP": serialAt(t, n.HTTPAddr(), adminTLS(t), "http/1.1"),
		} {
			if got.Cmp(want) != 0 {
				t.Errorf("%s %s port: a new connection sees serial %x, want the new %x", n.ID(), port, got, want)
			}
		}
	}
	// The HTTP port still serves, with the client certificate optional.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: testCA(t).Pool()}}}
	resp, err := hc.Get("https://" + c.node("n1").HTTPAddr() + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz over https: %v %v", resp, err)
	}
	resp.Body.Close()
	stop()
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("requests failed across the rotation (%d ops in all): %s", ops.Load(), strings.Join(failures, "; "))
	}
	t.Logf("%d requests, none failed; rotation at op %d", ops.Load(), rotatedAt)
	c.waitConverged(10 * time.Second)
}

// TestIntegrationRaftFloodKeepsCommitLatency: half-open connections (twice
// the handshake cap per node) and bad-certificate handshakes against every
// node's raft port do not slow split commits by more than half. Quiet and
// flooded phases alternate, so load from outside the test (a shared
// machine) falls on both sides of the comparison alike; the attacker runs
// in this process, so its CPU is counted against the flooded phases.
func TestIntegrationRaftFloodKeepsCommitLatency(t *testing.T) {
	skipShort(t)
	// raft's default timing (1 s), not the tests' 150 ms: on two shared
	// cores the attacker's own CPU, in this process, could otherwise delay
	// a heartbeat past the election timeout, which says nothing about the
	// stream layer.
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 0, 0, 0
		cfg.CeilingWindow = 5 * time.Second
	})
	leader := c.waitLeaderReady(10 * time.Second)
	cl := c.catalogClient(leader)
	ctx := context.Background()
	route := uint64(1)
	i := 0
	// splits commits splits one after another for d (at most 5000).
	splits := func(d time.Duration) []time.Duration {
		var out []time.Duration
		for end := time.Now().Add(d); time.Now().Before(end) && len(out) < 5000; {
			t0 := time.Now()
			resp, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: route, SplitKey: fmt.Appendf(nil, "k%08d", i), RequestId: requestID()})
			if err != nil {
				t.Fatalf("split %d: %v", i, err)
			}
			out = append(out, time.Since(t0))
			route = resp.Right.RouteId
			i++
		}
		return out
	}
	splits(200 * time.Millisecond) // warm up

	other, err := pki.NewCA("attacker", 0)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := other.NewNode("n2", pki.NodeOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	badTLS := pairTLS(t, bad)
	badTLS.ServerName = "127.0.0.1"
	var halfOpen, badHandshakes atomic.Int64
	flood := func() (stop func()) {
		fctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		pause := func(d time.Duration) {
			select {
			case <-fctx.Done():
			case <-time.After(d):
			}
		}
		for _, n := range c.running() {
			addr := n.RaftAddr()
			// Half-open: twice the handshake cap of idle connections, each
			// reopened 1 s after the node closes it (eviction, deadline), so
			// the cap stays full and evicting.
			for range 2 * raftnet.MaxHandshakes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mu sync.Mutex // guards cur
					var cur net.Conn
					go func() { // one closer per worker, not per connection
						<-fctx.Done()
						mu.Lock()
						if cur != nil {
							cur.Close()
						}
						mu.Unlock()
					}()
					for k := 0; k < 100 && fctx.Err() == nil; k++ {
						if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
							halfOpen.Add(1)
							mu.Lock()
							cur = conn
							mu.Unlock()
							if fctx.Err() == nil {
								io.Copy(io.Discard, conn) // until the node closes it
							}
							conn.Close()
						}
						pause(time.Second)
					}
				}()
			}
			// Bad certificates: a handshake every 20 ms per node.
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < 10000 && fctx.Err() == nil; k++ {
					if conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, badTLS); err == nil {
						conn.SetDeadline(time.Now().Add(time.Second))
						conn.Read(make([]byte, 1))
						conn.Close()
					}
					badHandshakes.Add(1)
					pause(20 * time.Millisecond)
				}
			}()
		}
		return func() { cancel(); wg.Wait() }
	}
	// Quiet and flooded phases in the order Q F F Q Q F F Q: a split costs
	// a little more as the catalog grows, and this order gives both kinds
	// the same mean position.
	var quiet, flooded []time.Duration
	var cpuQuiet, cpuFlood time.Duration
	for phase, floodOn := range []bool{false, true, true, false, false, true, true, false} {
		var stop func()
		if floodOn {
			stop = flood()
			if phase == 1 {
				testutil.WaitFor(t, 10*time.Second, "the flood under way", func() bool {
					return refusals(t, c.node(leader), "handshake_cap") > 0 && refusals(t, c.node(leader), "handshake") > 20
				})
			}
		}
		c0 := cpuTime()
		lat := splits(600 * time.Millisecond)
		if floodOn {
			flooded, cpuFlood = append(flooded, lat...), cpuFlood+cpuTime()-c0
			stop()
		} else {
			quiet, cpuQuiet = append(quiet, lat...), cpuQuiet+cpuTime()-c0
		}
	}
	t.Logf("CPU of this process: %v quiet, %v flooded", cpuQuiet, cpuFlood)
	p50q, p50f := percentile(quiet, 0.5), percentile(flooded, 0.5)
	t.Logf("split commit p50 %v quiet, %v flooded (%d half-open connections, %d bad-certificate handshakes; p99 %v / %v)",
		p50q, p50f, halfOpen.Load(), badHandshakes.Load(), percentile(quiet, 0.99), percentile(flooded, 0.99))
	if p50f > p50q*3/2 {
		t.Fatalf("split commit p50 rose from %v to %v under the raft-port flood (limit 1.5x)", p50q, p50f)
	}
	if refusals(t, c.node(leader), "not_member") != 0 {
		t.Error("a member's connection was refused as a non-member")
	}
}

// refusals reads hotsplit_raft_conns_refused_total{reason} of a node.
func refusals(t *testing.T, n *Node, reason string) float64 {
	t.Helper()
	mfs, err := n.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hotsplit_raft_conns_refused_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetValue() == reason }) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestIntegrationInsecureSmoke keeps the --insecure path alive: a
// plaintext cluster serves splits, reads and timestamps to a plaintext
// client. It also shows what TLS is for: a plaintext AppendEntries from an
// outsider reaches raft here (it moves a follower's term), where the
// secure tests see it refused before one byte is read.
func TestIntegrationInsecureSmoke(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, func(cfg *Config) { cfg.Insecure = true })
	var eps []string
	for _, n := range c.running() {
		eps = append(eps, n.GRPCAddr())
	}
	if _, err := client.New(client.Config{Endpoints: eps}); !errors.Is(err, client.ErrNoTransportSecurity) {
		t.Fatalf("a client without TLS or Insecure: %v", err)
	}
	cl, err := client.New(client.Config{Endpoints: eps, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := ctxT(t, 30*time.Second)
	c.mustSplit(c.followers()[0], "m")
	if _, err := cl.GetTimestamp(ctx, &api.GetTimestampRequest{Count: 1}); err != nil {
		t.Fatal(err)
	}
	if r, err := cl.ListRoutes(ctx, &api.ListRoutesRequest{}); err != nil || len(r.Routes) != 2 {
		t.Fatalf("list: %v %v", r, err)
	}

	f := c.node(c.followers()[0])
	term := f.Raft().CurrentTerm()
	attacker, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 2*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	var resp raft.AppendEntriesResponse
	err = attacker.AppendEntries(raft.ServerID(f.ID()), raft.ServerAddress(f.RaftAddr()),
		&raft.AppendEntriesRequest{RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("evil"), Addr: []byte(attacker.LocalAddr())}, Term: term + 5}, &resp)
	if err != nil || resp.Term != term+5 {
		t.Fatalf("plaintext AppendEntries to an insecure node: %v, answered term %d (was %d)", err, resp.Term, term)
	}
	// The follower's new term deposes the leader at its next heartbeat; a
	// leader of a later term serves again.
	testutil.WaitFor(t, 20*time.Second, "a leader at the attacker's term or later", func() bool {
		id := c.leader()
		return id != "" && c.node(id).Raft().CurrentTerm() >= term+5
	})
	c.mustSplit(c.leader(), "t")
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
