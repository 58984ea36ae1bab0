package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// TestIntegrationRollingUpgradeFromVersion3 upgrades a TLS cluster of the
// version 3 release to head, one node at a time:
//   - the mixed cluster (two head nodes, one version 3) keeps version 3
//     and refuses the shard group commands, by a head node's gate naming
//     the version or by the version 3 node, which knows no such method; every
//     member's state hash equal;
//   - the cluster version rises to the head's when the last node is
//     replaced, and the raise makes the catalog's one group a group of
//     the table (its decision says so);
//   - then `hotsplitctl groups add|set|list` work, splits keep their
//     route's group, a manual move (`hotsplitctl move`) goes through every
//     step as data nodes acknowledge it under their own certificates, and
//     the version 3 binary refuses the data dir.
func TestIntegrationRollingUpgradeFromVersion3(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds a release and runs hotsplitd processes")
	}
	began := time.Now()
	hotsplitd, hotsplitctl := binaries(t)
	oldD, _ := baselineBinaries(t, clusterversion.Version3)
	built := time.Now()

	c := startUpgradeCluster(t, oldD, hotsplitctl, false)
	c.waitHealthy()
	if v := c.clusterVersion(); v != clusterversion.Version3 {
		t.Fatalf("the version 3 release bootstrapped cluster version %d", v)
	}
	groups := func(args ...string) (string, string, int) {
		t.Helper()
		return ctlExit(t, hotsplitctl, c.ctlEnv(), c.endpoints(), "10s", append([]string{"groups"}, args...)...)
	}
	order := c.replacementOrder()
	c.replace(order[0], hotsplitd, nil, c.waitHealthy)
	c.replace(order[1], hotsplitd, nil, c.waitHealthy)
	if v := c.clusterVersion(); v != clusterversion.Version3 {
		t.Fatalf("cluster version %d with a version 3 member", v)
	}
	c.checkState("two head nodes, one of version 3")
	for _, args := range [][]string{{"add", "east"}, {"list"}} {
		_, errOut, code := groups(args...)
		if code == 0 || !(strings.Contains(errOut, "needs cluster version 4") || oldNodeRefusal(errOut)) {
			t.Fatalf("groups %v in the mixed cluster: exit %d: %s; want a refusal naming the version", args, code, errOut)
		}
		t.Logf("groups %v in the mixed cluster: exit %d: %s", args, code, strings.TrimSpace(errOut))
	}
	c.checkState("after the refused group commands")

	c.replace(order[2], hotsplitd, nil, c.waitHealthy)
	testutil.Eventually(t, 60*time.Second, "the head's cluster version once every member supports it", func() error {
		if v := c.clusterVersion(); v != clusterversion.Supported {
			return fmt.Errorf("cluster version %d", v)
		}
		return nil
	})
	raiseDecisions(t, c.decisions(), clusterversion.Version3, clusterversion.Supported, map[uint32]string{
		clusterversion.Version4: "cluster version 4: groups=1 next_group_id=2 move_ttl_ms=600000 cross_group=false placement_windows=3 move_cooldown_ms=1800000 max_moves_per_cycle=1 move_margin_bp=1000",
	})
	if out, errOut, code := groups("add", "east", "--capacity", "2000000", "--identity", "dn-east"); code != 0 || !strings.Contains(out, "added group g2 east") {
		t.Fatalf("groups add after the raise: exit %d: %s%s", code, out, errOut)
	}
	if out, errOut, code := groups("set", "group-1", "--add-identity", "dn-1"); code != 0 || !strings.Contains(out, "changed group g1 group-1") {
		t.Fatalf("groups set after the raise: exit %d: %s%s", code, out, errOut)
	}
	out, errOut, code := groups("list")
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		rows = append(rows, strings.Join(strings.Fields(line), " "))
	}
	if code != 0 || !slices.Contains(rows, fmt.Sprintf("g1 group-1 active 1000000 %d dn-1", len(c.routes().GetRoutes()))) || !slices.Contains(rows, "g2 east active 2000000 0 dn-east") {
		t.Fatalf("groups list after the raise: exit %d:\n%s%s", code, out, errOut)
	}
	r := c.routes().GetRoutes()[0]
	ctx, cancel := c.ctx()
	resp, err := c.cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r.GetRouteId(), SplitKey: []byte("m"), RequestId: "upgrade-v3-split"})
	cancel()
	if err != nil || resp.GetLeft().GetGroupId() != r.GetGroupId() || resp.GetRight().GetGroupId() != r.GetGroupId() {
		t.Fatalf("split after the raise: %v %v: want both children in group %d", resp, err, r.GetGroupId())
	}
	moveAfterUpgrade(t, c, hotsplitctl, resp.GetRight().GetRouteId())
	c.checkState("head, from version 3")
	refuseNewerDataDir(t, c, oldD, hotsplitd, clusterversion.Supported)
	t.Logf("baseline build %.1f s, cluster run %.1f s", built.Sub(began).Seconds(), time.Since(built).Seconds())
}

