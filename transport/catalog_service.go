package transport

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
)

type catalogServer struct {
	api.UnimplementedCatalogServer
	s *Server
}

// pageTokenVersion prefixes page tokens so their format can change.
const pageTokenVersion = 0x01

func (c *catalogServer) ListRoutes(ctx context.Context, req *api.ListRoutesRequest) (*api.ListRoutesResponse, error) {
	size := int(req.GetPageSize())
	switch {
	case size == 0:
		size = defaultPageSize
	case size > maxPageSize:
		return nil, invalid("page_size: %d exceeds the limit of %d", size, maxPageSize)
	}
	var from []byte
	if tok := req.GetPageToken(); len(tok) > 0 {
		if tok[0] != pageTokenVersion || len(tok) > 1+catalog.MaxBoundaryLen {
			return nil, invalid("page_token: not a token this server issued")
		}
		from = tok[1:]
	}
	if !c.s.unsafeLocalRead() {
		if resp, handled, err := forwardRead(ctx, c.s, req.GetConsistency(), func(ctx context.Context, cc *grpc.ClientConn) (*api.ListRoutesResponse, error) {
			return api.NewCatalogClient(cc).ListRoutes(ctx, req)
		}); handled {
			return resp, err
		}
	}
	st, info, err := c.s.readState(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	if !st.Bootstrapped() {
		return nil, unavailable(nil, "cluster not bootstrapped yet")
	}
	cat := st.Catalog()
	resp := &api.ListRoutesResponse{Read: info, RouteCount: uint64(cat.Len())}
	cat.AscendFrom(from, func(r *catalog.RouteDescriptor) bool {
		if len(resp.Routes) == size {
			resp.NextPageToken = append([]byte{pageTokenVersion}, r.Start...)
			return false
		}
		resp.Routes = append(resp.Routes, r.ToProto())
		return true
	})
	return resp, nil
}

func (c *catalogServer) GetRoute(ctx context.Context, req *api.GetRouteRequest) (*api.GetRouteResponse, error) {
	// The empty key is a key (the first route starts at it) and looks the
	// same on the wire as no key: route_id 0 means "by key".
	byKey := req.GetRouteId() == 0
	if !byKey && len(req.GetKey()) > 0 {
		return nil, invalid("key and route_id: set one, not both")
	}
	if err := checkDataKey("key", req.GetKey()); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardRead(ctx, c.s, req.GetConsistency(), func(ctx context.Context, cc *grpc.ClientConn) (*api.GetRouteResponse, error) {
		return api.NewCatalogClient(cc).GetRoute(ctx, req)
	}); handled {
		return resp, err
	}
	st, info, err := c.s.readState(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	if !st.Bootstrapped() {
		return nil, unavailable(nil, "cluster not bootstrapped yet")
	}
	var r *catalog.RouteDescriptor
	if byKey {
		r = st.Catalog().Lookup(req.GetKey())
	} else if found, ok := st.Catalog().Route(req.GetRouteId()); ok {
		r = found
	} else {
		fate, _ := st.RouteFate(req.GetRouteId())
		return nil, statusNotFound("%s", fate)
	}
	return &api.GetRouteResponse{Route: r.ToProto(), Read: info}, nil
}

func (c *catalogServer) SplitRange(ctx context.Context, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
	if req.GetRouteId() == 0 {
		return nil, invalid("route_id: must be set (route ids start at 1)")
	}
	if err := checkSplitKey("split_key", req.GetSplitKey()); err != nil {
		return nil, err
	}
	if err := checkMutationMeta(req.GetRequestId(), req.GetActor()); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardWrite(ctx, c.s, req.GetRequestId(), func(ctx context.Context, cc *grpc.ClientConn) (*api.SplitRangeResponse, error) {
		return api.NewCatalogClient(cc).SplitRange(ctx, req)
	}); handled {
		return resp, err
	}
	actor, note := c.s.actor(ctx, req.GetActor())
	res, err := c.s.propose(ctx, &api.Command{RequestId: req.GetRequestId(), Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{
		RouteId: req.GetRouteId(), SplitKey: req.GetSplitKey(), ExpectedVersion: req.ExpectedVersion, Actor: actor, Note: note,
	}}})
	if err != nil {
		return nil, withRouteFate(err, c.s.cfg.FSM.State(), req.GetRequestId(), req.GetRouteId())
	}
	resp := &api.SplitRangeResponse{CatalogVersion: res.GetCatalogVersion(), CommitHlc: res.GetCommitHlc()}
	if ch := res.GetChildren(); len(ch) == 2 {
		resp.Left, resp.Right = ch[0], ch[1]
	}
	return resp, nil
}

// MergeRange joins two adjacent routes by hand (feature fsm.ManualMerge).
// Malformed requests are InvalidArgument here; the leader refuses below
// the feature's cluster version before proposing (FailedPrecondition),
// because a member that cannot apply a merge would halt on its entry; the
// FSM's refusals map as resultError says (an unknown route NotFound, a
// stale expected_version, routes not adjacent, in different groups, not
// ACTIVE or in a live op FailedPrecondition).
func (c *catalogServer) MergeRange(ctx context.Context, req *api.MergeRangeRequest) (*api.MergeRangeResponse, error) {
	left, right := req.GetLeftRouteId(), req.GetRightRouteId()
	switch {
	case left == 0:
		return nil, invalid("left_route_id: must be set (route ids start at 1)")
	case right == 0:
		return nil, invalid("right_route_id: must be set (route ids start at 1)")
	case left == right:
		return nil, invalid("right_route_id: %d is left_route_id too; a route merges with its neighbour", right)
	}
	if err := checkMutationMeta(req.GetRequestId(), req.GetActor()); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardWrite(ctx, c.s, req.GetRequestId(), func(ctx context.Context, cc *grpc.ClientConn) (*api.MergeRangeResponse, error) {
		return api.NewCatalogClient(cc).MergeRange(ctx, req)
	}); handled {
		return resp, err
	}
	if err := featureGate(c.s.cfg.FSM.State(), clusterversion.ManualMerge, "merge", req.GetRequestId()); err != nil {
		return nil, err
	}
	actor, note := c.s.actor(ctx, req.GetActor())
	res, err := c.s.propose(ctx, &api.Command{MinVersion: clusterversion.ManualMerge.Version(), RequestId: req.GetRequestId(),
		Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{
			LeftRouteId: left, RightRouteId: right, ExpectedVersion: req.ExpectedVersion, Actor: actor, Note: note,
		}}})
	if err != nil {
		return nil, withRouteFate(err, c.s.cfg.FSM.State(), req.GetRequestId(), left, right)
	}
	resp := &api.MergeRangeResponse{CatalogVersion: res.GetCatalogVersion(), CommitHlc: res.GetCommitHlc()}
	if ch := res.GetChildren(); len(ch) == 1 {
		resp.Merged = ch[0]
	}
	return resp, nil
}

