package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

// buildBinaries builds hotsplitd and hotsplitctl (without -race) once per
// test binary into a temp dir.
var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func binaries(t *testing.T) (hotsplitd, hotsplitctl string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "hotsplit-bin-")
		if buildErr != nil {
			return
		}
		for _, pkg := range []string{"hotsplitd", "hotsplitctl"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, pkg), "../"+pkg)
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "hotsplitd"), filepath.Join(binDir, "hotsplitctl")
}

// givenPorts holds every address freePort handed out in this test binary:
// the kernel may give a just-closed port again, and two nodes of one
// cluster must not be told the same one.
var givenPorts sync.Map

// freePort returns a loopback address free a moment ago and never returned
// before in this binary.
func freePort(t *testing.T) string {
	t.Helper()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, dup := givenPorts.LoadOrStore(addr, true); !dup {
			return addr
		}
	}
	t.Fatal("100 loopback ports in a row were ones handed out before")
	return ""
}

// proc is one hotsplitd process with a fixed identity and data dir.
type proc struct {
	id, dataDir, raft, grpc, http string
	args                          []string
	cmd                           *exec.Cmd
	logPath                       string
	exited                        chan error
}

func (p *proc) start(t *testing.T, bin string) {
	t.Helper()
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin, p.argv()...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.exited = make(chan error, 1)
	go func() { p.exited <- p.cmd.Wait(); logf.Close() }()
}

// stopOnCleanup stops procs when the test ends and, if it failed, logs
// each one's log.
func stopOnCleanup(t *testing.T, procs ...*proc) {
	t.Cleanup(func() {
		for _, p := range procs {
			p.stop()
		}
		if t.Failed() {
			for _, p := range procs {
				b, _ := os.ReadFile(p.logPath)
				t.Logf("--- %s log ---\n%s", p.id, b)
			}
		}
	})
}

// startSecureNode starts one bootstrapping node n1 under mutual TLS in dir,
// with extra flags, and waits until `cluster health` answers; env is the
// admin's hotsplitctl environment.
func startSecureNode(t *testing.T, hotsplitd, hotsplitctl, dir string, extra ...string) (n1 *proc, env []string) {
	t.Helper()
	certs := makeCerts(t, hotsplitctl, filepath.Join(dir, "certs"), "n1")
	env = certs.adminEnv()
	n1 = &proc{id: "n1", dataDir: filepath.Join(dir, "n1"), raft: freePort(t), grpc: freePort(t), http: freePort(t),
		logPath: filepath.Join(dir, "n1.log"), args: append(append(certs.nodeArgs("n1"), "--bootstrap"), extra...)}
	stopOnCleanup(t, n1)
	n1.start(t, hotsplitd)
	testutil.Eventually(t, 30*time.Second, "the node healthy", func() error {
		_, err := ctl(t, hotsplitctl, env, n1.grpc, "cluster", "health")
		return err
	})
	return n1, env
}

// argv is the command line p runs with (after the binary).
func (p *proc) argv() []string {
	return append([]string{"--id", p.id, "--dataDir", p.dataDir, "--raftAddr", p.raft, "--grpcAddr", p.grpc, "--httpAddr", p.http,
		"--raftHeartbeatTimeout", "200ms", "--raftElectionTimeout", "200ms", "--raftLeaderLeaseTimeout", "100ms"}, p.args...)
}

func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not die", p.id)
	}
}

