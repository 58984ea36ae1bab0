package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

// TestIntegrationProcessRecoveryIsOneShot is the runbook's quorum-loss
// recovery on real processes over mutual TLS, then the two ways it went
// wrong: a restart of the recovered node with --forceNewCluster still set
// is refused in one line naming the flag while the rest of the cluster
// keeps serving; and a member deliberately forked into a new cluster (its
// recovery mark deleted) can neither make the others exit through its
// removal verdict nor reach them over raft: they ignore it, say so, and
// keep a quorum of two.
func TestIntegrationProcessRecoveryIsOneShot(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs hotsplitd processes")
	}
	hotsplitd, hotsplitctl := binaries(t)
	dir := t.TempDir()
	ids := []string{"n1", "n2", "n3"}
	certs := makeCerts(t, hotsplitctl, filepath.Join(dir, "certs"), ids...)
	env := certs.adminEnv()
	procs := map[string]*proc{}
	for _, id := range ids {
		procs[id] = &proc{id: id, dataDir: filepath.Join(dir, id), raft: freePort(t), grpc: freePort(t), http: freePort(t),
			logPath: filepath.Join(dir, id+".log"), args: certs.nodeArgs(id)}
	}
	for _, id := range ids {
		stopOnCleanup(t, procs[id])
	}
	with := func(id string, extra ...string) { procs[id].args = append(certs.nodeArgs(id), extra...) }
	all := procs["n1"].grpc + "," + procs["n2"].grpc + "," + procs["n3"].grpc
	healthy := func(endpoints string, voters int) {
		t.Helper()
		testutil.Eventually(t, 40*time.Second, fmt.Sprintf("a healthy cluster of %d voters at %s", voters, endpoints), func() error {
			out, errOut, code := ctlExit(t, hotsplitctl, env, endpoints, "3s", "cluster", "health")
			if code != 0 || strings.Count(out, " voter ") != voters {
				return fmt.Errorf("exit %d: %s%s", code, out, errOut)
			}
			return nil
		})
	}

	with("n1", "--bootstrap")
	procs["n1"].start(t, hotsplitd)
	for _, id := range ids[1:] {
		admit(t, hotsplitctl, env, procs["n1"].grpc, procs[id])
		with(id, "--join", procs["n1"].grpc)
		procs[id].start(t, hotsplitd)
	}
	healthy(all, 3)
	if _, err := ctl(t, hotsplitctl, env, all, "split", "1", "m"); err != nil {
		t.Fatal(err)
	}

	// Quorum loss; the runbook's recovery on n3 and the rejoin of the
	// others with fresh data dirs.
	procs["n1"].kill9(t)
	procs["n2"].kill9(t)
	procs["n3"].stop()
	with("n3", "--forceNewCluster")
	procs["n3"].start(t, hotsplitd)
	healthy(procs["n3"].grpc, 1)
	for _, id := range []string{"n1", "n2"} {
		if err := os.RemoveAll(procs[id].dataDir); err != nil {
			t.Fatal(err)
		}
		admit(t, hotsplitctl, env, procs["n3"].grpc, procs[id])
		with(id, "--join", procs["n3"].grpc)
		procs[id].start(t, hotsplitd)
	}
	healthy(all, 3)
	cluster := clusterIDOf(t, hotsplitctl, env, all)

	// The recovered node restarted with its flags unchanged: refused in
	// one line naming the flag; the other two keep serving writes.
	procs["n3"].stop()
	refusedLog := filepath.Join(dir, "n3-refused.log")
	again := *procs["n3"]
	again.logPath = refusedLog
	again.start(t, hotsplitd)
	select {
	case <-again.exited:
	case <-time.After(20 * time.Second):
		again.stop()
		t.Fatal("a restart with --forceNewCluster still set kept running")
	}
	if code := again.cmd.ProcessState.ExitCode(); code != 1 {
		t.Fatalf("refused start exited %d, want 1", code)
	}
	b, _ := os.ReadFile(refusedLog)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "drop --forceNewCluster") || !strings.Contains(lines[0], "level=ERROR") {
		t.Fatalf("refused start said %d lines, want one ERROR line naming the flag to drop:\n%s", len(lines), b)
	}
	t.Logf("refused: %s", lines[0])
	survivors := procs["n1"].grpc + "," + procs["n2"].grpc
	if _, err := ctlExitOK(t, hotsplitctl, env, survivors, "split", "2", "g"); err != nil {
		t.Fatalf("the cluster stopped serving writes while n3 was refused: %v", err)
	}
	with("n3")
	procs["n3"].start(t, hotsplitd)
	healthy(all, 3)
	if got := clusterIDOf(t, hotsplitctl, env, all); got != cluster {
		t.Fatalf("after the refused restart the cluster is %s, want %s still", got, cluster)
	}

	// A deliberate second recovery of n3 (its mark deleted) forks it
	// into a new cluster that leads alone while n1 and n2 still list it.
	// Neither exits: they ignore its answers and its raft connections,
	// and keep a quorum of two.
	procs["n3"].stop()
	if err := os.Remove(filepath.Join(procs["n3"].dataDir, "recovered")); err != nil {
		t.Fatal(err)
	}
	with("n3", "--forceNewCluster")
	procs["n3"].start(t, hotsplitd)
	healthy(procs["n3"].grpc, 1)
	fork := clusterIDOf(t, hotsplitctl, env, procs["n3"].grpc)
	if fork == cluster {
		t.Fatalf("the second recovery kept cluster id %s", fork)
	}
	for _, id := range []string{"n1", "n2"} {
		testutil.Eventually(t, 20*time.Second, id+" saying it ignores n3's other cluster", func() error {
			b, _ := os.ReadFile(procs[id].logPath)
			if !regexp.MustCompile(`member answers for another cluster.*peer_id=n3 peer_cluster_id=` + fork).Match(b) {
				return fmt.Errorf("no such line in %s's log yet", id)
			}
			return nil
		})
	}
	lead := leaderOf(t, hotsplitctl, env, survivors)
	testutil.Eventually(t, 20*time.Second, "the raft connection between "+lead+" and the fork refused", func() error {
		b, _ := os.ReadFile(procs[lead].logPath)
		if !regexp.MustCompile(`raft connection with a node of another cluster closed.*peer_id=n3`).Match(b) {
			return fmt.Errorf("no such line in %s's log yet", lead)
		}
		return nil
	})
	if _, err := ctlExitOK(t, hotsplitctl, env, survivors, "split", "3", "t"); err != nil {
		t.Fatalf("the cluster stopped serving writes beside the fork: %v", err)
	}
	out, _, code := ctlExit(t, hotsplitctl, env, survivors, "3s", "cluster", "health")
	if code != exitDegraded || !strings.Contains(out, "another cluster ("+fork+")") {
		t.Fatalf("health beside the fork: exit %d, want %d naming the fork's cluster:\n%s", code, exitDegraded, out)
	}
	for _, id := range []string{"n1", "n2"} {
		select {
		case err := <-procs[id].exited:
			t.Fatalf("%s exited beside the fork: %v", id, err)
		default:
		}
		if b, _ := os.ReadFile(procs[id].logPath); strings.Contains(string(b), "removed from cluster") {
			t.Fatalf("%s took the fork's verdict:\n%s", id, b)
		}
	}
}

// clusterIDOf is the cluster id the members report.
func clusterIDOf(t *testing.T, hotsplitctl string, env []string, endpoints string) string {
	t.Helper()
	out, err := ctl(t, hotsplitctl, env, endpoints, "cluster", "members", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`"cluster_id":\s*"([0-9a-f]+)"`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no cluster id in %s", out)
	}
	return m[1]
}

// ctlExitOK runs a mutation with a timeout long enough for an election.
func ctlExitOK(t *testing.T, hotsplitctl string, env []string, endpoints string, args ...string) (string, error) {
	t.Helper()
	out, errOut, code := ctlExit(t, hotsplitctl, env, endpoints, "15s", args...)
	if code != 0 {
		return out, fmt.Errorf("hotsplitctl %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out, nil
}
