package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// The rolling-upgrade process tests
// (docs/design.md#cluster-versions-and-features): a cluster of three nodes runs
// a release recorded in testdata/upgrade/baseline, built from its own tree; the
// nodes are replaced one at a time by the head build on the same data dir and
// flags. The old nodes are driven only through the public API (head's client
// over gRPC, the old hotsplitctl as a reporter) and /healthz and /readyz.

// upgradeStepMs is the column length of the upgrade clusters: short, so
// the tests see many columns; the grace is the whole step, so a reporter
// that is finding a new leader still lands its column in time.
const upgradeStepMs = 2000

// upgradeSplitKeys are the initial routes' boundaries, inside the
// simulators' key space (user:00000000 … user:00099999).
const upgradeSplitKeys = "user:00020000,user:00040000,user:00060000,user:00080000"

// upgradeCluster is three hotsplitd processes that start on an old build.
type upgradeCluster struct {
	t        *testing.T
	dir      string
	procs    []*proc
	certs    certDir // "" when insecure
	insecure bool
	cl       *client.Client // head's client, as the admin
	probe    *http.Client   // for /healthz and /readyz
}

func (c *upgradeCluster) endpoints() string {
	var eps []string
	for _, p := range c.procs {
		eps = append(eps, p.grpc)
	}
	return strings.Join(eps, ",")
}

func (c *upgradeCluster) byID(id string) *proc {
	for _, p := range c.procs {
		if p.id == id {
			return p
		}
	}
	c.t.Fatalf("no node %q", id)
	return nil
}

// startUpgradeCluster starts n1 (bootstrap) and n2, n3 (joining) on the
// old hotsplitd. A secure cluster is admitted and joined with head's
// hotsplitctl and certificates from pki; an insecure one (version 1 has no
// TLS) joins as version 1 did.
func startUpgradeCluster(t *testing.T, oldD, headCtl string, insecure bool, clients ...string) *upgradeCluster {
	t.Helper()
	c := &upgradeCluster{t: t, dir: t.TempDir(), insecure: insecure}
	ids := []string{"n1", "n2", "n3"}
	for _, id := range ids {
		c.procs = append(c.procs, &proc{id: id, dataDir: filepath.Join(c.dir, id), raft: freePort(t), grpc: freePort(t), http: freePort(t),
			logPath: filepath.Join(c.dir, id+".log")})
	}
	// raft's default timeouts (the process tests' 200 ms ones make a
	// loaded machine elect spuriously, and each election may cost a
	// reporter its column), given after proc's own so that they win.
	common := []string{"--autoSplitStep", fmt.Sprint(upgradeStepMs) + "ms",
		"--raftHeartbeatTimeout", "1s", "--raftElectionTimeout", "1s", "--raftLeaderLeaseTimeout", "500ms"}
	if !insecure {
		c.certs = makeCerts(t, headCtl, filepath.Join(c.dir, "certs"), ids...)
		for _, name := range clients {
			if out, err := exec.Command(headCtl, "certs", "create-client", name, "--role", "reader", "--dir", string(c.certs)).CombinedOutput(); err != nil {
				t.Fatalf("certs create-client %s: %v\n%s", name, err, out)
			}
		}
	}
	for _, p := range c.procs {
		p.args = slices.Clone(common)
		if !insecure {
			p.args = append(p.args, c.certs.nodeArgs(p.id)...)
		}
	}
	c.procs[0].args = append(c.procs[0].args, "--bootstrap", "--initialSplits", upgradeSplitKeys)
	for _, p := range c.procs[1:] {
		p.args = append(p.args, "--join", c.procs[0].grpc)
	}
	t.Cleanup(func() {
		if c.cl != nil {
			c.cl.Close()
		}
		for _, p := range c.procs {
			p.stop()
		}
		if t.Failed() {
			for _, p := range c.procs {
				b, _ := os.ReadFile(p.logPath)
				t.Logf("--- %s log ---\n%s", p.id, tail(b, 200))
			}
		}
	})

	c.connect()

	c.procs[0].start(t, oldD)
	c.waitReady(c.procs[0])
	for _, p := range c.procs[1:] {
		if !insecure {
			admit(t, headCtl, c.certs.adminEnv(), c.procs[0].grpc, p)
		}
		p.start(t, oldD)
		c.waitReady(p)
	}
	c.waitVoters()
	return c
}

