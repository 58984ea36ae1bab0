// Package cluster runs real hotsplitd processes for the jepsen suite: it
// builds the binary with the jepsen build tag (never with -race), starts 3
// or 5 nodes on 127.0.0.1 with their own data dirs and log files, and
// stops, kills (SIGKILL), pauses (SIGSTOP), resumes (SIGCONT) and restarts
// them by pid. It also speaks the jepsen HTTP seam of each node (/jepsen/*)
// to cut links, shift clocks, set failpoints and negative controls, and
// read a node's state.
//
// Every cluster runs mutual TLS as production does: Start makes a CA and
// the node certificates under Dir/certs (package pki), the HTTP seam is
// spoken over https with an admin client certificate, and ClientTLS gives
// workloads certificates of the same CA.
//
// It decides nothing about faults or workloads (the scenarios do) and it
// never touches an address outside 127.0.0.0/8.
package cluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/pki"
)

// Build compiles hotsplitd from the module at moduleRoot with the jepsen
// tag into dir and returns the binary's path.
func Build(ctx context.Context, moduleRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "hotsplitd-jepsen")
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "jepsen", "-o", bin, "./cmd/hotsplitd")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -tags jepsen ./cmd/hotsplitd: %w\n%s", err, out)
	}
	return bin, nil
}

// Config describes a cluster.
type Config struct {
	Binary string
	// Dir holds every node's data dir (<id>/) and process log (<id>.log).
	Dir   string
	Nodes int
	// Args go to every node (raft timings, snapshot thresholds, detector
	// flags); BootstrapArgs to the first node only.
	Args, BootstrapArgs []string
	// Env is added to every node's environment (e.g. GOMAXPROCS).
	Env []string
}

// Cluster is a set of hotsplitd processes.
type Cluster struct {
	cfg   Config
	Nodes []*Node
	http  *http.Client
	ca    *pki.CA
}

// Node is one hotsplitd process with a fixed identity, addresses and data
// dir across restarts.
type Node struct {
	ID                           string
	RaftAddr, GRPCAddr, HTTPAddr string
	DataDir, LogPath             string
	args                         []string
	env                          []string
	bin                          string
	http                         *http.Client

	mu      sync.Mutex // guards the fields below
	cmd     *exec.Cmd
	exited  chan struct{}
	exit    *os.ProcessState
	paused  bool
	starts  int
	history []Exit
}

// Exit records how one run of a process ended.
type Exit struct {
	Start  int
	Status int // exit status, or -signal
}