func (p *proc) stop() {
	if p.cmd == nil || p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// certDir holds a test cluster's certificates, made with the hotsplitctl
// binary as an operator would (README): ca.crt, node-<id>.crt/.key and
// client-admin.crt/.key.
type certDir string

func makeCerts(t *testing.T, hotsplitctl, dir string, ids ...string) certDir {
	t.Helper()
	cmds := [][]string{{"create-ca"}, {"create-client", "admin", "--role", "admin"}}
	for _, id := range ids {
		cmds = append(cmds, []string{"create-node", id, "--ip", "127.0.0.1"})
	}
	for _, c := range cmds {
		out, err := exec.Command(hotsplitctl, append(append([]string{"certs"}, c...), "--dir", dir)...).CombinedOutput()
		if err != nil {
			t.Fatalf("hotsplitctl certs %s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return certDir(dir)
}

// nodeArgs are the TLS flags of node id.
func (d certDir) nodeArgs(id string) []string {
	f := func(n string) string { return filepath.Join(string(d), n) }
	return []string{"--tlsCert", f("node-" + id + ".crt"), "--tlsKey", f("node-" + id + ".key"), "--tlsCA", f("ca.crt")}
}

// adminEnv is the environment of an admin's hotsplitctl.
func (d certDir) adminEnv() []string {
	f := func(n string) string { return filepath.Join(string(d), n) }
	return []string{"HOTSPLIT_CACERT=" + f("ca.crt"), "HOTSPLIT_CERT=" + f("client-admin.crt"), "HOTSPLIT_KEY=" + f("client-admin.key")}
}

// ctl runs hotsplitctl against endpoints with env added to its
// environment and returns stdout.
func ctl(t *testing.T, bin string, env []string, endpoints string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--endpoints", endpoints, "--timeout", "3s"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("hotsplitctl %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return out.String(), nil
}

// admit runs `hotsplitctl cluster add` for p through endpoint, as the
// admin does before a new node starts (a node joins with its own
// certificate only once admitted).
func admit(t *testing.T, hotsplitctl string, env []string, endpoint string, p *proc) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, "admitted "+p.id, func() error {
		_, err := ctl(t, hotsplitctl, env, endpoint, "cluster", "add", p.id, "--raft-addr", p.raft)
		return err
	})
}

type jsonRoutes struct {
	Routes []struct {
		RouteID string `json:"route_id"`
		Start   string `json:"start"`
		End     string `json:"end"`
	} `json:"routes"`
	Read struct {
		CatalogVersion string `json:"catalog_version"`
	} `json:"read"`
}

func TestIntegrationProcessCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs hotsplitd processes")
	}
	hotsplitd, hotsplitctl := binaries(t)
	dir := t.TempDir()
	procs := map[string]*proc{}
	var ids []string
	for i := 1; i <= 3; i++ {
		id := fmt.Sprintf("n%d", i)
		ids = append(ids, id)
		procs[id] = &proc{id: id, dataDir: filepath.Join(dir, id), raft: freePort(t), grpc: freePort(t), http: freePort(t), logPath: filepath.Join(dir, id+".log")}
	}
	certs := makeCerts(t, hotsplitctl, filepath.Join(dir, "certs"), ids...)
	env := certs.adminEnv()
	procs["n1"].args = append(certs.nodeArgs("n1"), "--bootstrap")
	procs["n2"].args = append(certs.nodeArgs("n2"), "--join", procs["n1"].grpc)
	procs["n3"].args = append(certs.nodeArgs("n3"), "--join", procs["n1"].grpc)
	for _, id := range ids {
		stopOnCleanup(t, procs[id])
	}
	procs["n1"].start(t, hotsplitd)
	for _, id := range ids[1:] {
		admit(t, hotsplitctl, env, procs["n1"].grpc, procs[id])
		procs[id].start(t, hotsplitd)
	}
	all := strings.Join([]string{procs["n1"].grpc, procs["n2"].grpc, procs["n3"].grpc}, ",")

	testutil.Eventually(t, 30*time.Second, "three voters", func() error {
		out, err := ctl(t, hotsplitctl, env, all, "cluster", "members", "-o", "json")
		if err != nil {
			return err
		}
		if c := strings.Count(out, `"voter"`); c != 3 {
			return fmt.Errorf("%d voters in %s", c, out)
		}
		return nil
	})
	leader := func() string {
		out, err := ctl(t, hotsplitctl, env, all, "cluster", "leader", "-o", "json")
		if err != nil {
			return ""
		}
		var l struct {
			LeaderID string `json:"leader_id"`
		}
		json.Unmarshal([]byte(out), &l)
		return l.LeaderID
	}
	var lead string
	testutil.Eventually(t, 10*time.Second, "a leader", func() error {
		if lead = leader(); lead == "" {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	var follower string
	for _, id := range ids {
		if id != lead {
			follower = id
			break
		}
	}
	splitVia := func(endpoint, key string) error {
		out, err := ctl(t, hotsplitctl, env, endpoint, "routes", "get", key, "-o", "json")
		if err != nil {
			return err
		}
		var r struct {
			Route struct {
				RouteID string `json:"route_id"`
				Start   []byte `json:"start"` // protojson: base64
			} `json:"route"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Route.RouteID == "" {
			return fmt.Errorf("routes get %s: %v: %s", key, err, out)
		}
		if string(r.Route.Start) == key {
			return nil // an earlier attempt committed although its answer was an error
		}
		_, err = ctl(t, hotsplitctl, env, endpoint, "split", r.Route.RouteID, key)
		return err
	}
	if err := splitVia(procs[follower].grpc, "m"); err != nil {
		t.Fatalf("split via follower %s: %v", follower, err)
	}

	procs[lead].kill9(t)
	killed := time.Now()
	var survivor string
	for _, id := range ids {
		if id != lead {
			survivor = id
		}
	}
	testutil.Eventually(t, 5*time.Second, "a split through another endpoint", func() error { return splitVia(procs[survivor].grpc, "t") })
	t.Logf("split through %s succeeded %v after kill -9 of leader %s", survivor, time.Since(killed).Round(time.Millisecond), lead)

	procs[lead].start(t, hotsplitd)
	testutil.Eventually(t, 20*time.Second, "the same catalog on every node", func() error {
		var first string
		for _, id := range ids {
			out, err := ctl(t, hotsplitctl, env, procs[id].grpc, "routes", "list", "--consistency", "stale", "-o", "json")
			if err != nil {
				return err
			}
			var r jsonRoutes
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				return fmt.Errorf("%s: %v: %s", id, err, out)
			}
			if r.Read.CatalogVersion != "3" || len(r.Routes) != 3 {
				return fmt.Errorf("%s at version %s with %d routes", id, r.Read.CatalogVersion, len(r.Routes))
			}
			b, _ := json.Marshal(r.Routes)
			if first == "" {
				first = string(b)
			} else if string(b) != first {
				return fmt.Errorf("%s routes %s differ from %s", id, b, first)
			}
		}
		return nil
	})

	// hotsplitctl cluster check: one hash per node at one common index.
	var check string
	testutil.Eventually(t, 20*time.Second, "a state check every member answers", func() error {
		out, err := ctl(t, hotsplitctl, env, all, "cluster", "check")
		check = out
		if err == nil && strings.Count(out, " agrees ") != 3 {
			return fmt.Errorf("not every member agrees:\n%s", out)
		}
		return err
	})
	rows := strings.Split(strings.TrimSpace(check), "\n")
	if len(rows) != 5 { // header, three nodes, verdict
		t.Fatalf("cluster check printed:\n%s", check)
	}
	var index, hash string
	for _, row := range rows[1:4] {
		f := strings.Fields(row)
		if index == "" {
			index, hash = f[1], f[2]
		}
		if f[1] != index || f[2] != hash || len(hash) != 64 {
			t.Fatalf("cluster check rows differ in index or hash:\n%s", check)
		}
	}
	t.Logf("cluster check:\n%s", check)
}