// connect (re)makes the admin's client and the probe for the cluster's
// transport security.
func (c *upgradeCluster) connect() {
	c.t.Helper()
	if c.cl != nil {
		c.cl.Close()
	}
	cfg := c.clientConfig(c.endpoints())
	c.probe = &http.Client{Timeout: 3 * time.Second}
	if !c.insecure {
		ca, err := os.ReadFile(filepath.Join(string(c.certs), "ca.crt"))
		if err != nil {
			c.t.Fatal(err)
		}
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(ca)
		c.probe.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS13}}
	}
	cl, err := client.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.cl = cl
}

// probeURL is the URL of path on p's HTTP port.
func (c *upgradeCluster) probeURL(p *proc, path string) string {
	if c.insecure {
		return "http://" + p.http + path
	}
	return "https://" + p.http + path
}

// waitReady waits for /healthz and /readyz of p to answer 200.
func (c *upgradeCluster) waitReady(p *proc) {
	c.t.Helper()
	testutil.Eventually(c.t, 60*time.Second, p.id+" /healthz and /readyz", func() error {
		select {
		case err := <-p.exited:
			c.t.Fatalf("%s exited: %v", p.id, err)
		default:
		}
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := c.probe.Get(c.probeURL(p, path))
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s %s: %d %s", p.id, path, resp.StatusCode, body)
			}
		}
		return nil
	})
}

func (c *upgradeCluster) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 10*time.Second)
}

// waitVoters waits until every node answers Members with all three as
// voters and a leader (a version 1 node has no Health RPC).
func (c *upgradeCluster) waitVoters() {
	c.t.Helper()
	testutil.Eventually(c.t, 60*time.Second, "three voters and a leader seen by every node", func() error {
		for _, p := range c.procs {
			one, err := client.New(c.clientConfig(p.grpc))
			if err != nil {
				return err
			}
			ctx, cancel := c.ctx()
			m, err := one.Members(ctx, &api.MembersRequest{})
			cancel()
			one.Close()
			if err != nil {
				return fmt.Errorf("members via %s: %w", p.id, err)
			}
			voters, leader := 0, false
			for _, ms := range m.GetMembers() {
				if ms.GetSuffrage() == "voter" {
					voters++
				}
				leader = leader || ms.GetLeader()
			}
			if voters != 3 || !leader {
				return fmt.Errorf("%s sees %d voters, leader %v", p.id, voters, leader)
			}
		}
		return nil
	})
}

// clientConfig is head's client to endpoints (comma-separated), as the
// admin.
func (c *upgradeCluster) clientConfig(endpoints string) client.Config {
	cfg := client.Config{Endpoints: strings.Split(endpoints, ","), RequestTimeout: 5 * time.Second}
	if c.insecure {
		cfg.Insecure = true
	} else {
		f := func(n string) string { return filepath.Join(string(c.certs), n) }
		cfg.CACertFile, cfg.CertFile, cfg.KeyFile = f("ca.crt"), f("client-admin.crt"), f("client-admin.key")
	}
	return cfg
}

// waitHealthy waits for `cluster health` (Cluster.Health) to say HEALTHY
// with three reachable voters.
func (c *upgradeCluster) waitHealthy() {
	c.t.Helper()
	testutil.Eventually(c.t, 60*time.Second, "a healthy cluster of three voters", func() error {
		ctx, cancel := c.ctx()
		defer cancel()
		h, err := c.cl.Health(ctx, &api.HealthRequest{})
		if err != nil {
			return err
		}
		if h.GetStatus() != api.HealthStatus_HEALTH_STATUS_HEALTHY || h.GetVoters() != 3 || h.GetVotersReachable() != 3 {
			return fmt.Errorf("%v, %d of %d voters reachable: %v", h.GetStatus(), h.GetVotersReachable(), h.GetVoters(), h.GetReasons())
		}
		return nil
	})
}

// leader is the current leader's id and term.
func (c *upgradeCluster) leader() (string, uint64) {
	c.t.Helper()
	var id string
	var term uint64
	testutil.Eventually(c.t, 30*time.Second, "a leader", func() error {
		ctx, cancel := c.ctx()
		defer cancel()
		l, err := c.cl.Leader(ctx, &api.LeaderRequest{})
		if err != nil {
			return err
		}
		if l.GetLeaderId() == "" {
			return errors.New("no leader known")
		}
		id, term = l.GetLeaderId(), l.GetTerm()
		return nil
	})
	return id, term
}

