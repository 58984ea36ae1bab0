//go:build jepsen

package jepsen

import (
	"bytes"
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/model"
)

// mergePairs lists the adjacent pairs of routes the worker believes exist
// that it may merge: one group, both ACTIVE, and a shared boundary that is
// a manual key (so the workload never joins the routes that bound the
// simulator's key space in the automatic-split scenario).
func mergePairs(routes []*api.RouteDescriptor) [][2]*api.RouteDescriptor {
	var out [][2]*api.RouteDescriptor
	for i := 0; i+1 < len(routes); i++ {
		l, r := routes[i], routes[i+1]
		if l.GetGroupId() == r.GetGroupId() && l.GetState() == api.RouteState_ROUTE_STATE_ACTIVE &&
			r.GetState() == api.RouteState_ROUTE_STATE_ACTIVE && manualBoundary(r.GetStart()) && bytes.Equal(l.GetEnd(), r.GetStart()) {
			out = append(out, [2]*api.RouteDescriptor{l, r})
		}
	}
	return out
}

// manualBoundary reports whether b is one of the manual workload's keys.
func manualBoundary(b []byte) bool {
	if len(b) != len(manualPrefix)+6 || !bytes.HasPrefix(b, []byte(manualPrefix)) {
		return false
	}
	for _, c := range b[len(manualPrefix):] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// merge merges an adjacent pair of the worker's last read with CAS on the
// version it last saw (one below it for StaleCAS percent of merges, none
// for MergeNoCAS percent), reading first when it has no view or no pair to
// merge.
func (k *worker) merge(ctx context.Context) {
	pairs := mergePairs(k.routes)
	if k.routes == nil || len(pairs) == 0 {
		k.read(ctx)
		return
	}
	pair := pairs[k.rng.IntN(len(pairs))]
	if k.rng.IntN(100) < k.spec.Mix.MergeNoCAS {
		k.sendMerge(ctx, pair, nil)
		return
	}
	expected := k.version
	if k.rng.IntN(100) < k.spec.Mix.StaleCAS && expected > model.InitialVersion {
		expected--
	}
	k.sendMerge(ctx, pair, &expected)
}

// staleMerge is the sequence that exposes a merge that ignores its
// expected version: read the catalog (version v), split a route outside an
// adjacent pair, then merge the pair with expected_version v. Once the
// split applied, v is stale and the FSM must refuse the merge; if another
// worker's change came in between, it is stale all the same. The split is
// sent with CAS on v like any other.
func (k *worker) staleMerge(ctx context.Context) {
	k.read(ctx)
	pairs := mergePairs(k.routes)
	if k.routes == nil || len(pairs) == 0 {
		return
	}
	v := k.version
	pair := pairs[k.rng.IntN(len(pairs))]
	var others []*api.RouteDescriptor
	for _, r := range k.routes {
		if _, _, ok := keysInside(r); ok && r.GetRouteId() != pair[0].GetRouteId() && r.GetRouteId() != pair[1].GetRouteId() {
			others = append(others, r)
		}
	}
	if len(others) > 0 && len(k.routes) < k.w.maxRoute {
		k.splitRoute(ctx, others[k.rng.IntN(len(others))], v)
	}
	k.sendMerge(ctx, pair, &v)
}

// sendMerge merges pair, with CAS on *expected unless it is nil.
func (k *worker) sendMerge(ctx context.Context, pair [2]*api.RouteDescriptor, expected *uint64) {
	left, right := pair[0].GetRouteId(), pair[1].GetRouteId()
	rid := client.NewRequestID()
	op := history.Op{Client: k.id, Kind: history.Merge, Call: k.w.rec.Now(), RequestID: rid, RouteID: left, RightRouteID: right, ExpectedVersion: expected}
	resp, err := k.cl.MergeRange(ctx, &api.MergeRangeRequest{LeftRouteId: left, RightRouteId: right, ExpectedVersion: expected, RequestId: rid})
	switch {
	case err == nil:
		op.Version, op.MergedID, op.CommitHLC = resp.GetCatalogVersion(), resp.GetMerged().GetRouteId(), resp.GetCommitHlc()
		k.learnMerge(left, right, resp)
	case status.Code(err) == codes.FailedPrecondition || status.Code(err) == codes.NotFound:
		k.routes = nil // stale: read before the next change
	}
	k.finish(op, err, true)
}

// learnMerge updates the worker's catalog with its own merge, if the
// worker's view was the version the merge replaced.
func (k *worker) learnMerge(left, right uint64, resp *api.MergeRangeResponse) {
	if resp.GetCatalogVersion() != k.version+1 || resp.GetMerged() == nil {
		k.routes = nil
		return
	}
	routes := make([]*api.RouteDescriptor, 0, len(k.routes))
	for _, r := range k.routes {
		switch r.GetRouteId() {
		case left:
			routes = append(routes, resp.GetMerged())
		case right:
		default:
			routes = append(routes, r)
		}
	}
	k.version, k.routes = resp.GetCatalogVersion(), routes
}
