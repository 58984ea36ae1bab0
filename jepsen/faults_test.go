//go:build jepsen

package jepsen

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/jepsen/cluster"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// Process tests of single faults (docs/design.md#limits-and-bad-input and
// docs/design.md#trust-and-integrity): a storage fault on one node ends that
// process with one ERROR line naming the file and the cause and a non-zero
// exit, never a Go panic, while the other nodes keep committing; a node whose
// clock is off never leads. The byte flip, the truncated raft.db, a full disk
// on the leader and the clock refusal run in CI; the rest of the matrix runs
// with -long.

// faultCluster starts a three-node cluster for one test, under the suite's
// directory; its artifacts stay there if the test fails.
func faultCluster(t *testing.T, extra ...string) *cluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("process fault test")
	}
	dir := filepath.Join(suiteEnv.Base, t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Config{Binary: suiteEnv.Binary, Dir: dir, Nodes: 3, Args: append(slices.Clone(baseArgs), extra...)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			suiteMu.Lock()
			suiteFailed = true
			suiteMu.Unlock()
			t.Logf("artifacts: %s", dir)
			return
		}
		os.RemoveAll(dir)
	})
	waitVoters(t, c, 3)
	return c
}

// waitVoters waits until the cluster has n voters: a node joins as a
// non-voter and a fault before its promotion would leave no quorum.
func waitVoters(t *testing.T, c *cluster.Cluster, n int) {
	t.Helper()
	cl := clientOf(t, c, c.Nodes...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := cl.Members(ctx, &api.MembersRequest{})
		cancel()
		voters := 0
		for _, m := range resp.GetMembers() {
			if m.GetSuffrage() == "voter" {
				voters++
			}
		}
		if err == nil && voters == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d voters after 30 s (%v), want %d", voters, err, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func longOnly(t *testing.T) {
	if !*longFlag {
		t.Skip("long suite only (-long)")
	}
}

func clientOf(t *testing.T, c *cluster.Cluster, nodes ...*cluster.Node) *client.Client {
	t.Helper()
	var eps []string
	for _, n := range nodes {
		eps = append(eps, n.GRPCAddr)
	}
	admin, err := c.ClientTLS("jepsen-faults", "admin")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(client.Config{Endpoints: eps, Actor: "jepsen-faults", RequestTimeout: 5 * time.Second, TLS: admin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// split splits the route holding key at key.
func split(ctx context.Context, cl *client.Client, key string) error {
	r, err := cl.GetRoute(ctx, &api.GetRouteRequest{Key: []byte(key)})
	if err != nil {
		return err
	}
	_, err = cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r.GetRoute().GetRouteId(), SplitKey: []byte(key), RequestId: client.NewRequestID()})
	return err
}

func splits(t *testing.T, cl *client.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := split(ctx, cl, fmt.Sprintf("%s%04d", prefix, i))
		cancel()
		if err != nil {
			t.Fatalf("split %d: %v", i, err)
		}
	}
}

func (c *faultRig) others(x *cluster.Node) []*cluster.Node {
	var out []*cluster.Node
	for _, n := range c.Nodes {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

type faultRig struct{ *cluster.Cluster }

// aFollower stops nothing: it returns a running follower.
func (c *faultRig) aFollower(t *testing.T) *cluster.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if n != leader && n.ID != "n1" {
			return n
		}
	}
	return c.others(leader)[0]
}

// waitExit waits for n's process to end and returns its exit status.
func waitExit(t *testing.T, n *cluster.Node, d time.Duration) int {
	t.Helper()
	select {
	case <-n.Exited():
	case <-time.After(d):
		t.Fatalf("%s kept running for %v", n.ID, d)
	}
	exits := n.Exits()
	return exits[len(exits)-1].Status
}

// lastRun is the output of n's latest start.
func lastRun(t *testing.T, n *cluster.Node) string {
	t.Helper()
	b, err := os.ReadFile(n.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if i := strings.LastIndex(s, "=== jepsen: start #"); i >= 0 {
		s = s[i:]
		s = s[strings.IndexByte(s, '\n')+1:]
	}
	return s
}

// assertFailStop: n's latest run exited non-zero (not by a signal), and
// its output ends with one ERROR line — the only one — holding every want,
// with no Go panic or stack trace anywhere.
func assertFailStop(t *testing.T, n *cluster.Node, status int, wants ...string) string {
	t.Helper()
	out := lastRun(t, n)
	if status <= 0 {
		t.Fatalf("%s exited with status %d, want a non-zero exit of its own\n%s", n.ID, status, tail(out))
	}
	for _, bad := range []string{"panic:", "goroutine "} {
		if strings.Contains(out, bad) {
			t.Fatalf("%s's output holds %q:\n%s", n.ID, bad, tail(out))
		}
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "level=ERROR") {
		t.Fatalf("%s's last line is not an ERROR line: %q", n.ID, last)
	}
	for _, w := range wants {
		if !strings.Contains(last, w) {
			t.Fatalf("%s's last line %q does not name %q", n.ID, last, w)
		}
	}
	if c := strings.Count(out, "level=ERROR"); c != 1 {
		t.Fatalf("%s wrote %d ERROR lines, want one:\n%s", n.ID, c, tail(out))
	}
	return last
}

func tail(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-15):], "\n")
}

