package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// TestIntegrationRollingUpgradeFromVersion1 upgrades a cluster of the
// version 1 release to head, one node at a time. Version 1 has no TLS, so
// this is the one process test that runs plaintext: the head nodes start
// with the old flags plus --insecure (docs/runbook.md: turning TLS on
// afterwards takes a full-cluster restart). While a version 1 member
// remains the cluster stays at 1 (mixed members apply version 1's rules);
// the SetMember of the last replaced node raises it from 1 to the head's
// version in one entry, running the raise hooks of version 2 (the hold band
// and the floor that follows the threshold) and then those of every later
// version in turn. The version 1
// binary then refuses the data dir, and TLS is turned on as
// docs/runbook.md says (a full-cluster restart).
func TestIntegrationRollingUpgradeFromVersion1(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds a release and runs hotsplitd processes")
	}
	began := time.Now()
	hotsplitd, hotsplitctl := binaries(t)
	oldD, _ := baselineBinaries(t, clusterversion.Version1)
	built := time.Now()

	c := startUpgradeCluster(t, oldD, hotsplitctl, true)
	if v := c.clusterVersion(); v != clusterversion.Version1 {
		t.Fatalf("the version 1 release bootstrapped cluster version %d", v)
	}
	split := func(key string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, "a split at "+key, func() error {
			ctx, cancel := c.ctx()
			defer cancel()
			r, err := c.cl.GetRoute(ctx, &api.GetRouteRequest{Key: []byte(key)})
			if err != nil {
				return err
			}
			if string(r.GetRoute().GetStart()) == key {
				return nil // an earlier attempt applied
			}
			_, err = c.cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r.GetRoute().GetRouteId(), SplitKey: []byte(key), RequestId: "upgrade-v1-" + key})
			return err
		})
	}
	split("w/0000")

	headReady := func() { c.waitVoters() }
	c.replace(c.procs[0], hotsplitd, []string{"--insecure"}, headReady)
	split("w/0001")
	c.replace(c.procs[1], hotsplitd, []string{"--insecure"}, headReady)
	split("w/0002")
	if v := c.clusterVersion(); v != clusterversion.Version1 {
		t.Fatalf("cluster version %d with a version 1 member", v)
	}

	// Watch the version while the last node is replaced: it must go from
	// 1 to the head's without being seen in between.
	var mu sync.Mutex
	var seen []uint32
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for range 10_000 {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			ctx, cancel := c.ctx()
			m, err := c.cl.Members(ctx, &api.MembersRequest{})
			cancel()
			if err == nil {
				mu.Lock()
				if v := m.GetClusterVersion(); len(seen) == 0 || seen[len(seen)-1] != v {
					seen = append(seen, v)
				}
				mu.Unlock()
			}
		}
	}()
	c.replace(c.procs[2], hotsplitd, []string{"--insecure"}, headReady)
	c.waitHealthy()
	testutil.Eventually(t, 60*time.Second, "the head's cluster version once every member supports it", func() error {
		if v := c.clusterVersion(); v != clusterversion.Supported {
			return fmt.Errorf("cluster version %d", v)
		}
		return nil
	})
	close(stop)
	<-done
	if slices.ContainsFunc(seen, func(v uint32) bool { return v != clusterversion.Version1 && v != clusterversion.Supported }) {
		t.Errorf("the cluster versions seen were %v: the raise stopped on the way", seen)
	}
	raises := raiseDecisions(t, c.decisions(), clusterversion.Version1, clusterversion.Supported, map[uint32]string{
		clusterversion.Version2: fmt.Sprintf("cluster version 2: hold_band_bp=%d floor_follows_threshold=true", fsm.DefaultHoldBandBP),
		clusterversion.Version4: "cluster version 4: groups=1 next_group_id=2 move_ttl_ms=600000 cross_group=false placement_windows=3 move_cooldown_ms=1800000 max_moves_per_cycle=1 move_margin_bp=1000",
	})
	for _, d := range raises {
		t.Logf("raise decision: %s (seq %d, hlc %d)", d.GetDetail(), d.GetSeq(), d.GetAtHlc())
	}
	ctx, cancel := c.ctx()
	st, err := c.cl.Status(ctx, &api.StatusRequest{})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.GetConfig(); cfg.GetHoldBandBp() != fsm.DefaultHoldBandBP || !cfg.GetFloorFollowsThreshold() {
		t.Errorf("config after the raise: %v, want the version 2 settings at their defaults", cfg)
	}

	// Version 3 at work: a manual merge of two routes split under version 1.
	mergeTwo(t, c, hotsplitctl, "w/0000", "w/0001")
	c.checkState("head, from version 1")
	refuseNewerDataDir(t, c, oldD, hotsplitd, clusterversion.Supported)
	enableTLS(t, c, hotsplitd, hotsplitctl)
	t.Logf("baseline build %.1f s, cluster run %.1f s", built.Sub(began).Seconds(), time.Since(built).Seconds())
}

// enableTLS turns TLS on in an insecure cluster by docs/runbook.md's
// procedure: certificates for every node, every node stopped (followers
// first), then all started with the TLS flags instead of --insecure on
// their data dirs. The cluster must come back healthy with every state
// hash equal, now reachable only with certificates.
func enableTLS(t *testing.T, c *upgradeCluster, hotsplitd, hotsplitctl string) {
	t.Helper()
	before := c.routes()
	certs := makeCerts(t, hotsplitctl, filepath.Join(c.dir, "certs"), "n1", "n2", "n3")
	lead, _ := c.leader()
	for _, p := range c.procs {
		if p.id != lead {
			p.stop()
		}
	}
	c.byID(lead).stop()
	for _, p := range c.procs {
		p.cmd = nil
		p.args = append(slices.DeleteFunc(p.args, func(a string) bool { return a == "--insecure" }), certs.nodeArgs(p.id)...)
		p.start(t, hotsplitd)
	}
	c.insecure, c.certs = false, certs
	c.connect()
	for _, p := range c.procs {
		c.waitReady(p)
	}
	c.waitHealthy()
	c.checkState("after turning TLS on")
	if after := c.routes(); !proto.Equal(&api.ListRoutesResponse{Routes: after.GetRoutes()}, &api.ListRoutesResponse{Routes: before.GetRoutes()}) {
		t.Fatalf("the catalog changed across the restart with TLS: %v, was %v", after.GetRoutes(), before.GetRoutes())
	}
	// Plaintext is refused now.
	plain, err := client.New(client.Config{Endpoints: strings.Split(c.endpoints(), ","), Insecure: true, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := plain.ListRoutes(ctx, &api.ListRoutesRequest{}); err == nil {
		t.Fatal("a plaintext client still reads the catalog after TLS was turned on")
	}
}
