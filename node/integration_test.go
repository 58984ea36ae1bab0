package node

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs an in-process cluster")
	}
}

// split splits the route holding key at key, through node via.
func (c *testCluster) split(via, key string) (*api.SplitRangeResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := c.catalogClient(via)
	r, err := cl.GetRoute(ctx, &api.GetRouteRequest{Key: []byte(key)})
	if err != nil {
		return nil, fmt.Errorf("get route of %q via %s: %w", key, via, err)
	}
	return cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r.Route.RouteId, SplitKey: []byte(key), RequestId: requestID(), Actor: "test"})
}

func (c *testCluster) mustSplit(via, key string) *api.SplitRangeResponse {
	c.t.Helper()
	var resp *api.SplitRangeResponse
	// A leader change can make a split fail definitely; retry those.
	testutil.WaitFor(c.t, 10*time.Second, "split of "+key, func() bool {
		var err error
		resp, err = c.split(via, key)
		if err != nil && status.Code(err) != codes.Unavailable {
			c.t.Fatalf("split %q via %s: %v", key, via, err)
		}
		return err == nil
	})
	return resp
}

// kill stops a node abruptly, as a crash would: no leadership transfer, no
// graceful drain.
func (c *testCluster) kill(id string) {
	c.t.Helper()
	c.mu.Lock()
	n := c.nodes[id]
	delete(c.nodes, id)
	if cc := c.conns[id]; cc != nil {
		cc.Close()
		delete(c.conns, id)
	}
	c.mu.Unlock()
	n.cancel()
	n.grpc.Stop()
	if n.http != nil {
		n.http.Close() // else its serve goroutine waits for a listener closed after wg.Wait
	}
	n.raft.Shutdown().Error()
	n.wg.Wait()
	n.peers.Close()
	n.stores.Close()
	n.closeListeners()
	n.closeOnce.Do(func() {})
}

func TestIntegrationFailoverAndCatchUp(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	leader := c.leader()
	follower := c.followers()[0]
	for _, k := range []string{"d", "h", "m", "r"} {
		c.mustSplit(follower, k) // forwarded to the leader
	}
	h := c.waitConverged(10 * time.Second)
	if v := c.node(leader).FSM().State().Catalog().Version(); v != 5 {
		t.Fatalf("catalog version %d after 4 splits, want 5", v)
	}

	killed := time.Now()
	c.kill(leader)
	newLeader := c.waitLeaderReady(10 * time.Second)
	t.Logf("new leader %s ready %v after the old leader died", newLeader, time.Since(killed).Round(time.Millisecond))
	for _, k := range []string{"b", "f", "k"} {
		c.mustSplit(c.followers()[0], k)
	}
	h2 := c.waitConverged(10 * time.Second)
	if h2 == h {
		t.Fatalf("state hash did not change after more splits")
	}
	c.restart(leader)
	h3 := c.waitConverged(15 * time.Second)
	if v := c.node(leader).FSM().State().Catalog().Version(); v != 8 {
		t.Fatalf("restarted node at catalog version %d, want 8 (hash %x)", v, h3[:4])
	}
}

