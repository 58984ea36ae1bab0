package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// TestIntegrationMoveRange moves a route between two shard groups on a
// 3-node TLS cluster, through a follower: an operator adds the target
// group and starts the move; data nodes acknowledge as themselves
// (reporter certificates) and the leader's stepper fences and commits
// once the acknowledgements are complete. An acknowledgement from a node
// of the wrong group is PermissionDenied and changes nothing; a watcher
// sees each step as one changed route.
func TestIntegrationMoveRange(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	c.waitLeaderReady(10 * time.Second)
	followers := c.followers()
	ctx := ctxT(t, 60*time.Second)
	dial := func(name, role string) *client.Client {
		cl, err := client.New(client.Config{Endpoints: []string{c.node(followers[0]).GRPCAddr()}, RequestTimeout: 10 * time.Second,
			TLS: clientTLS(t, name, role)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		return cl
	}
	op, dnA, dnB := dial("olga", "operator"), dial("dn-a", "reporter"), dial("dn-b", "reporter")
	watcher := dial(testAdmin, "admin")
	w := &deltaLog{}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() { _ = watcher.Watch(wctx, 1, w.record) }()

	// The switch holds a move before its fence: on.
	if _, err := op.SetEnabled(ctx, &api.SetEnabledRequest{Enabled: true, Reason: "moves"}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.SetGroup(ctx, &api.SetGroupRequest{GroupId: 1, AddIdentities: []string{"dn-a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := op.AddGroup(ctx, &api.AddGroupRequest{Name: "east", Identities: []string{"dn-b"}}); err != nil {
		t.Fatal(err)
	}
	mv, err := op.MoveRange(ctx, &api.MoveRangeRequest{RouteId: 1, TargetGroupId: 2})
	if err != nil {
		t.Fatal(err)
	}
	begun := mv.GetCatalogVersion()
	ack := func(cl *client.Client, a api.MoveAck, version, watermark uint64) (*api.AckMoveResponse, error) {
		return cl.AckMove(ctx, &api.AckMoveRequest{OpId: mv.GetOpId(), RouteId: 1, CatalogVersion: version, Ack: a, Watermark: watermark})
	}
	before := c.waitBusinessConverged(10 * time.Second)
	if _, err := ack(dnA, api.MoveAck_MOVE_ACK_COPIED, begun, 0); status.Code(err) != codes.PermissionDenied || !errors.Is(err, client.ErrNotApplied) {
		t.Fatalf("a copy acknowledgement from the source's node: %v, want PermissionDenied, not applied", err)
	}
	if after := c.waitBusinessConverged(10 * time.Second); after != before {
		t.Fatal("a refused acknowledgement changed the replicated state")
	}
	if _, err := ack(dnB, api.MoveAck_MOVE_ACK_COPIED, begun, 0); err != nil {
		t.Fatal(err)
	}
	routeIs := func(state api.RouteState, group uint64) func() bool {
		return func() bool {
			r, ok := c.leaderNode().FSM().State().Catalog().Route(1)
			return ok && api.RouteState(r.State) == state && r.GroupID == group
		}
	}
	testutil.WaitFor(t, 20*time.Second, "the leader fences the route", routeIs(api.RouteState_ROUTE_STATE_WRITE_FENCED, 1))
	fenced := begun + 1
	if _, err := ack(dnA, api.MoveAck_MOVE_ACK_FENCED, fenced, 42); err != nil {
		t.Fatal(err)
	}
	if _, err := ack(dnB, api.MoveAck_MOVE_ACK_CAUGHT_UP, fenced, 41); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a catch-up naming another watermark: %v, want FailedPrecondition", err)
	}
	if _, err := ack(dnB, api.MoveAck_MOVE_ACK_CAUGHT_UP, fenced, 42); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 20*time.Second, "the leader commits the move", routeIs(api.RouteState_ROUTE_STATE_ACTIVE, 2))
	c.waitConverged(10 * time.Second)
	testutil.WaitFor(t, 10*time.Second, "the watcher sees the three steps", func() bool { return w.at(begun+2) != nil })
	for v, want := range map[uint64]api.RouteState{begun: api.RouteState_ROUTE_STATE_MIGRATING_SOURCE, begun + 1: api.RouteState_ROUTE_STATE_WRITE_FENCED,
		begun + 2: api.RouteState_ROUTE_STATE_ACTIVE} {
		d := w.at(v)
		if d == nil || len(d.GetChanged()) != 1 || d.GetChanged()[0].GetRouteId() != 1 || d.GetChanged()[0].GetState() != want ||
			len(d.GetAdded())+len(d.GetRemovedRouteIds()) != 0 {
			t.Errorf("version %d: delta %v, want route 1 changed to %v", v, d, want)
		}
	}
}
