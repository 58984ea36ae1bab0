package node

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// deltaLog keeps the deltas a client.Watch delivers.
type deltaLog struct {
	mu     sync.Mutex
	deltas []*api.CatalogDelta
}

func (l *deltaLog) record(ev *api.WatchRoutesResponse) error {
	if d := ev.GetDelta(); d != nil {
		l.mu.Lock()
		l.deltas = append(l.deltas, d)
		l.mu.Unlock()
	}
	return nil
}

func (l *deltaLog) at(version uint64) *api.CatalogDelta {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.deltas {
		if d.GetVersion() == version {
			return d
		}
	}
	return nil
}

// TestIntegrationManualMerge merges two routes by hand on a 3-node TLS
// cluster through the client, as an operator talking to a follower only
// (the follower forwards to the leader): the merged route is on every
// replica, a watcher on another node sees one delta removing both routes
// and adding the merged one, the decision records the operator; a stale
// compare-and-set, an unknown route and a non-adjacent pair are refused
// with their codes and change nothing; a retried request id answers the
// first result without merging twice.
func TestIntegrationManualMerge(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	leader := c.waitLeaderReady(10 * time.Second)
	followers := c.followers()
	ctx := ctxT(t, 60*time.Second)

	op, err := client.New(client.Config{Endpoints: []string{c.node(followers[0]).GRPCAddr()}, RequestTimeout: 10 * time.Second,
		TLS: clientTLS(t, "olga", "operator")})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Close()
	watcher, err := client.New(client.Config{Endpoints: []string{c.node(followers[1]).GRPCAddr()}, TLS: adminTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Close()
	w := &deltaLog{}
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() { _ = watcher.Watch(wctx, 1, w.record) }()

	// r1 splits into r2 ["", "m") and r3 ["m", +inf), then r3 into r4
	// ["m", "t") and r5 ["t", +inf): version 3.
	c.mustSplit(leader, "m")
	c.mustSplit(c.leader(), "t")
	before := c.waitBusinessConverged(10 * time.Second)

	refusals := []struct {
		name string
		req  *api.MergeRangeRequest
		code codes.Code
	}{
		{"stale expected version", &api.MergeRangeRequest{LeftRouteId: 2, RightRouteId: 4, ExpectedVersion: proto.Uint64(2)}, codes.FailedPrecondition},
		{"not adjacent", &api.MergeRangeRequest{LeftRouteId: 2, RightRouteId: 5}, codes.FailedPrecondition},
		{"unknown route", &api.MergeRangeRequest{LeftRouteId: 2, RightRouteId: 3}, codes.NotFound},
		{"the same route", &api.MergeRangeRequest{LeftRouteId: 2, RightRouteId: 2}, codes.InvalidArgument},
	}
	for _, r := range refusals {
		_, err := op.MergeRange(ctx, r.req)
		if status.Code(err) != r.code || !errors.Is(err, client.ErrNotApplied) {
			t.Fatalf("%s: %v, want %v, not applied", r.name, err, r.code)
		}
	}
	if after := c.waitBusinessConverged(10 * time.Second); after != before {
		t.Fatal("a refused merge changed the replicated state")
	}

	id := requestID()
	req := &api.MergeRangeRequest{LeftRouteId: 2, RightRouteId: 4, ExpectedVersion: proto.Uint64(3), RequestId: id, Actor: "olga's runbook"}
	resp, err := op.MergeRange(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	m := resp.GetMerged()
	if resp.GetCatalogVersion() != 4 || m.GetRouteId() != 6 || len(m.GetStart()) != 0 || string(m.GetEnd()) != "t" ||
		m.GetMergedFromLeft() != 2 || m.GetMergedFromRight() != 4 || m.GetMergedAtHlc() != resp.GetCommitHlc() || m.GetParentRouteId() != 0 {
		t.Fatalf("merge answered %v", resp)
	}
	again, err := op.MergeRange(ctx, req)
	if err != nil || !proto.Equal(again, resp) {
		t.Fatalf("retried request id answered %v, %v; first answer %v", again, err, resp)
	}

	testutil.WaitFor(t, 10*time.Second, "the watcher at version 4", func() bool { return w.at(4) != nil })
	d := w.at(4)
	if len(d.GetRemovedRouteIds()) != 2 || d.GetRemovedRouteIds()[0] != 2 || d.GetRemovedRouteIds()[1] != 4 ||
		len(d.GetAdded()) != 1 || !proto.Equal(d.GetAdded()[0], m) || d.GetCommitHlc() != resp.GetCommitHlc() {
		t.Fatalf("watcher saw %v", d)
	}

	c.waitConverged(10 * time.Second)
	for _, n := range c.running() {
		st := n.FSM().State()
		got, ok := st.Catalog().Route(6)
		if st.Catalog().Version() != 4 || !ok || !proto.Equal(got.ToProto(), m) {
			t.Fatalf("%s: catalog version %d, route 6 %v", n.ID(), st.Catalog().Version(), got)
		}
		if _, ok := st.Catalog().Route(2); ok {
			t.Fatalf("%s: parent r2 still live", n.ID())
		}
	}
	var found *api.Decision
	for _, dd := range c.leaderNode().FSM().State().Decisions() {
		if dd.GetKind() == api.DecisionKind_DECISION_KIND_MANUAL_MERGE {
			if found != nil {
				t.Fatal("two merge decisions for one merge")
			}
			found = dd
		}
	}
	if found == nil || found.GetActor() != "olga" || found.GetNote() != "olga's runbook" || found.GetRouteId() != 2 {
		t.Fatalf("merge decision %v: want actor olga, note olga's runbook", found)
	}

	// A reader may not merge.
	rita, err := client.New(client.Config{Endpoints: c.endpoints(), TLS: clientTLS(t, "rita", "reader")})
	if err != nil {
		t.Fatal(err)
	}
	defer rita.Close()
	if _, err := rita.MergeRange(ctx, &api.MergeRangeRequest{LeftRouteId: 6, RightRouteId: 5}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a reader's merge: %v, want PermissionDenied", err)
	}
}