func TestIntegrationSingleProposerUnderLoad(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	// 15 s: a few thousand commands through three entry points, each
	// stamped by the one proposer; longer runs found nothing more and
	// cost the integration stage its margin.
	duration := 15 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), duration)
	defer cancel()
	var fenceRejections, ops atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			via := fmt.Sprintf("n%d", w%3+1)
			for i := 0; ctx.Err() == nil && i < 100000; i++ {
				var err error
				switch i % 3 {
				case 0:
					_, err = c.split(via, fmt.Sprintf("w%d-%06d", w, i))
				case 1:
					_, err = c.autoClient(via).SetEnabled(ctx, &api.SetEnabledRequest{Enabled: i%2 == 0, Actor: "load", Reason: "load test", RequestId: requestID()})
				case 2:
					_, err = c.autoClient(via).SetConfig(ctx, &api.SetConfigRequest{Patch: &api.ConfigPatch{Threshold: proto.Uint64(uint64(40000 + i))}, Actor: "load", RequestId: requestID()})
				}
				if status.Code(err) == codes.Aborted {
					fenceRejections.Add(1)
				}
				if err == nil {
					ops.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	c.waitConverged(10 * time.Second)
	t.Logf("%d operations committed in %v", ops.Load(), duration)
	if n := fenceRejections.Load(); n != 0 {
		t.Fatalf("%d fence rejections", n)
	}
	for _, n := range c.running() {
		if v := n.FSM().State().FenceViolations(); v != 0 {
			t.Fatalf("%s counted %d fence violations", n.ID(), v)
		}
	}
	if ops.Load() < 100 {
		t.Fatalf("only %d operations committed", ops.Load())
	}
	checkLogHLCs(t, c.leaderNode())
}

// checkLogHLCs reads a node's raft log and checks that the stamped commands
// carry strictly increasing HLCs in log order.
func checkLogHLCs(t *testing.T, n *Node) int {
	t.Helper()
	first, _ := n.stores.Logs.FirstIndex()
	last, _ := n.stores.Logs.LastIndex()
	var prev uint64
	count := 0
	for i := first; i <= last; i++ {
		var l raft.Log
		if err := n.stores.Logs.GetLog(i, &l); err != nil || l.Type != raft.LogCommand {
			continue
		}
		cmd, err := fsm.DecodeCommand(l.Data)
		if err != nil {
			t.Fatalf("log index %d: %v", i, err)
		}
		if cmd.Hlc <= prev {
			t.Fatalf("log index %d: hlc %s not above %s", i, hlc.Format(cmd.Hlc), hlc.Format(prev))
		}
		prev = cmd.Hlc
		count++
	}
	return count
}

type tsCall struct {
	start, end time.Time
	first      uint64
	count      uint32
}

func TestIntegrationLeaderChangesKeepTimeMonotonic(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var calls []tsCall
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil && i < 1_000_000; i++ {
				via := fmt.Sprintf("n%d", (w+i)%3+1)
				start := time.Now()
				cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
				resp, err := c.catalogClient(via).GetTimestamp(cctx, &api.GetTimestampRequest{Count: 8})
				ccancel()
				if err != nil {
					continue
				}
				mu.Lock()
				calls = append(calls, tsCall{start, time.Now(), resp.First, resp.Count})
				mu.Unlock()
			}
		}()
	}
	var splitHLCs []uint64
	for i := range 20 {
		leader := c.waitLeaderReady(10 * time.Second)
		// A loaded machine may time a transfer out (Unavailable) or elect
		// someone else meanwhile: what the test needs is a new leader.
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("transfer %d to a different ready leader", i), func() bool {
			if l := c.leader(); l != "" && l != leader {
				return true
			}
			_, err := c.clusterClient(c.followers()[0]).TransferLeadership(ctxT(t, 10*time.Second), &api.TransferLeadershipRequest{})
			if err != nil && status.Code(err) != codes.Unavailable {
				t.Fatalf("transfer %d: %v", i, err)
			}
			l := c.leader()
			return l != "" && l != leader
		})
		s := c.mustSplit(c.followers()[0], fmt.Sprintf("t%03d", i))
		splitHLCs = append(splitHLCs, s.CommitHlc)
	}
	cancel()
	wg.Wait()
	for i := 1; i < len(splitHLCs); i++ {
		if splitHLCs[i] <= splitHLCs[i-1] {
			t.Fatalf("split %d commit hlc %s not above %s", i, hlc.Format(splitHLCs[i]), hlc.Format(splitHLCs[i-1]))
		}
	}
	c.waitConverged(10 * time.Second)
	checkLogHLCs(t, c.leaderNode())
	checkRealTimeOrder(t, calls)
	t.Logf("%d GetTimestamp batches across 20 leader changes", len(calls))
}