// keepCommitting: a split through the nodes other than victim commits.
func (c *faultRig) keepCommitting(t *testing.T, victim *cluster.Node, key string) {
	t.Helper()
	cl := clientOf(t, c.Cluster, c.others(victim)...)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := split(ctx, cl, key); err != nil {
		t.Fatalf("the others did not commit after %s stopped: %v", victim.ID, err)
	}
}

// stopFollowerWithEntries commits splits, stops a follower gracefully and
// returns it with the decoded log it left.
func (c *faultRig) stopFollowerWithEntries(t *testing.T, n int) (*cluster.Node, []raftlog.Entry) {
	t.Helper()
	splits(t, clientOf(t, c.Cluster, c.Nodes...), "k", n)
	f := c.aFollower(t)
	if err := f.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	entries, err := raftlog.Read(filepath.Join(f.DataDir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	return f, entries
}

func firstSplitEntry(t *testing.T, entries []raftlog.Entry) raftlog.Entry {
	t.Helper()
	for _, e := range entries {
		if e.Command.GetSplitRange() != nil {
			return e
		}
	}
	t.Fatal("no SplitRange entry in the log")
	return raftlog.Entry{}
}

// restartExpectingStop starts f again and returns its exit status.
func restartExpectingStop(t *testing.T, f *cluster.Node) int {
	t.Helper()
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	return waitExit(t, f, 30*time.Second)
}

func TestIntegrationFaultByteFlipInEntry(t *testing.T) {
	c := &faultRig{faultCluster(t)}
	f, entries := c.stopFollowerWithEntries(t, 20)
	e := firstSplitEntry(t, entries)
	if _, err := flipDataByte(filepath.Join(f.DataDir, "raft.db"), e.Index, e.Data); err != nil {
		t.Fatal(err)
	}
	status := restartExpectingStop(t, f)
	line := assertFailStop(t, f, status, "raft.db", fmt.Sprintf("entry %d", e.Index), "checksum mismatch")
	t.Logf("%s: %s", f.ID, line)
	c.keepCommitting(t, f, "z1")
}

func TestIntegrationFaultTruncatedLog(t *testing.T) {
	c := &faultRig{faultCluster(t)}
	f, _ := c.stopFollowerWithEntries(t, 20)
	db := filepath.Join(f.DataDir, "raft.db")
	st, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(db, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	status := restartExpectingStop(t, f)
	t.Logf("%s: %s", f.ID, assertFailStop(t, f, status, db, "corrupt storage"))
	c.keepCommitting(t, f, "z1")
}

func TestIntegrationFaultRandomBytesInLog(t *testing.T) {
	longOnly(t)
	c := &faultRig{faultCluster(t)}
	f, entries := c.stopFollowerWithEntries(t, 20)
	e := firstSplitEntry(t, entries)
	db := filepath.Join(f.DataDir, "raft.db")
	if _, err := overwriteAround(db, e.Index, uint64(time.Now().UnixNano())); err != nil {
		t.Fatal(err)
	}
	status := restartExpectingStop(t, f)
	t.Logf("%s: %s", f.ID, assertFailStop(t, f, status, db, "corrupt storage"))
	c.keepCommitting(t, f, "z1")
}

// snapshotArgs make every node snapshot often and keep a short log tail,
// so that the log no longer reaches back past the older snapshots.
var snapshotArgs = []string{"--raftSnapshotThreshold", "40", "--raftSnapshotInterval", "100ms", "--raftTrailingLogs", "10"}

// snapshotsOf lists n's snapshot directories, oldest first.
func snapshotsOf(t *testing.T, n *cluster.Node) []string {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(n.DataDir, "snapshots"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range dirs {
		if d.IsDir() && !strings.HasSuffix(d.Name(), ".tmp") {
			out = append(out, filepath.Join(n.DataDir, "snapshots", d.Name()))
		}
	}
	// ids are term-index-millis: order by the numbers, not the text
	num := func(path string, field int) uint64 {
		var v uint64
		fmt.Sscan(strings.Split(filepath.Base(path), "-")[field], &v)
		return v
	}
	slices.SortFunc(out, func(a, b string) int {
		if c := cmp.Compare(num(a, 0), num(b, 0)); c != 0 {
			return c
		}
		return cmp.Compare(num(a, 1), num(b, 1))
	})
	return out
}

// stopFollowerWithSnapshots commits until a follower holds three
// snapshots, then stops it.
func (c *faultRig) stopFollowerWithSnapshots(t *testing.T) (*cluster.Node, []string) {
	t.Helper()
	cl := clientOf(t, c.Cluster, c.Nodes...)
	f := c.aFollower(t)
	for i := 0; len(snapshotsOf(t, f)) < 3; i++ {
		if i >= 600 {
			t.Fatalf("%s holds %d snapshots after 600 splits", f.ID, len(snapshotsOf(t, f)))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := split(ctx, cl, fmt.Sprintf("s%04d", i))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	return f, snapshotsOf(t, f)
}

func flipFileByte(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x01
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestIntegrationFaultCorruptNewestSnapshotOlderLacksLogs(t *testing.T) {
	longOnly(t)
	c := &faultRig{faultCluster(t, snapshotArgs...)}
	f, snaps := c.stopFollowerWithSnapshots(t)
	flipFileByte(t, filepath.Join(snaps[len(snaps)-1], "state.bin"))
	status := restartExpectingStop(t, f)
	t.Logf("%s: %s", f.ID, assertFailStop(t, f, status, "snapshot and log leave a gap", filepath.Base(snaps[len(snaps)-2])))
	c.keepCommitting(t, f, "z1")
}

func TestIntegrationFaultAllSnapshotsCorrupt(t *testing.T) {
	longOnly(t)
	c := &faultRig{faultCluster(t, snapshotArgs...)}
	f, snaps := c.stopFollowerWithSnapshots(t)
	for _, s := range snaps {
		flipFileByte(t, filepath.Join(s, "state.bin"))
	}
	status := restartExpectingStop(t, f)
	t.Logf("%s: %s", f.ID, assertFailStop(t, f, status, "no snapshot passes its CRC check", filepath.Base(snaps[0])))
	c.keepCommitting(t, f, "z1")
}

func TestIntegrationFaultSnapshotsDeleted(t *testing.T) {
	longOnly(t)
	c := &faultRig{faultCluster(t, snapshotArgs...)}
	f, snaps := c.stopFollowerWithSnapshots(t)
	for _, s := range snaps {
		if err := os.RemoveAll(s); err != nil {
			t.Fatal(err)
		}
	}
	status := restartExpectingStop(t, f)
	t.Logf("%s: %s", f.ID, assertFailStop(t, f, status, "snapshot and log leave a gap", "no snapshot"))
	c.keepCommitting(t, f, "z1")
}

// acker commits splits back to back and remembers every acknowledged key.
type acker struct {
	mu    sync.Mutex
	acked []string
	at    []time.Time
}

func (a *acker) run(ctx context.Context, cl *client.Client, prefix string) {
	for i := 0; i < 5000 && ctx.Err() == nil; i++ {
		key := fmt.Sprintf("%s%05d", prefix, i)
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := split(cctx, cl, key)
		cancel()
		if err == nil {
			a.mu.Lock()
			a.acked, a.at = append(a.acked, key), append(a.at, time.Now())
			a.mu.Unlock()
		}
	}
}

// firstAckAfter is when the first split acknowledged after t was.
func (a *acker) firstAckAfter(t time.Time) (time.Time, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, at := range a.at {
		if at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}

// diskFull fills victim's disk (the seam) while splits are committed
// back to back; it returns the victim's exit line, the time from arming to
// its exit and from its exit to the next acknowledged split.
func (c *faultRig) diskFull(t *testing.T, victim *cluster.Node) (string, time.Duration, time.Duration) {
	t.Helper()
	cl := clientOf(t, c.Cluster, c.Nodes...)
	var a acker
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); a.run(ctx, cl, "d") }()
	defer func() { stop(); <-done }()
	time.Sleep(500 * time.Millisecond) // splits in flight when the disk fills
	armed := time.Now()
	actx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	err := victim.SetDiskFullAfter(actx, 0)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	status := waitExit(t, victim, 10*time.Second)
	exited := time.Now()
	line := assertFailStop(t, victim, status, "raft.db", "no space left on device")
	var next time.Time
	deadline := time.Now().Add(20 * time.Second)
	for {
		at, ok := a.firstAckAfter(exited)
		if ok {
			next = at
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no split committed within 20 s after %s stopped", victim.ID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	<-done
	// No acknowledged split is lost.
	rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	routes, err := clientOf(t, c.Cluster, c.others(victim)...).ListAllRoutes(rctx, api.Consistency_CONSISTENCY_LINEARIZABLE)
	if err != nil {
		t.Fatal(err)
	}
	starts := map[string]bool{}
	for _, r := range routes.GetRoutes() {
		starts[string(r.GetStart())] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range a.acked {
		if !starts[k] {
			t.Fatalf("acknowledged split at %q is lost", k)
		}
	}
	t.Logf("%d splits acknowledged; %s: %s", len(a.acked), victim.ID, line)
	return line, exited.Sub(armed), next.Sub(exited)
}

// heartbeatTimeout is the jepsen cluster's --raftHeartbeatTimeout.
const heartbeatTimeout = 300 * time.Millisecond

func TestIntegrationFaultDiskFullOnLeader(t *testing.T) {
	c := &faultRig{faultCluster(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	leader, err := c.WaitLeader(ctx)
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	_, toExit, toCommit := c.diskFull(t, leader)
	t.Logf("leader %s exited %v after its disk filled; the next split committed %v later", leader.ID, toExit.Round(time.Millisecond), toCommit.Round(time.Millisecond))
	if toExit > time.Second {
		t.Errorf("the leader took %v to stop, want at most 1 s", toExit)
	}
	if bound := 2*heartbeatTimeout + time.Second; toCommit > bound {
		t.Errorf("a new leader committed %v after the old one stopped, want at most %v", toCommit, bound)
	}
}

func TestIntegrationFaultDiskFullOnFollower(t *testing.T) {
	longOnly(t)
	c := &faultRig{faultCluster(t)}
	f := c.aFollower(t)
	c.diskFull(t, f)
	c.keepCommitting(t, f, "z1")
}

// TestIntegrationFaultDiskFullTmpfs: the leader's data dir is a real 640 KiB
// tmpfs that fills up (needs mount privileges; skipped without them).
func TestIntegrationFaultDiskFullTmpfs(t *testing.T) {
	longOnly(t)
	dir := filepath.Join(suiteEnv.Base, t.Name(), "n1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := mountTmpfs(dir, "640k"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	t.Cleanup(func() { unmount(dir) })
	c := &faultRig{faultCluster(t)}
	n1 := c.Node("n1")
	cl := clientOf(t, c.Cluster, c.Nodes...)
	var a acker
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	go a.run(ctx, cl, "f")
	status := waitExit(t, n1, 3*time.Minute)
	cancel()
	t.Logf("n1: %s", assertFailStop(t, n1, status, "no space left on device"))
	c.keepCommitting(t, n1, "z1")
}

func mountTmpfs(dir, size string) ([]byte, error) {
	return exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
}

func unmount(dir string) { exec.Command("umount", dir).Run() }

// overwriteAround writes 64 pseudo-random bytes over entry index's stored
// value, starting 16 bytes before it (the page's element header side).
func overwriteAround(dbPath string, index uint64, seed uint64) (int, error) {
	return damageEntry(dbPath, index, func(file []byte, at int, _ []byte) {
		x := seed | 1
		for k := max(0, at-16); k < min(len(file), at+48); k++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			file[k] = byte(x)
		}
	})
}
