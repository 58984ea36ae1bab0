package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

// ctlExit runs hotsplitctl with a timeout and returns its output and exit
// code (ctl fails on any non-zero exit; health has exit codes of its own).
func ctlExit(t *testing.T, bin string, env []string, endpoints, timeout string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--endpoints", endpoints, "--timeout", timeout}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("hotsplitctl %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

// promtoolPath is promtool, required when HOTSPLIT_REQUIRE_PROMTOOL is set
// (CI), else optional.
func promtoolPath(t *testing.T) string {
	p, err := exec.LookPath("promtool")
	if err != nil && os.Getenv("HOTSPLIT_REQUIRE_PROMTOOL") != "" {
		t.Fatalf("promtool not found: %v", err)
	}
	return p
}

// TestIntegrationProcessOperations is the operator's day on real
// processes: versions and completion; promtool on a live /metrics; a
// backup; a read right after kill -9 of the leader; cluster health seeing
// a SIGKILLed voter within 2 s (exit 4) and a lost quorum (exit 5);
// --inspect and --forceNewCluster on the survivor, which serves the last
// committed catalog; --restoreSnapshot seeding a new cluster with the
// backup's catalog under a new id.
func TestIntegrationProcessOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs hotsplitd processes")
	}
	hotsplitd, hotsplitctl := binaries(t)
	for _, args := range [][]string{{hotsplitd, "--version"}, {hotsplitd, "--help"}, {hotsplitctl, "--version"}, {hotsplitctl, "completion", "bash"}, {hotsplitctl, "completion", "zsh"}, {hotsplitctl, "completion", "fish"}} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil || len(out) == 0 {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}

	dir := t.TempDir()
	procs := map[string]*proc{}
	ids := []string{"n1", "n2", "n3"}
	certs := makeCerts(t, hotsplitctl, filepath.Join(dir, "certs"), "n1", "n2", "n3", "r1")
	env := certs.adminEnv()
	for _, id := range ids {
		procs[id] = &proc{id: id, dataDir: filepath.Join(dir, id), raft: freePort(t), grpc: freePort(t), http: freePort(t), logPath: filepath.Join(dir, id+".log"),
			args: append(certs.nodeArgs(id), "--metricsInsecure")}
	}
	procs["n1"].args = append(procs["n1"].args, "--bootstrap")
	procs["n2"].args = append(procs["n2"].args, "--join", procs["n1"].grpc)
	procs["n3"].args = append(procs["n3"].args, "--join", procs["n1"].grpc)
	var extra []*proc
	t.Cleanup(func() {
		for _, p := range append([]*proc{procs["n1"], procs["n2"], procs["n3"]}, extra...) {
			p.stop()
		}
		if t.Failed() {
			for _, p := range append([]*proc{procs["n1"], procs["n2"], procs["n3"]}, extra...) {
				b, _ := os.ReadFile(p.logPath)
				t.Logf("--- %s log ---\n%s", p.id, b)
			}
		}
	})
	procs["n1"].start(t, hotsplitd)
	for _, id := range ids[1:] {
		admit(t, hotsplitctl, env, procs["n1"].grpc, procs[id])
		procs[id].start(t, hotsplitd)
	}
	all := procs["n1"].grpc + "," + procs["n2"].grpc + "," + procs["n3"].grpc
	testutil.Eventually(t, 30*time.Second, "a healthy cluster of three voters", func() error {
		out, errOut, code := ctlExit(t, hotsplitctl, env, all, "3s", "cluster", "health")
		if code != 0 || strings.Count(out, " voter ") != 3 {
			return fmt.Errorf("exit %d: %s%s", code, out, errOut)
		}
		return nil
	})
	if out, _, code := ctlExit(t, hotsplitctl, env, all, "3s", "version"); code != 0 || !strings.Contains(out, "client  hotsplitctl") || !strings.Contains(out, "server  hotsplitd") {
		t.Fatalf("version: exit %d\n%s", code, out)
	}

	// promtool on a live node's /metrics.
	if promtool := promtoolPath(t); promtool != "" {
		resp, err := certs.adminHTTP(t).Get("https://" + procs["n1"].http + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cmd := exec.Command(promtool, "check", "metrics")
		cmd.Stdin = bytes.NewReader(body)
		out, _ := cmd.CombinedOutput()
		if strings.TrimSpace(string(out)) != "" {
			t.Errorf("promtool check metrics:\n%s", out)
		}
	}

	// A backup of a catalog with one split.
	if _, err := ctl(t, hotsplitctl, env, all, "split", "1", "m"); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(dir, "backup.hsnap")
	out, err := ctl(t, hotsplitctl, env, all, "snapshot", "save", backup)
	if err != nil || !regexp.MustCompile(`index \d+, term \d+, cluster [0-9a-f]+ .*catalog version 2`).MatchString(out) || !strings.Contains(out, "state hash ") {
		t.Fatalf("snapshot save: %v\n%s", err, out)
	}
	backupRoutes := routesJSON(t, hotsplitctl, env, all)
	oldCluster := regexp.MustCompile(`cluster ([0-9a-f]+)`).FindStringSubmatch(out)[1]

	// A read right after kill -9 of the leader succeeds within --timeout.
	lead := leaderOf(t, hotsplitctl, env, all)
	procs[lead].kill9(t)
	killed := time.Now()
	if _, errOut, code := ctlExit(t, hotsplitctl, env, all, "10s", "routes", "list"); code != 0 {
		t.Fatalf("read right after kill -9 of the leader: exit %d: %s", code, errOut)
	}
	t.Logf("read after kill -9 of leader %s answered in %v", lead, time.Since(killed).Round(time.Millisecond))
	// The killed leader reads as last seen as leader, not as leader.
	var others []string
	for _, id := range ids {
		if id != lead {
			others = append(others, procs[id].grpc)
		}
	}
	testutil.Eventually(t, 10*time.Second, "the killed leader last seen as leader", func() error {
		out, _, _ := ctlExit(t, hotsplitctl, env, strings.Join(others, ","), "2s", "cluster", "health")
		if !regexp.MustCompile(`(?m)^` + lead + `\s+voter\s+(\*\s+)?last seen as leader\s+no\s.*last seen as leader \(term \d+\), unreachable`).MatchString(out) {
			return fmt.Errorf("health:\n%s", out)
		}
		return nil
	})
	procs[lead].start(t, hotsplitd)
	testutil.Eventually(t, 20*time.Second, "healthy again", func() error {
		if _, errOut, code := ctlExit(t, hotsplitctl, env, all, "3s", "cluster", "health"); code != 0 {
			return fmt.Errorf("exit %d %s", code, errOut)
		}
		return nil
	})

	// A SIGKILLed voter is unreachable in cluster health within 2 s: exit 4.
	lead = leaderOf(t, hotsplitctl, env, all)
	var victim, survivor string
	for _, id := range ids {
		switch {
		case id == lead:
		case victim == "":
			victim = id
		default:
			survivor = id
		}
	}
	procs[victim].kill9(t)
	killed = time.Now()
	testutil.Eventually(t, 2*time.Second, victim+" unreachable in cluster health", func() error {
		out, _, code := ctlExit(t, hotsplitctl, env, procs[lead].grpc, "1s", "cluster", "health")
		if code != exitDegraded || !regexp.MustCompile(`(?m)^`+victim+`\s+voter\s+.*\sno\s`).MatchString(out) {
			return fmt.Errorf("exit %d:\n%s", code, out)
		}
		return nil
	})
	t.Logf("%s unreachable in cluster health %v after kill -9", victim, time.Since(killed).Round(time.Millisecond))
	out, _, _ = ctlExit(t, hotsplitctl, env, all, "3s", "cluster", "members")
	if !regexp.MustCompile(`(?m)^` + victim + `\s.*\sno\s`).MatchString(out) {
		t.Fatalf("cluster members does not show %s unreachable:\n%s", victim, out)
	}

	// Quorum lost: the survivor says so, exit 5.
	procs[lead].kill9(t)
	testutil.Eventually(t, 5*time.Second, "no quorum", func() error {
		out, _, code := ctlExit(t, hotsplitctl, env, procs[survivor].grpc, "1s", "cluster", "health")
		if code != exitNoQuorum || !strings.Contains(out, "no quorum") {
			return fmt.Errorf("exit %d:\n%s", code, out)
		}
		return nil
	})

	// Recovery: inspect the data dirs, force a new cluster on the survivor.
	procs[survivor].stop()
	for _, id := range ids {
		out, err := exec.Command(hotsplitd, "--inspect", procs[id].dataDir).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "last index") {
			t.Fatalf("--inspect %s: %v\n%s", id, err, out)
		}
	}
	procs[survivor].args = append(certs.nodeArgs(survivor), "--metricsInsecure", "--forceNewCluster")
	procs[survivor].start(t, hotsplitd)
	testutil.Eventually(t, 20*time.Second, "the survivor healthy alone", func() error {
		out, errOut, code := ctlExit(t, hotsplitctl, env, procs[survivor].grpc, "3s", "cluster", "health")
		if code != 0 || strings.Count(out, " voter ") != 1 {
			return fmt.Errorf("exit %d: %s%s", code, out, errOut)
		}
		return nil
	})
	if got := routesJSON(t, hotsplitctl, env, procs[survivor].grpc); got != backupRoutes {
		t.Fatalf("the recovered survivor serves %s, want the last committed catalog %s", got, backupRoutes)
	}

	// Restore the backup into a fresh cluster.
	r1 := &proc{id: "r1", dataDir: filepath.Join(dir, "r1"), raft: freePort(t), grpc: freePort(t), http: freePort(t), logPath: filepath.Join(dir, "r1.log"),
		args: append(certs.nodeArgs("r1"), "--restoreSnapshot", backup)}
	extra = append(extra, r1)
	r1.start(t, hotsplitd)
	testutil.Eventually(t, 20*time.Second, "the restored cluster serving", func() error {
		_, errOut, code := ctlExit(t, hotsplitctl, env, r1.grpc, "3s", "cluster", "health")
		if code != 0 {
			return fmt.Errorf("exit %d: %s", code, errOut)
		}
		return nil
	})
	if got := routesJSON(t, hotsplitctl, env, r1.grpc); got != backupRoutes {
		t.Fatalf("restored catalog %s, want the backup's %s", got, backupRoutes)
	}
	members, _ := ctl(t, hotsplitctl, env, r1.grpc, "cluster", "members", "-o", "json")
	var m struct {
		ClusterID string `json:"cluster_id"`
	}
	json.Unmarshal([]byte(members), &m)
	if m.ClusterID == "" || m.ClusterID == oldCluster {
		t.Fatalf("restored cluster id %q, want a new one (the backup's was %s)", m.ClusterID, oldCluster)
	}
}

// Exit codes of cluster health (hotsplitctl's exitDegraded, exitNoQuorum).
const (
	exitDegraded = 4
	exitNoQuorum = 5
)

func leaderOf(t *testing.T, hotsplitctl string, env []string, endpoints string) string {
	t.Helper()
	var id string
	testutil.Eventually(t, 10*time.Second, "a leader", func() error {
		out, err := ctl(t, hotsplitctl, env, endpoints, "cluster", "leader", "-o", "json")
		if err != nil {
			return err
		}
		var l struct {
			LeaderID string `json:"leader_id"`
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil || l.LeaderID == "" {
			return fmt.Errorf("no leader: %s", out)
		}
		id = l.LeaderID
		return nil
	})
	return id
}

// routesJSON is the catalog's routes as JSON, for comparing catalogs.
func routesJSON(t *testing.T, hotsplitctl string, env []string, endpoints string) string {
	t.Helper()
	out, err := ctl(t, hotsplitctl, env, endpoints, "routes", "list", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r jsonRoutes
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	b, _ := json.Marshal(r.Routes)
	return string(b)
}