// withRouteFate words the FSM's NotFound refusal of a command on routes
// (the refusal is in the log, its replicated message terse) as what became
// of the first of ids that is gone — the answer routes get and explain
// give too. Other errors pass unchanged.
func withRouteFate(err error, st *fsm.State, requestID string, ids ...uint64) error {
	if status.Code(err) != codes.NotFound {
		return err
	}
	for _, id := range ids {
		if fate, gone := st.RouteFate(id); gone {
			return statusWith(codes.NotFound, api.Outcome_OUTCOME_NOT_APPLIED, requestID, nil, fate)
		}
	}
	return err
}

// featureGate refuses, on the leader and before proposing, a command whose
// feature the cluster version does not turn on yet: FailedPrecondition,
// definitely not applied, naming the feature and both versions.
func featureGate(st *fsm.State, f clusterversion.Feature, what, requestID string) error {
	if err := st.Require(f); err != nil {
		return statusWith(codes.FailedPrecondition, api.Outcome_OUTCOME_NOT_APPLIED, requestID, nil,
			fmt.Sprintf("%s: %v (a member has not been upgraded)", what, err))
	}
	return nil
}

// watchPage is how many routes go into one SnapshotPage.
const watchPage = 1000

// WatchRoutes streams every catalog change after from_version, from this
// node's own FSM. A watcher older than this node's history first gets the
// whole catalog in pages. A node that lags behind from_version sends
// nothing until it has caught up, so a client that reconnects to a lagging
// node never sees a version go backwards. A watcher whose catalog came from
// another cluster id (this cluster was restored from a backup or recovered
// since) gets a full snapshot whatever its version: the new cluster's
// versions may be below what it has seen.
func (c *catalogServer) WatchRoutes(req *api.WatchRoutesRequest, stream grpc.ServerStreamingServer[api.WatchRoutesResponse]) error {
	ctx := stream.Context()
	from := req.GetFromVersion()
	resync := req.GetClusterId() != ""
	for {
		changed := c.s.cfg.FSM.Changed() // before State, so no publish is missed
		st := c.s.cfg.FSM.State()
		if st.Bootstrapped() {
			cat := st.Catalog()
			if resync {
				resync = false
				if req.GetClusterId() != st.ClusterID() {
					from = 0
				}
			}
			if cur := cat.Version(); from < cur {
				deltas, ok := st.History().Since(from)
				if from == 0 || !ok {
					if err := sendSnapshot(stream, cat, st.ClusterID()); err != nil {
						return err
					}
					from = cur
				} else {
					for _, d := range deltas {
						if err := stream.Send(&api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_Delta{Delta: d.ToProto()}}); err != nil {
							return err
						}
						from = d.Version
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		}
	}
}

func sendSnapshot(stream grpc.ServerStreamingServer[api.WatchRoutesResponse], cat *catalog.Catalog, clusterID string) error {
	page := &api.SnapshotPage{Version: cat.Version(), NextRouteId: cat.NextRouteID(), ClusterId: clusterID}
	var err error
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		page.Routes = append(page.Routes, r.ToProto())
		if len(page.Routes) == watchPage {
			err = stream.Send(&api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_SnapshotPage{SnapshotPage: page}})
			page = &api.SnapshotPage{Version: cat.Version(), NextRouteId: cat.NextRouteID(), ClusterId: clusterID}
		}
		return err == nil
	})
	if err != nil {
		return err
	}
	page.Last = true
	return stream.Send(&api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_SnapshotPage{SnapshotPage: page}})
}

func (c *catalogServer) GetTimestamp(ctx context.Context, req *api.GetTimestampRequest) (*api.GetTimestampResponse, error) {
	n := req.GetCount()
	switch {
	case n == 0:
		n = 1
	case n > maxTimestamps:
		return nil, invalid("count: %d exceeds the limit of %d", n, maxTimestamps)
	}
	if resp, handled, err := forwardRead(ctx, c.s, api.Consistency_CONSISTENCY_LINEARIZABLE, func(ctx context.Context, cc *grpc.ClientConn) (*api.GetTimestampResponse, error) {
		return api.NewCatalogClient(cc).GetTimestamp(ctx, req)
	}); handled {
		return resp, err
	}
	first, err := c.s.cfg.Sched.Timestamps(ctx, uint64(n))
	if err != nil {
		return nil, unavailable(c.s.leaderHint(), "timestamps: %v", err)
	}
	return &api.GetTimestampResponse{First: first, Count: n}, nil
}