// clusterVersion is the replicated cluster version (Cluster.Members).
func (c *upgradeCluster) clusterVersion() uint32 {
	c.t.Helper()
	var v uint32
	testutil.Eventually(c.t, 30*time.Second, "the cluster version", func() error {
		ctx, cancel := c.ctx()
		defer cancel()
		m, err := c.cl.Members(ctx, &api.MembersRequest{})
		if err != nil {
			return err
		}
		v = m.GetClusterVersion()
		return nil
	})
	return v
}

// replacementOrder is the order a rolling upgrade replaces the nodes in:
// a follower, then the leader (a leader change under load), then the last
// one.
func (c *upgradeCluster) replacementOrder() []*proc {
	lead, _ := c.leader()
	var order []*proc
	for _, p := range c.procs {
		if p.id != lead {
			order = append(order, p)
		}
	}
	return []*proc{order[0], c.byID(lead), order[1]}
}

// replace stops p with SIGTERM (it must exit 0: a leader hands leadership
// over first) and starts it on bin with the same data dir and flags
// (extra appended), then waits for its /readyz and for ready() to pass.
func (c *upgradeCluster) replace(p *proc, bin string, extra []string, ready func()) {
	c.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		if err != nil {
			c.t.Errorf("%s exited with %v after SIGTERM, want 0", p.id, err)
		}
	case <-time.After(60 * time.Second):
		c.t.Fatalf("%s did not stop within 60 s of SIGTERM", p.id)
	}
	p.cmd = nil
	p.args = append(p.args, extra...)
	p.start(c.t, bin)
	c.waitReady(p)
	ready()
}

// routes is the catalog (linearizable).
func (c *upgradeCluster) routes() *api.ListRoutesResponse {
	c.t.Helper()
	var r *api.ListRoutesResponse
	testutil.Eventually(c.t, 30*time.Second, "the catalog", func() error {
		ctx, cancel := c.ctx()
		defer cancel()
		var err error
		r, err = c.cl.ListAllRoutes(ctx, api.Consistency_CONSISTENCY_LINEARIZABLE)
		return err
	})
	return r
}

// decisions is every decision in the ring, oldest first.
func (c *upgradeCluster) decisions() []*api.Decision {
	c.t.Helper()
	var all []*api.Decision
	testutil.Eventually(c.t, 30*time.Second, "the decisions", func() error {
		all = all[:0]
		var before uint64
		for range 1000 {
			ctx, cancel := c.ctx()
			st, err := c.cl.Status(ctx, &api.StatusRequest{Limit: 200, DecisionsBeforeSeq: before})
			cancel()
			if err != nil {
				return err
			}
			all = append(all, st.GetRecent()...)
			if before = st.GetNextDecisionsBeforeSeq(); before == 0 {
				break
			}
		}
		return nil
	})
	slices.SortFunc(all, func(a, b *api.Decision) int { return int(a.GetSeq()) - int(b.GetSeq()) })
	return slices.CompactFunc(all, func(a, b *api.Decision) bool { return a.GetSeq() == b.GetSeq() })
}

// checkState runs Cluster.CheckState and fails unless every member
// reports one hash (in one format) at one index and none diverged.
func (c *upgradeCluster) checkState(what string) string {
	c.t.Helper()
	var resp *api.CheckStateResponse
	testutil.Eventually(c.t, 60*time.Second, "a state check every member answers ("+what+")", func() error {
		ctx, cancel := c.ctx()
		defer cancel()
		r, err := c.cl.CheckState(ctx, &api.CheckStateRequest{Actor: "upgrade-test"})
		if err != nil {
			return err
		}
		if len(r.GetReports()) != 3 {
			return fmt.Errorf("%d reports: %v", len(r.GetReports()), r)
		}
		for _, rep := range r.GetReports() {
			if rep.GetOutcome() != api.StateOutcome_STATE_OUTCOME_AGREES {
				return fmt.Errorf("%s: %v %s", rep.GetNodeId(), rep.GetOutcome(), rep.GetDetail())
			}
		}
		resp = r
		return nil
	})
	if len(resp.GetDiverged()) != 0 {
		c.t.Fatalf("%s: diverged members %v", what, resp.GetDiverged())
	}
	first := resp.GetReports()[0]
	for _, rep := range resp.GetReports() {
		if rep.GetIndex() != resp.GetIndex() || rep.GetHashFormat() != first.GetHashFormat() || !bytes.Equal(rep.GetHash(), first.GetHash()) || len(rep.GetHash()) != 32 {
			c.t.Fatalf("%s: the members' state hashes differ: %v", what, resp.GetReports())
		}
	}
	h := hex.EncodeToString(first.GetHash())
	c.t.Logf("%s: every member's state hash at index %d is %.16s…", what, resp.GetIndex(), h)
	return h
}