// checkRealTimeOrder: if a returned before b was requested, all of a's
// timestamps are below all of b's.
func checkRealTimeOrder(t *testing.T, calls []tsCall) {
	t.Helper()
	if len(calls) < 100 {
		t.Fatalf("only %d timestamp batches", len(calls))
	}
	byEnd := append([]tsCall(nil), calls...)
	sort.Slice(byEnd, func(i, j int) bool { return byEnd[i].end.Before(byEnd[j].end) })
	byStart := append([]tsCall(nil), calls...)
	sort.Slice(byStart, func(i, j int) bool { return byStart[i].start.Before(byStart[j].start) })
	var maxDone uint64 // highest timestamp of every call that ended before the current start
	j := 0
	for _, b := range byStart {
		for j < len(byEnd) && byEnd[j].end.Before(b.start) {
			maxDone = max(maxDone, byEnd[j].first+uint64(byEnd[j].count)-1)
			j++
		}
		if b.first <= maxDone {
			t.Fatalf("timestamp %s handed out after %s had already been returned", hlc.Format(b.first), hlc.Format(maxDone))
		}
	}
}

func TestIntegrationCASAndRequestIDs(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	via := c.followers()[0]
	ctx := ctxT(t, 20*time.Second)
	cl := c.catalogClient(via)
	c.mustSplit(via, "m")
	h := c.waitBusinessConverged(5 * time.Second)

	r, err := cl.GetRoute(ctx, &api.GetRouteRequest{Key: []byte("z")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r.Route.RouteId, SplitKey: []byte("t"), ExpectedVersion: proto.Uint64(1), RequestId: requestID()})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("stale expected_version: err = %v, want FailedPrecondition", err)
	}
	if got := c.waitBusinessConverged(5 * time.Second); got != h {
		t.Fatalf("a refused CAS split changed the state")
	}

	id := requestID()
	req := &api.SplitRangeRequest{RouteId: r.Route.RouteId, SplitKey: []byte("t"), ExpectedVersion: proto.Uint64(r.Read.CatalogVersion), RequestId: id}
	first, err := cl.SplitRange(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.catalogClient(c.leader()).SplitRange(ctx, req)
	if err != nil {
		t.Fatalf("resent request: %v", err)
	}
	if !proto.Equal(first, again) {
		t.Fatalf("resent request answered %v, first answer was %v", again, first)
	}
	c.waitConverged(5 * time.Second)
	if v := c.leaderNode().FSM().State().Catalog().Version(); v != r.Read.CatalogVersion+1 {
		t.Fatalf("catalog at version %d: the resent split applied twice?", v)
	}
}

func TestIntegrationKillSwitchSurvivesRestart(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	via := c.followers()[0]
	_, err := c.autoClient(via).SetEnabled(ctxT(t, 10*time.Second), &api.SetEnabledRequest{Enabled: false, Actor: "ops@example", Reason: "incident 42", RequestId: requestID()})
	if err != nil {
		t.Fatal(err)
	}
	c.waitConverged(5 * time.Second)
	check := func() {
		t.Helper()
		for _, n := range c.running() {
			st, err := c.autoClient(n.ID()).Status(ctxT(t, 5*time.Second), &api.StatusRequest{Consistency: api.Consistency_CONSISTENCY_STALE})
			if err != nil {
				t.Fatalf("status on %s: %v", n.ID(), err)
			}
			sw := st.Switch
			if sw.Enabled || sw.Actor != testAdmin || sw.Note != "ops@example" || sw.Reason != "incident 42" || sw.Source != api.SwitchSource_SWITCH_SOURCE_OPERATOR || sw.ChangedAtHlc == 0 {
				t.Fatalf("status on %s shows switch %v", n.ID(), sw)
			}
		}
	}
	check()
	for _, id := range []string{"n1", "n2", "n3"} {
		c.stop(id)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		c.restart(id)
	}
	c.waitLeaderReady(10 * time.Second)
	c.waitConverged(10 * time.Second)
	check()
}