// moveAfterUpgrade moves route from group 1 to group 2 (east) with
// `hotsplitctl move`, then acknowledges each step as the data nodes dn-1
// and dn-east would (reporter certificates of those names), and waits for
// the leader to commit it.
func moveAfterUpgrade(t *testing.T, c *upgradeCluster, hotsplitctl string, route uint64) {
	t.Helper()
	node := func(name string) *client.Client {
		if out, err := exec.Command(hotsplitctl, "certs", "create-client", name, "--role", "reporter", "--dir", string(c.certs)).CombinedOutput(); err != nil {
			t.Fatalf("certs create-client %s: %v\n%s", name, err, out)
		}
		cfg := c.clientConfig(c.endpoints())
		cfg.CertFile, cfg.KeyFile = filepath.Join(string(c.certs), "client-"+name+".crt"), filepath.Join(string(c.certs), "client-"+name+".key")
		cl, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	src, dst := node("dn-1"), node("dn-east")
	if _, errOut, code := ctlExit(t, hotsplitctl, c.ctlEnv(), c.endpoints(), "10s", "autosplit", "enable", "--reason", "moves"); code != 0 {
		t.Fatalf("autosplit enable: %s", errOut)
	}
	out, errOut, code := ctlExit(t, hotsplitctl, c.ctlEnv(), c.endpoints(), "10s", "move", fmt.Sprint(route), "east", "-o", "json")
	if code != 0 {
		t.Fatalf("hotsplitctl move: exit %d: %s", code, errOut)
	}
	var mv api.MoveRangeResponse
	if err := protojson.Unmarshal([]byte(out), &mv); err != nil || mv.GetOpId() == 0 {
		t.Fatalf("move answered %q: %v", out, err)
	}
	ack := func(cl *client.Client, a api.MoveAck, version, watermark uint64) {
		t.Helper()
		ctx, cancel := c.ctx()
		defer cancel()
		if _, err := cl.AckMove(ctx, &api.AckMoveRequest{OpId: mv.GetOpId(), RouteId: route, CatalogVersion: version, Ack: a, Watermark: watermark}); err != nil {
			t.Fatalf("ack %v: %v", a, err)
		}
	}
	routeIs := func(state api.RouteState, group uint64) func() error {
		return func() error {
			ctx, cancel := c.ctx()
			defer cancel()
			r, err := c.cl.GetRoute(ctx, &api.GetRouteRequest{RouteId: route, Consistency: api.Consistency_CONSISTENCY_LINEARIZABLE})
			if err != nil {
				return err
			}
			if r.GetRoute().GetState() != state || r.GetRoute().GetGroupId() != group {
				return fmt.Errorf("route %v", r.GetRoute())
			}
			return nil
		}
	}
	ack(dst, api.MoveAck_MOVE_ACK_COPIED, mv.GetCatalogVersion(), 0)
	testutil.Eventually(t, 30*time.Second, "the leader fences the move", routeIs(api.RouteState_ROUTE_STATE_WRITE_FENCED, 1))
	ack(src, api.MoveAck_MOVE_ACK_FENCED, mv.GetCatalogVersion()+1, 7)
	ack(dst, api.MoveAck_MOVE_ACK_CAUGHT_UP, mv.GetCatalogVersion()+1, 7)
	testutil.Eventually(t, 30*time.Second, "the leader commits the move", routeIs(api.RouteState_ROUTE_STATE_ACTIVE, 2))
}

// oldNodeRefusal reports whether a call failed as a node of an older
// release refuses a method it does not know: its authorization table has
// no row for it (PermissionDenied), or it has no handler (Unimplemented).
// Which node a command reaches in a mixed cluster depends on the leader.
func oldNodeRefusal(errOut string) bool {
	return strings.Contains(errOut, "no authorization rule for it") || strings.Contains(errOut, "Unimplemented")
}