// raiseDecisions checks the decisions a raise from `from` to `to` wrote:
// one "cluster version N: …" CONFIG decision by "cluster" for each crossed
// version with raise hooks (fsm.RaisesAt), in version order, all at one
// HLC (one entry), none for other versions. want, if set for a version,
// is the exact detail.
func raiseDecisions(t *testing.T, ds []*api.Decision, from, to uint32, want map[uint32]string) []*api.Decision {
	t.Helper()
	var raises []*api.Decision
	for _, d := range ds {
		if d.GetKind() == api.DecisionKind_DECISION_KIND_CONFIG && d.GetActor() == "cluster" && strings.HasPrefix(d.GetDetail(), "cluster version ") {
			raises = append(raises, d)
		}
	}
	var wantN []uint32
	for v := from + 1; v <= to; v++ {
		if fsm.RaisesAt(v) {
			wantN = append(wantN, v)
		}
	}
	if len(raises) != len(wantN) {
		t.Fatalf("raise decisions %v, want one for each of versions %v", raises, wantN)
	}
	for i, d := range raises {
		prefix := fmt.Sprintf("cluster version %d: ", wantN[i])
		if !strings.HasPrefix(d.GetDetail(), prefix) {
			t.Errorf("raise decision %d: %q, want it to start %q", i, d.GetDetail(), prefix)
		}
		if w, ok := want[wantN[i]]; ok && d.GetDetail() != w {
			t.Errorf("raise decision %q, want %q", d.GetDetail(), w)
		}
		if d.GetAtHlc() != raises[0].GetAtHlc() {
			t.Errorf("raise decisions at HLCs %d and %d: the raise took more than one entry", raises[0].GetAtHlc(), d.GetAtHlc())
		}
	}
	return raises
}

// simRun is one `hotsplitctl sim` process putting load on the cluster.
type simRun struct {
	name string
	cmd  *exec.Cmd
	out  bytes.Buffer
	errb bytes.Buffer
	done chan struct{}
	err  error
}