func TestIntegrationWatchRoutes(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	ctx := ctxT(t, 60*time.Second)
	leader := c.leader()
	stream, err := c.catalogClient(leader).WatchRoutes(ctx, &api.WatchRoutesRequest{FromVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"c", "f", "i", "l", "o"}
	for _, k := range keys {
		c.mustSplit(leader, k)
	}
	var last uint64 = 1
	for range keys {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		d := ev.GetDelta()
		if d == nil || d.Version != last+1 || len(d.RemovedRouteIds) != 1 || len(d.Added) != 2 {
			t.Fatalf("after version %d got %v", last, ev)
		}
		last = d.Version
	}

	// A lagging node must not take a reconnecting watcher backwards.
	lagger := c.followers()[0]
	c.stop(lagger)
	for _, k := range []string{"q", "s", "u"} {
		c.mustSplit(c.leader(), k)
	}
	seen := c.leaderNode().FSM().State().Catalog().Version()
	c.restart(lagger)
	lstream, err := c.catalogClient(lagger).WatchRoutes(ctx, &api.WatchRoutesRequest{FromVersion: seen})
	if err != nil {
		t.Fatal(err)
	}
	c.mustSplit(c.leader(), "w")
	ev, err := lstream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if d := ev.GetDelta(); d == nil || d.Version != seen+1 {
		t.Fatalf("reconnected watcher at %d got %v", seen, ev)
	}

	// From version 0: a full snapshot in pages, then deltas.
	fresh, err := c.catalogClient(lagger).WatchRoutes(ctx, &api.WatchRoutesRequest{FromVersion: 0})
	if err != nil {
		t.Fatal(err)
	}
	ev, err = fresh.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if p := ev.GetSnapshotPage(); p == nil || !p.Last || p.Version != seen+1 || len(p.Routes) != int(seen+1) {
		t.Fatalf("snapshot page %v", ev)
	}
}

func TestIntegrationBadInputChangesNothing(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	via := c.followers()[0]
	c.mustSplit(via, "m")
	h := c.waitBusinessConverged(5 * time.Second)
	ctx := ctxT(t, 30*time.Second)
	cl, auto, clu := c.catalogClient(via), c.autoClient(via), c.clusterClient(via)
	r1, _ := cl.GetRoute(ctx, &api.GetRouteRequest{Key: []byte("a")})
	tooLong := bytes.Repeat([]byte("k"), 4098)
	cases := []struct {
		name  string
		call  func() error
		code  codes.Code
		field string
	}{
		{"route id 0", func() error {
			_, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: 0, SplitKey: []byte("a")})
			return err
		}, codes.InvalidArgument, "route_id"},
		{"unknown route", func() error {
			_, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: 999, SplitKey: []byte("a"), RequestId: requestID()})
			return err
		}, codes.NotFound, "r999 was never created"},
		{"key over the limit", func() error {
			_, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r1.Route.RouteId, SplitKey: tooLong})
			return err
		}, codes.InvalidArgument, "split_key"},
		{"split at a boundary", func() error {
			_, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r1.Route.RouteId, SplitKey: []byte("m"), RequestId: requestID()})
			return err
		}, codes.FailedPrecondition, "end of route"},
		{"stale expected version", func() error {
			_, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r1.Route.RouteId, SplitKey: []byte("c"), ExpectedVersion: proto.Uint64(1), RequestId: requestID()})
			return err
		}, codes.FailedPrecondition, "version"},
		{"invalid config value", func() error {
			_, err := auto.SetConfig(ctx, &api.SetConfigRequest{Patch: &api.ConfigPatch{Buckets: proto.Uint32(1000)}, RequestId: requestID()})
			return err
		}, codes.InvalidArgument, "buckets"},
		{"disable without reason", func() error {
			_, err := auto.SetEnabled(ctx, &api.SetEnabledRequest{Enabled: false})
			return err
		}, codes.InvalidArgument, "reason"},
		{"join with an id in use", func() error {
			_, err := clu.Join(ctx, &api.JoinRequest{NodeId: "n2", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:2", SupportedVersion: clusterversion.Supported})
			return err
		}, codes.AlreadyExists, "n2"},
		{"join of a foreign cluster", func() error {
			_, err := clu.Join(ctx, &api.JoinRequest{NodeId: "n9", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:2", SupportedVersion: clusterversion.Supported, ClusterId: "not-this-one"})
			return err
		}, codes.FailedPrecondition, "cluster"},
		{"get route with both key and id", func() error {
			_, err := cl.GetRoute(ctx, &api.GetRouteRequest{Key: []byte("a"), RouteId: 1})
			return err
		}, codes.InvalidArgument, "key"},
		{"join of a binary too old", func() error {
			_, err := clu.Join(ctx, &api.JoinRequest{NodeId: "n2", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:2", SupportedVersion: clusterversion.Version1})
			return err
		}, codes.FailedPrecondition, "supports version 1"},
		{"empty config patch", func() error {
			_, err := auto.SetConfig(ctx, &api.SetConfigRequest{Patch: &api.ConfigPatch{}, RequestId: requestID()})
			return err
		}, codes.InvalidArgument, "patch"},
		{"max_auto_routes above 2^20", func() error {
			_, err := auto.SetConfig(ctx, &api.SetConfigRequest{Patch: &api.ConfigPatch{MaxAutoRoutes: proto.Uint32(1<<32 - 1)}, RequestId: requestID()})
			return err
		}, codes.InvalidArgument, "max_auto_routes"},
		{"4097-byte boundary not ending in 0x00", func() error {
			_, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: 1, SplitKey: append(bytes.Repeat([]byte("k"), 4096), 'x'), RequestId: requestID()})
			return err
		}, codes.InvalidArgument, "0x00"},
		{"node id with an upper-case letter", func() error {
			_, err := clu.Remove(ctx, &api.RemoveRequest{NodeId: "N2"})
			return err
		}, codes.InvalidArgument, "node_id"},
		{"invalid UTF-8 in a string field", func() error {
			// protobuf refuses to encode it, so send the bytes by hand.
			raw := protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "looking\xff")
			return c.conn(c.leader()).Invoke(ctx, api.AutoSplit_SetEnabled_FullMethodName, raw, &api.SetEnabledResponse{}, grpc.ForceCodecV2(rawCodec{}))
		}, codes.InvalidArgument, "reason: not valid UTF-8"},
		{"too many timestamps", func() error {
			_, err := cl.GetTimestamp(ctx, &api.GetTimestampRequest{Count: 1 << 20})
			return err
		}, codes.InvalidArgument, "count"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st, _ := status.FromError(err)
			if st.Code() != tc.code || !bytes.Contains([]byte(st.Message()), []byte(tc.field)) {
				t.Fatalf("err = %v, want %s naming %q", err, tc.code, tc.field)
			}
			if got := c.waitBusinessConverged(5 * time.Second); got != h {
				t.Fatalf("rejected request changed the state")
			}
		})
	}
	// --bootstrap on a data dir that already has state does not re-bootstrap.
	id := c.node("n1").FSM().State().ClusterID()
	c.stop("n1")
	cfg := c.cfgs["n1"]
	cfg.Bootstrap = true
	c.start(cfg)
	c.waitLeaderReady(10 * time.Second)
	if got := c.waitBusinessConverged(10 * time.Second); got != h {
		t.Fatalf("restart with --bootstrap changed the state")
	}
	if got := c.node("n1").FSM().State().ClusterID(); got != id {
		t.Fatalf("cluster id changed from %s to %s", id, got)
	}
}

// rawCodec sends a request's bytes as they are and decodes answers with
// protobuf, to put bytes on the wire that protobuf would not encode.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (rawCodec) Name() string { return "proto" }
