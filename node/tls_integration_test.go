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
	"github.com/prometheus/client_golang/prometheus"
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
// node's raft port do not slow split commits by more than half.
//
// What is judged is the nodes' cost of refusing the flood, not the
// machine: the attacker is a process of its own at low CPU priority
// (raftflood_attacker_test.go), so its own TLS work is not taken out of
// the nodes' share. Short quiet and flooded phases alternate, Q F Q F ...
// Q; each flooded phase is compared with the quiet phases just before and
// after it (which also cancels the drift of a catalog that grows with
// every split), and the verdict is the median of these ratios, so a burst
// of load from outside (a shared machine) spoils one ratio, not the
// verdict.
func TestIntegrationRaftFloodKeepsCommitLatency(t *testing.T) {
	skipShort(t)
	const (
		floodedPhases = 8
		phaseMin      = 200 * time.Millisecond
		minSplits     = 20
		// Per node and measured flooded phase, at least this many
		// bad-certificate handshakes refused (the attacker tries 50 a
		// second).
		minBadRefused = 5
	)
	// raft's default timing (1 s), not the tests' 150 ms: on two shared
	// cores a burst of outside load could otherwise delay a heartbeat past
	// the election timeout, which says nothing about the stream layer.
	counters := map[string]*refusalCounter{}
	c := newTestCluster(t, 3, func(cfg *Config) {
		cfg.HeartbeatTimeout, cfg.ElectionTimeout, cfg.LeaderLeaseTimeout = 0, 0, 0
		cfg.CeilingWindow = 5 * time.Second
		counters[cfg.ID] = newRefusalCounter()
		cfg.Registry = counters[cfg.ID]
	})
	leader := c.waitLeaderReady(10 * time.Second)
	cl := c.catalogClient(leader)
	ctx := context.Background()
	route := uint64(1)
	i := 0
	// splits commits splits one after another for at least d and
	// minSplits splits (so that a stall of the machine is one sample of
	// many) and until done (checked every 50 ms) holds, for at most 5 s and
	// 5000 splits; ok says whether done held.
	splits := func(d time.Duration, done func() bool) (lat []time.Duration, ok bool) {
		start, checked := time.Now(), time.Time{}
		for len(lat) < 5000 {
			if since := time.Since(start); since >= d && len(lat) >= minSplits && time.Since(checked) >= 50*time.Millisecond {
				if done() {
					return lat, true
				}
				if since > 5*time.Second {
					return lat, false
				}
				checked = time.Now()
			}
			t0 := time.Now()
			resp, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: route, SplitKey: fmt.Appendf(nil, "k%08d", i), RequestId: requestID()})
			if err != nil {
				t.Fatalf("split %d: %v", i, err)
			}
			lat = append(lat, time.Since(t0))
			route = resp.Right.RouteId
			i++
		}
		return lat, done()
	}
	always := func() bool { return true }
	splits(200*time.Millisecond, always) // warm up

	other, err := pki.NewCA("attacker", 0)
	if err != nil {
		t.Fatal(err)
	}
	bad, err := other.NewNode("n2", pki.NodeOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	spec := raftFloodSpec{HalfOpen: 2 * raftnet.MaxHandshakes, CertPEM: bad.CertPEM, KeyPEM: bad.KeyPEM}
	for _, n := range c.running() {
		spec.Addrs = append(spec.Addrs, n.RaftAddr())
	}
	attacker := startRaftFlood(t, spec)

	// refusedNow is, per node, how many raft connections it has evicted
	// at the handshake cap and refused in the handshake.
	type refused struct{ capped, handshake float64 }
	refusedNow := func() map[string]refused {
		m := map[string]refused{}
		for id, r := range counters {
			m[id] = refused{r.of(t, "handshake_cap"), r.of(t, "handshake")}
		}
		return m
	}
	// rise is the smallest rise of each counter over the nodes, and the
	// sum of both over the nodes.
	rise := func(before, after map[string]refused) (least refused, total float64) {
		first := true
		for id, a := range after {
			d := refused{a.capped - before[id].capped, a.handshake - before[id].handshake}
			if first {
				least, first = d, false
			}
			least = refused{min(least.capped, d.capped), min(least.handshake, d.handshake)}
			total += d.capped + d.handshake
		}
		return least, total
	}
	type phase struct {
		lat []time.Duration
		cpu time.Duration
	}
	quiet := func() phase {
		c0 := cpuTime()
		lat, _ := splits(phaseMin, always)
		return phase{lat, cpuTime() - c0}
	}
	// A flooded phase is measured in the flood's steady state: it starts
	// once every node has taken the attacker's half-open connections and
	// evicted those beyond its cap (the opening burst is not measured),
	// and lasts until every node has refused minBadRefused bad-certificate
	// handshakes during it. The next phase starts once the nodes have
	// refused every connection the attacker made (nor is its closing
	// measured).
	var halfOpen, badHandshakes int64
	flooded := func() (phase, refused) {
		before := refusedNow()
		attacker.on()
		testutil.WaitFor(t, 10*time.Second, "every node evicting the half-open connections beyond its cap", func() bool {
			least, _ := rise(before, refusedNow())
			return least.capped >= float64(spec.HalfOpen-raftnet.MaxHandshakes)
		})
		start := refusedNow()
		var seen refused
		c0 := cpuTime()
		lat, ok := splits(phaseMin, func() bool {
			seen, _ = rise(start, refusedNow())
			return seen.handshake >= minBadRefused
		})
		cpu := cpuTime() - c0
		h, b := attacker.off()
		halfOpen, badHandshakes = halfOpen+h, badHandshakes+b
		if !ok {
			t.Fatalf("the flood was not under way within 5 s: a node refused only %v handshakes (the attacker made %d half-open connections, %d bad-certificate handshakes)", seen.handshake, h, b)
		}
		testutil.WaitFor(t, 10*time.Second, "the nodes refusing every connection of the flood", func() bool {
			_, total := rise(before, refusedNow())
			return total >= float64(h+b)
		})
		return phase{lat, cpu}, seen
	}

	var ratios []float64
	var cpuQuiet, cpuFlood time.Duration
	prev := quiet()
	for k := range floodedPhases {
		f, seen := flooded()
		next := quiet()
		p50f, p50q := percentile(f.lat, 0.5), (percentile(prev.lat, 0.5)+percentile(next.lat, 0.5))/2
		ratios = append(ratios, float64(p50f)/float64(p50q))
		t.Logf("flooded phase %d: split commit p50 %v (%d splits, CPU %v), quiet before and after %v (%d splits, CPU %v) and %v (%d, %v): %.2fx; each node refused at least %v bad-certificate handshakes while measured",
			k, p50f, len(f.lat), f.cpu, percentile(prev.lat, 0.5), len(prev.lat), prev.cpu, percentile(next.lat, 0.5), len(next.lat), next.cpu, ratios[k], seen.handshake)
		cpuQuiet, cpuFlood = cpuQuiet+prev.cpu, cpuFlood+f.cpu
		prev = next
	}
	cpuQuiet += prev.cpu
	t.Logf("CPU of this process: %v in %d quiet phases, %v in %d flooded; the attacker made %d half-open connections, %d bad-certificate handshakes",
		cpuQuiet, floodedPhases+1, cpuFlood, floodedPhases, halfOpen, badHandshakes)
	slices.Sort(ratios)
	median := (ratios[floodedPhases/2-1] + ratios[floodedPhases/2]) / 2
	t.Logf("ratios sorted %.2f; median %.2fx", ratios, median)
	if median > 1.5 {
		t.Fatalf("split commit p50 rose %.2fx (median over %d flooded phases) under the raft-port flood (limit 1.5x)", median, floodedPhases)
	}
	for id, r := range counters {
		if r.of(t, "not_member") != 0 {
			t.Errorf("%s refused a member's connection as a non-member", id)
		}
	}
}

