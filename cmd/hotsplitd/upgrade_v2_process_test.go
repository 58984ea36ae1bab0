package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// mixedColdColumns is how many columns a mixed version 2 / head cluster
// runs with cold adjacent routes and must plan nothing: more than the
// merge windows a version 3 cluster waits by default before merging (10).
const mixedColdColumns = 12

// TestIntegrationRollingUpgradeFromVersion2 upgrades a TLS cluster of the
// version 2 release to head, one node at a time, under the load of a
// version 2 reporter (the release's `hotsplitctl sim`) and a head one, and
// an operator splitting routes by hand throughout:
//   - no lost column: every column the old reporter closed was counted in
//     a committed column, and it stays in the committed columns' reporters
//     from its first column to its last, after the raise too;
//   - no failed client write beyond a leader change, and no split applied
//     twice (each retried with its request id);
//   - a mixed cluster (two head nodes, one version 2) keeps version 2 with
//     cold adjacent routes for longer than a version 3 cluster waits to
//     merge them: no merge, every member's state hash equal;
//   - the cluster version rises to the head's by itself when the last
//     node is replaced (the SetMember of the last old member), with each
//     crossed version's raise hooks' decision;
//   - a manual merge works (`hotsplitctl merge`), and an automatic one
//     undoes an automatic isolation of a hot key, never an operator's
//     boundary;
//   - the version 2 binary refuses the data dir that has run at 3, in one
//     line, with a non-zero exit.
func TestIntegrationRollingUpgradeFromVersion2(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds two releases and runs hotsplitd processes")
	}
	began := time.Now()
	hotsplitd, hotsplitctl := binaries(t)
	oldD, oldCtl := baselineBinaries(t, clusterversion.Version2)
	built := time.Now()

	c := startUpgradeCluster(t, oldD, hotsplitctl, false, "oldsim", "newsim", "hotsim")
	c.waitHealthy()
	if v := c.clusterVersion(); v != clusterversion.Version2 {
		t.Fatalf("the version 2 release bootstrapped cluster version %d", v)
	}
	ctx, cancel := c.ctx()
	_, err := c.cl.SetConfig(ctx, &api.SetConfigRequest{Actor: "upgrade-test", Patch: &api.ConfigPatch{GraceMs: ptr(uint64(upgradeStepMs))}})
	cancel()
	if err != nil {
		t.Fatalf("grace of a whole step: %v", err)
	}

	f := func(n string) string { return filepath.Join(string(c.certs), n) }
	simEnv := func(name string) []string {
		return []string{"HOTSPLIT_CACERT=" + f("ca.crt"), "HOTSPLIT_CERT=" + f("client-"+name+".crt"), "HOTSPLIT_KEY=" + f("client-"+name+".key")}
	}
	// Long enough to cover the upgrade with room to spare (it took 35 s of
	// the run on a loaded 2-core machine); the run ends by itself, so every
	// column it closed must be acknowledged as counted.
	const simFor = 90 * time.Second
	oldSim := startSim(t, "version 2", oldCtl, simEnv("oldsim"), c.endpoints(), "old", simFor)
	newSim := startSim(t, "head", hotsplitctl, simEnv("newsim"), c.endpoints(), "new", simFor)
	const oldReporter = "oldsim/old-0"
	cols := watchColumns(c)
	testutil.WaitFor(t, 60*time.Second, "a committed column counting the old reporter", func() bool {
		cols.mu.Lock()
		defer cols.mu.Unlock()
		for _, rs := range cols.columns {
			if slices.Contains(rs, oldReporter) {
				return true
			}
		}
		return false
	})

	initial := c.routes()
	startVersion := initial.GetRead().GetCatalogVersion()
	writer := startSplitWriter(c)

	order := c.replacementOrder()

	c.replace(order[0], hotsplitd, nil, c.waitHealthy)
	if v := c.clusterVersion(); v != clusterversion.Version2 {
		t.Fatalf("cluster version %d with two version 2 members", v)
	}
	c.checkState("one head node, two of version 2")

	c.replace(order[1], hotsplitd, nil, c.waitHealthy)
	if v := c.clusterVersion(); v != clusterversion.Version2 {
		t.Fatalf("cluster version %d with a version 2 member", v)
	}
	// The mixed cluster under merge-worthy load: the initial routes are
	// adjacent, never split and far below the split threshold.
	cols.waitColumns(t, mixedColdColumns)
	noMerges(t, c, initial, "the mixed cluster")
	// A merge by hand is refused too: by a head node's version gate, or by
	// a version 2 node, which has no rule for the method (PermissionDenied)
	// or no handler (Unimplemented).
	r := initial.GetRoutes()
	if _, errOut, code := ctlExit(t, hotsplitctl, c.ctlEnv(), c.endpoints(), "10s", "merge", fmt.Sprint(r[0].GetRouteId()), fmt.Sprint(r[1].GetRouteId())); code == 0 ||
		!(strings.Contains(errOut, "needs cluster version 3") || oldNodeRefusal(errOut)) {
		t.Fatalf("hotsplitctl merge in the mixed cluster: exit %d: %s; want a refusal naming the version", code, errOut)
	} else {
		t.Logf("a merge by hand in the mixed cluster: exit %d: %s", code, strings.TrimSpace(errOut))
	}
	noMerges(t, c, initial, "the mixed cluster after a merge by hand")
	c.checkState(fmt.Sprintf("two head nodes, one of version 2, after %d cold columns", mixedColdColumns))

	c.replace(order[2], hotsplitd, nil, c.waitHealthy)
	testutil.Eventually(t, 60*time.Second, "the head's cluster version once every member supports it", func() error {
		if v := c.clusterVersion(); v != clusterversion.Supported {
			return fmt.Errorf("cluster version %d", v)
		}
		return nil
	})
	raisedAt := cols.count()
	raiseDecisions(t, c.decisions(), clusterversion.Version2, clusterversion.Supported, nil)

	splits := writer.finish(t)
	after := c.routes()
	starts := map[string]bool{}
	merged := 0
	for _, r := range after.GetRoutes() {
		starts[string(r.GetStart())] = true
		if r.GetMergedFromLeft() != 0 {
			merged++
		}
	}
	for i := range splits {
		if k := fmt.Sprintf("w/%04d", i); !starts[k] {
			t.Errorf("split key %s is no route start", k)
		}
	}
	if got, want := after.GetRead().GetCatalogVersion()-startVersion, uint64(splits+merged); got != want {
		t.Errorf("the catalog moved %d versions for %d splits and %d merges: a split applied twice or went missing", got, splits, merged)
	}

	// A manual merge of two of the operator's routes.
	mergeTwo(t, c, hotsplitctl, "w/0000", "w/0001")

	// The old binary refuses a data dir that has run at 3 (under load: the
	// node is a follower), and the old reporter is counted after the raise.
	refuseNewerDataDir(t, c, oldD, hotsplitd, clusterversion.Supported)
	cols.waitColumns(t, 3)

	// Automatic merges: only of automatic boundaries (the upgrade pinned
	// every boundary it found), while the version 2 reporter may still run.
	cold := autoMergeAfterIsolation(t, c, hotsplitctl, simEnv("hotsim"))

	oldSim.wait(t, simFor+2*time.Minute)
	newSim.wait(t, 2*time.Minute)
	cold.wait(t, 2*time.Minute)
	seen, reporters := cols.finish()
	first, last := -1, -1
	for i, at := range seen {
		if slices.Contains(reporters[at], oldReporter) {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	for i := first; i <= last; i++ {
		if !slices.Contains(reporters[seen[i]], oldReporter) {
			t.Errorf("column %d of %d (at %d ms) lacks the old reporter: %v", i, len(seen), seen[i], reporters[seen[i]])
		}
	}
	if last < raisedAt {
		t.Errorf("the old reporter's last column seen is %d, before the raise at %d", last, raisedAt)
	}
	t.Logf("%d committed columns seen; the old reporter in columns %d to %d, the raise at %d", len(seen), first, last, raisedAt)

	c.checkState("head, from version 2")
	t.Logf("baseline build %.1f s, cluster run %.1f s", built.Sub(began).Seconds(), time.Since(built).Seconds())
}