// startSim runs bin's sim: one simulated data node, a uniform workload over
// the split keys' key space, reporting as <identity>/<runID>-0; flags in
// workload (e.g. --workload hotkey --rate 1500) override those defaults.
func startSim(t *testing.T, name, bin string, env []string, endpoints, runID string, duration time.Duration, workload ...string) *simRun {
	t.Helper()
	s := &simRun{name: name, done: make(chan struct{})}
	args := []string{"--endpoints", endpoints, "-o", "json", "sim", "--workload", "uniform", "--nodes", "1", "--rate", "200",
		"--duration", duration.String(), "--key-space", "100000", "--run-id", runID, "--progress=false"}
	s.cmd = exec.Command(bin, append(args, workload...)...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.Stdout, s.cmd.Stderr = &s.out, &s.errb
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.err = s.cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

type simSummary struct {
	Planned    uint64 `json:"planned_ops"`
	Ops        uint64 `json:"ops"`
	OpsAcked   uint64 `json:"ops_acked"`
	OpsLate    uint64 `json:"ops_late"`
	OpsRefused uint64 `json:"ops_refused"`
	Flushed    bool   `json:"flushed"`
	PerNode    []struct {
		ReporterID string `json:"reporter_id"`
		Columns    struct {
			Closed  uint64 `json:"closed"`
			Acked   uint64 `json:"acked"`
			Late    uint64 `json:"late"`
			Dropped uint64 `json:"dropped"`
			Refused uint64 `json:"refused"`
			Pending int    `json:"pending"`
		} `json:"columns"`
	} `json:"per_node"`
}

// wait waits for the run to end and checks that no column was lost: every
// column its reporter closed was acknowledged (but for an empty last one still
// pending), none dropped or refused, and every operation it served was in a
// column acknowledged as counted in a committed column. A column acknowledged
// late (dropped by the cluster) is allowed only if it held no operation: a
// reporter that starts after another may close an empty first window the
// cluster has already committed.
func (s *simRun) wait(t *testing.T, within time.Duration) simSummary {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(within):
		t.Fatalf("the %s simulator did not end within %v", s.name, within)
	}
	if s.err != nil {
		t.Fatalf("the %s simulator: %v\n%s\n%s", s.name, s.err, s.out.String(), tail(s.errb.Bytes(), 40))
	}
	var sum simSummary
	if err := json.Unmarshal(s.out.Bytes(), &sum); err != nil || len(sum.PerNode) != 1 {
		t.Fatalf("the %s simulator's summary: %v\n%s", s.name, err, s.out.String())
	}
	n := sum.PerNode[0]
	c := n.Columns
	t.Logf("%s reporter %s: %d ops (%d acknowledged as counted, %d late, %d refused), columns closed %d acked %d late %d dropped %d refused %d pending %d",
		s.name, n.ReporterID, sum.Ops, sum.OpsAcked, sum.OpsLate, sum.OpsRefused, c.Closed, c.Acked, c.Late, c.Dropped, c.Refused, c.Pending)
	// A column the reporter closed after its last operation's column may
	// still be pending when the run ends: with every operation counted, it
	// held none.
	if !sum.Flushed || sum.Ops == 0 || sum.Ops != sum.Planned || sum.OpsAcked != sum.Ops || sum.OpsLate+sum.OpsRefused != 0 ||
		c.Closed == 0 || c.Acked+uint64(c.Pending) != c.Closed || c.Pending > 1 || c.Dropped+c.Refused != 0 {
		t.Errorf("the %s reporter %s lost columns: %s", s.name, n.ReporterID, s.out.String())
	}
	return sum
}

// splitWriter is an operator's client splitting routes by hand, each
// split with its own request id, through the whole upgrade. A failed call
// is retried with the same request id (so a split that did apply answers
// its first answer, never applies twice); a failure is allowed only if
// the raft term moved between before the call and after it (a leader
// change).
type splitWriter struct {
	c    *upgradeCluster
	stop chan struct{}
	done chan struct{}

	mu            sync.Mutex
	keys          []string
	versions      map[uint64]string // catalog version a split answered → its key
	duringChange  []string
	beyondChange  []string
	retriedAnswer int
}

func startSplitWriter(c *upgradeCluster) *splitWriter {
	w := &splitWriter{c: c, stop: make(chan struct{}), done: make(chan struct{}), versions: map[uint64]string{}}
	go w.run()
	return w
}

// term is the raft term now, or 0 if no node answers in 20 s.
func (w *splitWriter) term() uint64 {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := w.c.ctx()
		l, err := w.c.cl.Leader(ctx, &api.LeaderRequest{})
		cancel()
		if err == nil && l.GetLeaderId() != "" {
			return l.GetTerm()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0
}

func (w *splitWriter) run() {
	defer close(w.done)
	const maxSplits, maxAttempts = 400, 10
	for i := range maxSplits {
		select {
		case <-w.stop:
			return
		case <-time.After(250 * time.Millisecond):
		}
		key := fmt.Sprintf("w/%04d", i)
		rid := fmt.Sprintf("upgrade-split-%04d", i)
		var route uint64
		for attempt := 1; ; attempt++ {
			before := w.term()
			err := func() error {
				ctx, cancel := w.c.ctx()
				defer cancel()
				if route == 0 {
					r, err := w.c.cl.GetRoute(ctx, &api.GetRouteRequest{Key: []byte(key)})
					if err != nil {
						return err
					}
					route = r.GetRoute().GetRouteId()
				}
				resp, err := w.c.cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: route, SplitKey: []byte(key), RequestId: rid})
				if err != nil {
					return err
				}
				w.mu.Lock()
				defer w.mu.Unlock()
				if prev, dup := w.versions[resp.GetCatalogVersion()]; dup {
					w.beyondChange = append(w.beyondChange, fmt.Sprintf("split %s answered catalog version %d, as split %s did", key, resp.GetCatalogVersion(), prev))
				}
				w.versions[resp.GetCatalogVersion()] = key
				w.keys = append(w.keys, key)
				if attempt > 1 {
					w.retriedAnswer++
				}
				return nil
			}()
			if err == nil {
				break
			}
			after := w.term()
			w.mu.Lock()
			msg := fmt.Sprintf("split %s (request %s) attempt %d, term %d → %d: %v", key, rid, attempt, before, after, err)
			if after > before && before != 0 {
				w.duringChange = append(w.duringChange, msg)
			} else {
				w.beyondChange = append(w.beyondChange, msg)
			}
			w.mu.Unlock()
			if attempt == maxAttempts {
				return
			}
		}
	}
}