// Start allocates loopback ports, starts node 1 with --bootstrap and the
// others with --join, and waits (bounded by ctx) until every node is
// ready: it knows a leader and holds the bootstrapped catalog.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if cfg.Nodes < 1 {
		return nil, errors.New("cluster: Nodes must be at least 1")
	}
	ca, err := pki.NewCA("jepsen", 0)
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, ca: ca}
	admin, err := c.ClientTLS("jepsen-admin", "admin")
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: admin}}
	c.http = hc
	certs := filepath.Join(cfg.Dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return nil, err
	}
	caFile := filepath.Join(certs, "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o644); err != nil {
		return nil, err
	}
	ports, err := freePorts(3 * cfg.Nodes)
	if err != nil {
		return nil, err
	}
	for i := range cfg.Nodes {
		id := fmt.Sprintf("n%d", i+1)
		n := &Node{ID: id, RaftAddr: ports[3*i], GRPCAddr: ports[3*i+1], HTTPAddr: ports[3*i+2],
			DataDir: filepath.Join(cfg.Dir, id), LogPath: filepath.Join(cfg.Dir, id+".log"), bin: cfg.Binary, env: cfg.Env, http: hc}
		crt, key, err := c.nodeCert(id)
		if err != nil {
			return nil, err
		}
		n.args = append([]string{"--id", id, "--dataDir", n.DataDir, "--raftAddr", n.RaftAddr, "--grpcAddr", n.GRPCAddr, "--httpAddr", n.HTTPAddr,
			"--tlsCert", crt, "--tlsKey", key, "--tlsCA", caFile}, cfg.Args...)
		if i == 0 {
			n.args = append(n.args, "--bootstrap")
			n.args = append(n.args, cfg.BootstrapArgs...)
		} else {
			n.args = append(n.args, "--join", ports[1])
		}
		c.Nodes = append(c.Nodes, n)
	}
	if err := c.Nodes[0].Start(); err != nil {
		return nil, err
	}
	if err := c.Nodes[0].WaitReady(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("bootstrap node: %w", err)
	}
	if err := c.admitAll(ctx, admin); err != nil {
		c.Close()
		return nil, err
	}
	for _, n := range c.Nodes[1:] {
		if err := n.Start(); err != nil {
			c.Close()
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		if err := n.WaitReady(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// admitAll admits every node but the first, as an admin does before a new
// node starts (`hotsplitctl cluster add`): a node joins with its own
// certificate only once admitted.
func (c *Cluster) admitAll(ctx context.Context, admin *tls.Config) error {
	for _, n := range c.Nodes[1:] {
		if err := c.admit(ctx, admin, []string{c.Nodes[0].GRPCAddr}, n.ID, n.RaftAddr); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) admit(ctx context.Context, admin *tls.Config, endpoints []string, id, raftAddr string) error {
	cl, err := client.New(client.Config{Endpoints: endpoints, TLS: admin})
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, err := cl.Admit(ctx, &api.AdmitRequest{NodeId: id, RaftAddr: raftAddr}); err != nil {
		return fmt.Errorf("admit %s: %w", id, err)
	}
	return nil
}

// nodeCert writes a node certificate for id into the cluster's certificate
// directory and returns its files.
func (c *Cluster) nodeCert(id string) (crt, key string, err error) {
	p, err := c.ca.NewNode(id, pki.NodeOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(c.cfg.Dir, "certs")
	crt, key = filepath.Join(dir, id+".crt"), filepath.Join(dir, id+".key")
	return crt, key, p.Write(crt, key, true)
}

// freePorts returns n distinct loopback addresses that were free a moment
// ago.
func freePorts(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	out := make([]string, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("allocate a loopback port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().String())
	}
	return out, nil
}

// ClientTLS is a client TLS config with a fresh certificate of the
// cluster's CA: CN = name, one O per role.
func (c *Cluster) ClientTLS(name string, roles ...string) (*tls.Config, error) {
	p, err := c.ca.NewClient(name, roles, 0)
	if err != nil {
		return nil, err
	}
	return p.ClientTLS(c.ca.Pool())
}

// Endpoints are the gRPC addresses of all nodes.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.GRPCAddr
	}
	return out
}

// Node returns the node with the given id, or nil.
func (c *Cluster) Node(id string) *Node {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// Close stops every process: resume if paused, SIGTERM, SIGKILL after 10 s.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); n.Stop(10 * time.Second) }()
	}
	wg.Wait()
}

// Start starts the process (again). Its output is appended to LogPath.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.exit == nil {
		return fmt.Errorf("node %s is already running (pid %d)", n.ID, n.cmd.Process.Pid)
	}
	if err := os.MkdirAll(filepath.Dir(n.LogPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	n.starts++
	fmt.Fprintf(logf, "=== jepsen: start #%d of %s at %s: %s %s\n", n.starts, n.ID, time.Now().Format(time.RFC3339Nano), n.bin, strings.Join(n.args, " "))
	cmd := exec.Command(n.bin, n.args...)
	cmd.Env = append(os.Environ(), n.env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, so a terminal's signals do not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start %s: %w", n.ID, err)
	}
	exited := make(chan struct{})
	n.cmd, n.exited, n.exit, n.paused = cmd, exited, nil, false
	start := n.starts
	go func() {
		cmd.Wait()
		logf.Close()
		n.mu.Lock()
		n.exit = cmd.ProcessState
		n.history = append(n.history, Exit{Start: start, Status: exitStatus(cmd.ProcessState)})
		n.mu.Unlock()
		close(exited)
	}()
	return nil
}

func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return -int(ws.Signal())
	}
	return ps.ExitCode()
}

// Pid is the running process's pid, 0 if not running.
func (n *Node) Pid() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.exit != nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the process is alive (paused counts as alive).
func (n *Node) Running() bool { return n.Pid() != 0 }

// Paused reports whether the process is stopped with SIGSTOP.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused && n.exit == nil
}

// Exits lists how earlier runs of the process ended.
func (n *Node) Exits() []Exit {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]Exit(nil), n.history...)
}

// Exited is closed when the current process has exited.
func (n *Node) Exited() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.exited
}

func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.exit != nil {
		return fmt.Errorf("node %s is not running", n.ID)
	}
	if err := n.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("signal %v to %s (pid %d): %w", sig, n.ID, n.cmd.Process.Pid, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return nil
}

// Kill sends SIGKILL and waits for the process to go.
func (n *Node) Kill() error {
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	return n.wait(10 * time.Second)
}

// Stop resumes a paused process, sends SIGTERM (a graceful stop) and
// waits; after timeout it sends SIGKILL. A process that is not running is
// left alone.
func (n *Node) Stop(timeout time.Duration) error {
	if !n.Running() {
		return nil
	}
	n.signal(syscall.SIGCONT)
	if err := n.signal(syscall.SIGTERM); err != nil {
		return nil // it exited meanwhile
	}
	if err := n.wait(timeout); err == nil {
		return nil
	}
	n.signal(syscall.SIGKILL)
	return n.wait(10 * time.Second)
}