// refusalCounter is a node's metrics registry that keeps the node's
// hotsplit_raft_conns_refused_total when the node registers it, so a test
// can read it without gathering every metric of the node: polled while
// latency is measured, that gathering would cost the measured process
// (allocation, hence garbage collection) more than a flood does.
type refusalCounter struct {
	*prometheus.Registry
	vec atomic.Pointer[prometheus.CounterVec]
}

func newRefusalCounter() *refusalCounter {
	return &refusalCounter{Registry: prometheus.NewRegistry()}
}

func (r *refusalCounter) Register(c prometheus.Collector) error {
	r.keep(c)
	return r.Registry.Register(c)
}

func (r *refusalCounter) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		r.keep(c)
	}
	r.Registry.MustRegister(cs...)
}

func (r *refusalCounter) keep(c prometheus.Collector) {
	v, ok := c.(*prometheus.CounterVec)
	if !ok {
		return
	}
	descs := make(chan *prometheus.Desc, 1) // a vector has one
	v.Describe(descs)
	if strings.Contains((<-descs).String(), `"hotsplit_raft_conns_refused_total"`) {
		r.vec.Store(v)
	}
}

// of is the count for reason.
func (r *refusalCounter) of(t *testing.T, reason string) float64 {
	t.Helper()
	v := r.vec.Load()
	if v == nil {
		t.Fatal("the node registered no hotsplit_raft_conns_refused_total")
	}
	var m dto.Metric
	if err := v.WithLabelValues(reason).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
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