// finish stops the writer and checks its record: no failure beyond a
// leader change, every split applied once (each key a route start, the
// catalog grown by one version per split since startVersion).
func (w *splitWriter) finish(t *testing.T) int {
	t.Helper()
	close(w.stop)
	select {
	case <-w.done:
	case <-time.After(5 * time.Minute):
		t.Fatal("the split writer did not stop")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t.Logf("split writer: %d splits, %d failed attempts during a leader change, %d retries that answered", len(w.keys), len(w.duringChange), w.retriedAnswer)
	for _, m := range w.duringChange {
		t.Logf("  allowed (leader change): %s", m)
	}
	for _, m := range w.beyondChange {
		t.Errorf("a client write failed beyond a leader change: %s", m)
	}
	if len(w.keys) == 0 {
		t.Fatal("the split writer split nothing")
	}
	return len(w.keys)
}

// columnWatch follows the committed columns (Status: last_column_at_ms and
// its reporters) until stopped.
type columnWatch struct {
	stop chan struct{}
	done chan struct{}

	mu      sync.Mutex
	columns map[uint64][]string // window end → reporters
	order   []uint64
}

func watchColumns(c *upgradeCluster) *columnWatch {
	w := &columnWatch{stop: make(chan struct{}), done: make(chan struct{}), columns: map[uint64][]string{}}
	go func() {
		defer close(w.done)
		for range 100_000 {
			select {
			case <-w.stop:
				return
			case <-time.After(upgradeStepMs / 4 * time.Millisecond):
			}
			ctx, cancel := c.ctx()
			st, err := c.cl.Status(ctx, &api.StatusRequest{Limit: 1})
			cancel()
			if err != nil || st.GetLastColumnAtMs() == 0 {
				continue
			}
			w.mu.Lock()
			if _, seen := w.columns[st.GetLastColumnAtMs()]; !seen {
				w.columns[st.GetLastColumnAtMs()] = st.GetLastColumnReporters()
				w.order = append(w.order, st.GetLastColumnAtMs())
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// count is how many columns the watch has seen.
func (w *columnWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.order)
}

// waitColumns waits until n more columns have been seen.
func (w *columnWatch) waitColumns(t *testing.T, n int) {
	t.Helper()
	from := w.count()
	testutil.WaitFor(t, time.Duration(n)*upgradeStepMs*time.Millisecond*10+30*time.Second, fmt.Sprintf("%d more committed columns", n), func() bool {
		return w.count() >= from+n
	})
}

// finish stops the watch and returns the columns seen, in order, with
// their reporters.
func (w *columnWatch) finish() ([]uint64, map[uint64][]string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.order, w.columns
}

// tail is the last n lines of b.
func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ctlEnv is the environment of head's hotsplitctl as the admin.
func (c *upgradeCluster) ctlEnv() []string {
	if c.insecure {
		return nil
	}
	return c.certs.adminEnv()
}

func ptr[T any](v T) *T { return &v }

// noMerges fails if the catalog lost a boundary of initial, holds a route a
// merge made, or a decision names a merge.
func noMerges(t *testing.T, c *upgradeCluster, initial *api.ListRoutesResponse, what string) {
	t.Helper()
	now := c.routes()
	starts := map[string]bool{}
	for _, r := range now.GetRoutes() {
		starts[string(r.GetStart())] = true
		if r.GetMergedFromLeft() != 0 || r.GetMergedAtHlc() != 0 {
			t.Errorf("%s: route %d was made by a merge: %v", what, r.GetRouteId(), r)
		}
	}
	for _, r := range initial.GetRoutes() {
		if !starts[string(r.GetStart())] {
			t.Errorf("%s: the boundary %q is gone", what, r.GetStart())
		}
	}
	for _, d := range c.decisions() {
		if strings.Contains(d.GetKind().String(), "MERGE") || strings.Contains(strings.ToLower(d.GetDetail()), "merge") {
			t.Errorf("%s: a merge decision: %v", what, d)
		}
	}
}

// mergeTwo merges the routes starting at left and right with `hotsplitctl
// merge` (compare-and-set on the version just read, retried if the catalog
// moved meanwhile) and checks the merged route.
func mergeTwo(t *testing.T, c *upgradeCluster, hotsplitctl, left, right string) {
	t.Helper()
	var l, r *api.RouteDescriptor
	for attempt := 1; ; attempt++ {
		routes := c.routes()
		version := routes.GetRead().GetCatalogVersion()
		for _, d := range routes.GetRoutes() {
			switch string(d.GetStart()) {
			case left:
				l = d
			case right:
				r = d
			}
		}
		if l == nil || r == nil || string(l.GetEnd()) != right {
			t.Fatalf("no adjacent routes at %q and %q", left, right)
		}
		args := []string{"merge", fmt.Sprint(l.GetRouteId()), fmt.Sprint(r.GetRouteId()),
			"--expected-version", fmt.Sprint(version), "--request-id", fmt.Sprintf("upgrade-merge-%d", attempt)}
		if c.insecure {
			args = append(args, "--insecure")
		}
		_, errOut, code := ctlExit(t, hotsplitctl, c.ctlEnv(), c.endpoints(), "10s", args...)
		if code == 0 {
			break
		}
		if attempt == 5 || !strings.Contains(errOut, "VERSION_MISMATCH") {
			t.Fatalf("hotsplitctl merge %d %d at version %d: exit %d: %s", l.GetRouteId(), r.GetRouteId(), version, code, errOut)
		}
	}
	var m *api.RouteDescriptor
	for _, d := range c.routes().GetRoutes() {
		if string(d.GetStart()) == left {
			m = d
		}
	}
	if m == nil || string(m.GetEnd()) != string(r.GetEnd()) || m.GetMergedFromLeft() != l.GetRouteId() || m.GetMergedFromRight() != r.GetRouteId() || m.GetMergedAtHlc() == 0 {
		t.Fatalf("after merging %d and %d: %v", l.GetRouteId(), r.GetRouteId(), m)
	}
	t.Logf("merged routes %d [%s, %s) and %d into %d", l.GetRouteId(), left, right, r.GetRouteId(), m.GetRouteId())
}

// refuseNewerDataDir stops a follower, starts oldD on its data dir (which
// has run at version), and wants a non-zero exit whose last line names the
// version; then starts head there again.
func refuseNewerDataDir(t *testing.T, c *upgradeCluster, oldD, head string, version uint32) {
	t.Helper()
	lead, _ := c.leader()
	var p *proc
	for _, q := range c.procs {
		if q.id != lead {
			p = q
			break
		}
	}
	p.stop()
	// The old binary gets the flags it was started with: version 1 has no
	// --insecure (nor TLS).
	argv := slices.DeleteFunc(p.argv(), func(a string) bool { return c.insecure && a == "--insecure" })
	cmd := exec.Command(oldD, argv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var err error
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-exited
		t.Fatalf("the old binary kept running on a data dir that has run at cluster version %d:\n%s", version, out.String())
	}
	// The refusal is the old binary's last line. An old release's raft may
	// log its listener's close on the way out before it (version 1 does,
	// now and then): raft's lines are allowed before it, nothing else.
	var exit *exec.ExitError
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	text := lines[len(lines)-1]
	for _, l := range lines[:len(lines)-1] {
		if !strings.Contains(l, "raft: ") {
			t.Errorf("the old binary wrote %q before its refusal", l)
		}
	}
	if !errors.As(err, &exit) || exit.ExitCode() == 0 || !strings.Contains(text, fmt.Sprintf("cluster version %d", version)) {
		t.Fatalf("the old binary on a data dir that has run at cluster version %d: %v, said %q; want a non-zero exit and a last line naming the version", version, err, out.String())
	}
	t.Logf("the old binary refused %s's data dir: %s", p.id, text)
	p.cmd = nil
	p.start(t, head)
	c.waitReady(p)
	c.waitHealthy()
}

// autoMergeAfterIsolation is the upgraded cluster's automatic round trip:
// a head simulator drives one hot key until the detector isolates it (two
// automatic boundaries, not pinned), then a cold load follows and the
// cluster merges the isolation away by itself, back to the boundaries it
// had, every one an operator placed still there and still pinned. The
// boundaries an upgrade from version 2 pins cannot merge, so an automatic
// merge after an upgrade needs an automatic split first. The cold load
// may run on after the merges; the caller waits for it to end.
func autoMergeAfterIsolation(t *testing.T, c *upgradeCluster, hotsplitctl string, env []string) (cold *simRun) {
	t.Helper()
	// Rates over the simulator's weights (writes 4, reads 1, half each):
	// the hot key scores about 3.4 × this threshold, a fifth of the key
	// space (one initial route) under the uniform loads about 0.2 ×, below
	// the default cold fraction (a quarter).
	const hotRate, threshold = 1500, 60_000
	ctx, cancel := c.ctx()
	_, err := c.cl.SetConfig(ctx, &api.SetConfigRequest{Actor: "upgrade-test", Patch: &api.ConfigPatch{
		Threshold: ptr(uint64(threshold)), CandidateWindows: ptr(uint32(2)), CooldownMs: ptr(uint64(2 * upgradeStepMs)),
		MergeWindows: ptr(uint32(3)), MergeDelayMs: ptr(uint64(0))}})
	if err == nil { // the switch governs merges as it does splits
		_, err = c.cl.SetEnabled(ctx, &api.SetEnabledRequest{Enabled: true, Actor: "upgrade-test", Reason: "automatic round trip", RequestId: "upgrade-enable"})
	}
	cancel()
	if err != nil {
		t.Fatalf("the automatic round trip's config: %v", err)
	}
	mergesApplied := func() int {
		n := 0
		for _, d := range c.decisions() {
			if d.GetKind() == api.DecisionKind_DECISION_KIND_MERGE_APPLIED {
				n++
			}
		}
		return n
	}
	appliedBefore := mergesApplied()
	before := c.routes().GetRoutes()
	pinned := map[string]bool{}
	for _, r := range before {
		if r.GetOperatorStart() {
			pinned[string(r.GetStart())] = true
		}
	}
	if len(pinned) < strings.Count(upgradeSplitKeys, ",")+1 {
		t.Fatalf("%d pinned boundaries after the upgrade, want at least the %d initial ones: %v", len(pinned), strings.Count(upgradeSplitKeys, ",")+1, before)
	}

	// The isolation takes two hot columns and the two-step op's commit.
	hot := startSim(t, "hot key", hotsplitctl, env, c.endpoints(), "hot", 10*upgradeStepMs*time.Millisecond, "--workload", "hotkey", "--rate", fmt.Sprint(hotRate))
	var isolated *api.RouteDescriptor
	testutil.WaitFor(t, 60*time.Second, "the detector to isolate the hot key", func() bool {
		for _, r := range c.routes().GetRoutes() {
			if e := r.GetEnd(); len(e) == len(r.GetStart())+1 && e[len(e)-1] == 0 && bytes.HasPrefix(e, r.GetStart()) {
				isolated = r
				return true
			}
		}
		return false
	})
	if isolated.GetOperatorStart() {
		t.Fatalf("the isolated route %v is pinned: an automatic split's boundary", isolated)
	}
	t.Logf("the hot key %q isolated in route %d", isolated.GetStart(), isolated.GetRouteId())
	hot.wait(t, 2*time.Minute)

	// Two merges of three cold columns each, with room for a loaded machine.
	cold = startSim(t, "cold", hotsplitctl, env, c.endpoints(), "cold", 20*upgradeStepMs*time.Millisecond)
	testutil.Eventually(t, 90*time.Second, "the isolation merged away", func() error {
		now := c.routes().GetRoutes()
		if len(now) != len(before) {
			return fmt.Errorf("%d routes, %d before the hot key", len(now), len(before))
		}
		for i, r := range now {
			if !bytes.Equal(r.GetStart(), before[i].GetStart()) || r.GetOperatorStart() != pinned[string(r.GetStart())] {
				return fmt.Errorf("route %d starts at %q (pinned %v), before at %q", r.GetRouteId(), r.GetStart(), r.GetOperatorStart(), before[i].GetStart())
			}
		}
		return nil
	})
	if applied := mergesApplied() - appliedBefore; applied < 2 {
		t.Errorf("%d MERGE_APPLIED decisions, want one per automatic boundary (2 or more)", applied)
	}
	return cold
}