// Pause sends SIGSTOP; Resume sends SIGCONT.
func (n *Node) Pause() error  { return n.signal(syscall.SIGSTOP) }
func (n *Node) Resume() error { return n.signal(syscall.SIGCONT) }

func (n *Node) wait(timeout time.Duration) error {
	ch := n.Exited()
	if ch == nil {
		return nil
	}
	select {
	case <-ch:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("node %s did not exit within %v", n.ID, timeout)
	}
}

// WaitServing polls /healthz until the process answers (it may not know a
// leader yet), or ctx ends.
func (n *Node) WaitServing(ctx context.Context) error {
	return n.poll(ctx, "/healthz")
}

// WaitReady polls /readyz until it answers 200 or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	return n.poll(ctx, "/readyz")
}

func (n *Node) poll(ctx context.Context, path string) error {
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.HTTPAddr+path, nil)
		resp, err := n.http.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("%s %d: %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
		}
		last = err
		if !n.Running() {
			return fmt.Errorf("node %s exited while starting (see %s): %v", n.ID, n.LogPath, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s %s: %v (%w)", n.ID, path, last, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// State is GET /jepsen/state.
type State struct {
	NodeID         string `json:"node_id"`
	RaftState      string `json:"raft_state"`
	AppliedIndex   uint64 `json:"applied_index"`
	Hash           string `json:"hash"`
	CatalogVersion uint64 `json:"catalog_version"`
	Ready          bool   `json:"ready"`
	LastIndex      uint64 `json:"last_index"`
	Term           uint64 `json:"term"`
	// BusinessHash is the state's hash without the fence and the
	// request-id table, which move on their own.
	BusinessHash string `json:"business_hash"`
	CeilingMs    uint64 `json:"ceiling_ms"`
	// HLCSkewMs is HLC − wall as the node knows it, against its own
	// (shifted) clock.
	HLCSkewMs uint64 `json:"hlc_skew_ms"`
	// ClockOff: the node's clock is off from a majority (it refuses to lead).
	ClockOff bool `json:"clock_off"`
}

// State reads the node's state over its jepsen seam.
func (n *Node) State(ctx context.Context) (State, error) {
	var st State
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.HTTPAddr+"/jepsen/state", nil)
	if err != nil {
		return st, err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return st, fmt.Errorf("node %s state: %w", n.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("node %s state: HTTP %d", n.ID, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("node %s state: %w", n.ID, err)
	}
	return st, nil
}

// Metrics reads the node's /metrics (Prometheus text) over the seam's
// https client.
func (n *Node) Metrics(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+n.HTTPAddr+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := n.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("node %s metrics: %w", n.ID, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("node %s metrics: HTTP %d", n.ID, resp.StatusCode)
	}
	return string(b), err
}

func (n *Node) post(ctx context.Context, path string, body any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+n.HTTPAddr+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.http.Do(req)
	if err != nil {
		return fmt.Errorf("node %s %s: %w", n.ID, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("node %s %s: HTTP %d: %s", n.ID, path, resp.StatusCode, strings.TrimSpace(string(msg)))
	}
	return nil
}

// SetNet replaces the node's link rules: dials to the cut addresses fail
// and open connections to them close; delays add latency per write.
func (n *Node) SetNet(ctx context.Context, cut []string, delayMs map[string]int64) error {
	if cut == nil {
		cut = []string{}
	}
	return n.post(ctx, "/jepsen/net", map[string]any{"cut": cut, "delay_ms": delayMs})
}

// SetClock shifts the node's HLC physical source by offsetMs.
func (n *Node) SetClock(ctx context.Context, offsetMs int64) error {
	return n.post(ctx, "/jepsen/clock", map[string]any{"offset_ms": offsetMs})
}

// SetDiskFullAfter makes the node's log and snapshot writes fail with
// ENOSPC once it has written bytes more (negative: a disk with room again).
func (n *Node) SetDiskFullAfter(ctx context.Context, bytes int64) error {
	return n.post(ctx, "/jepsen/disk", map[string]any{"full_after_bytes": bytes})
}

// CorruptState makes the node's next applied entry corrupt its in-memory
// state (a silent divergence the cross-replica state check must catch).
func (n *Node) CorruptState(ctx context.Context) error {
	return n.post(ctx, "/jepsen/corrupt", map[string]any{})
}

// Rename gives node n a new id, an empty data dir and a node certificate
// for the new id, admitted through the given gRPC addresses, which it joins
// at its next Start: a node whose data was lost comes back under a new id
// (docs/design.md#interfaces). It must not be running.
func (c *Cluster) Rename(ctx context.Context, n *Node, id string, join []string) error {
	if n.Running() {
		return fmt.Errorf("node %s is running", n.ID)
	}
	if err := os.RemoveAll(n.DataDir); err != nil {
		return err
	}
	crt, key, err := c.nodeCert(id)
	if err != nil {
		return err
	}
	admin, err := c.ClientTLS("jepsen-admin", "admin")
	if err != nil {
		return err
	}
	if err := c.admit(ctx, admin, join, id, n.RaftAddr); err != nil {
		return err
	}
	args := []string{"--id", id}
	for i := 0; i < len(n.args); i++ {
		switch n.args[i] {
		case "--id", "--join":
			i++
		case "--tlsCert":
			i++
			args = append(args, "--tlsCert", crt)
		case "--tlsKey":
			i++
			args = append(args, "--tlsKey", key)
		case "--bootstrap":
		default:
			args = append(args, n.args[i])
		}
	}
	n.mu.Lock()
	n.ID, n.args = id, append(args, "--join", strings.Join(join, ","))
	n.mu.Unlock()
	return nil
}

// Failpoint is a condition on which the node exits at once (status 137).
type Failpoint struct {
	Name       string `json:"name"` // "after-op-step", "after-command", "" (clear)
	Step       uint32 `json:"step,omitempty"`
	Command    string `json:"command,omitempty"`
	LeaderOnly bool   `json:"leader_only,omitempty"`
}

// SetFailpoint arms (or, with an empty name, clears) the node's failpoint.
func (n *Node) SetFailpoint(ctx context.Context, fp Failpoint) error {
	return n.post(ctx, "/jepsen/failpoint", fp)
}

// Controls are the negative controls: deliberate bugs compiled only into
// jepsen builds, all off by default. The suite turns one on to prove the
// checker catches it.
type Controls struct {
	// FollowerLocalReads: followers answer linearizable reads from their
	// own state instead of forwarding them to the leader.
	FollowerLocalReads bool `json:"follower_local_reads"`
	// SkipReadIndex: the leader answers linearizable reads without the
	// read-index round (no leadership check, no wait for the commit index).
	SkipReadIndex bool `json:"skip_read_index"`
	// SkipCAS: the FSM ignores a manual split's expected_version.
	SkipCAS bool `json:"skip_cas"`
	// SkipMergeCAS: the FSM ignores a manual merge's expected_version.
	SkipMergeCAS bool `json:"skip_merge_cas"`
	// SkipCeilingObserve: a new leader does not observe the old leader's
	// fence ceiling, only the last committed HLC.
	SkipCeilingObserve bool `json:"skip_ceiling_observe"`
}

// SetControls sets the node's negative controls.
func (n *Node) SetControls(ctx context.Context, c Controls) error {
	return n.post(ctx, "/jepsen/control", c)
}

// Leader returns the one running, unpaused node that reports itself
// leader, or an error when there is none or more than one.
func (c *Cluster) Leader(ctx context.Context) (*Node, error) {
	var leaders []*Node
	for _, n := range c.Nodes {
		if !n.Running() || n.Paused() {
			continue
		}
		st, err := n.State(ctx)
		if err == nil && st.RaftState == "Leader" && st.Ready {
			leaders = append(leaders, n)
		}
	}
	switch len(leaders) {
	case 1:
		return leaders[0], nil
	case 0:
		return nil, errors.New("no ready leader")
	}
	ids := make([]string, len(leaders))
	for i, n := range leaders {
		ids[i] = n.ID
	}
	return nil, fmt.Errorf("several nodes say they lead: %v", ids)
}

// WaitLeader polls Leader until it finds one or ctx ends.
func (c *Cluster) WaitLeader(ctx context.Context) (*Node, error) {
	for {
		n, err := c.Leader(ctx)
		if err == nil {
			return n, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for a leader: %v (%w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Partition cuts every link between nodes of different groups, raft and
// gRPC alike, in both directions (each side is told about the other).
// Nodes in no group keep their links to everyone. Not-running or paused
// nodes are skipped; Heal clears every rule.
func (c *Cluster) Partition(ctx context.Context, groups ...[]*Node) error {
	group := map[string]int{}
	for i, g := range groups {
		for _, n := range g {
			group[n.ID] = i + 1
		}
	}
	var errs []error
	for _, n := range c.Nodes {
		if group[n.ID] == 0 || !n.Running() || n.Paused() {
			continue
		}
		var cut []string
		for _, m := range c.Nodes {
			if g := group[m.ID]; g != 0 && g != group[n.ID] {
				cut = append(cut, m.RaftAddr, m.GRPCAddr)
			}
		}
		errs = append(errs, n.SetNet(ctx, cut, nil))
	}
	return errors.Join(errs...)
}

// Heal clears the link rules of every running, unpaused node.
func (c *Cluster) Heal(ctx context.Context) error {
	var errs []error
	for _, n := range c.Nodes {
		if n.Running() && !n.Paused() {
			errs = append(errs, n.SetNet(ctx, nil, nil))
		}
	}
	return errors.Join(errs...)
}
