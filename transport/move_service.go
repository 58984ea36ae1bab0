package transport

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// The move RPCs of the Catalog service (feature RangeMoves,
// docs/design.md#moves). Both are refused by the leader below version 4
// before they are proposed; Apply's refusals map as resultError says (an
// acknowledgement from a node of another group PermissionDenied, one the
// move does not wait for FailedPrecondition, naming the op, the step and
// what was expected).

// MoveRange begins an operator's move of a route to another group.
func (c *catalogServer) MoveRange(ctx context.Context, req *api.MoveRangeRequest) (*api.MoveRangeResponse, error) {
	switch {
	case req.GetRouteId() == 0:
		return nil, invalid("route_id: must be set (route ids start at 1)")
	case req.GetTargetGroupId() == 0:
		return nil, invalid("target_group_id: must be set")
	}
	if err := checkMutationMeta(req.GetRequestId(), req.GetActor()); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardWrite(ctx, c.s, req.GetRequestId(), func(ctx context.Context, cc *grpc.ClientConn) (*api.MoveRangeResponse, error) {
		return api.NewCatalogClient(cc).MoveRange(ctx, req)
	}); handled {
		return resp, err
	}
	if err := featureGate(c.s.cfg.FSM.State(), clusterversion.RangeMoves, "move", req.GetRequestId()); err != nil {
		return nil, err
	}
	actor, note := c.s.actor(ctx, req.GetActor())
	res, err := c.s.propose(ctx, &api.Command{MinVersion: clusterversion.RangeMoves.Version(), RequestId: req.GetRequestId(),
		Body: &api.Command_MoveRange{MoveRange: &api.MoveRange{
			RouteId: req.GetRouteId(), TargetGroupId: req.GetTargetGroupId(), ExpectedVersion: req.ExpectedVersion, Actor: actor, Note: note,
		}}})
	if err != nil {
		return nil, withRouteFate(err, c.s.cfg.FSM.State(), req.GetRequestId(), req.GetRouteId())
	}
	resp := &api.MoveRangeResponse{OpId: res.GetOpId(), CatalogVersion: res.GetCatalogVersion(), CommitHlc: res.GetCommitHlc(), Op: res.GetOp()}
	if ch := res.GetChildren(); len(ch) == 1 {
		resp.Route = ch[0]
	}
	return resp, nil
}

// AckMove records a data node's acknowledgement of a move's step. With
// TLS the identity is the caller's certificate name; an insecure node
// takes the declared one.
func (c *catalogServer) AckMove(ctx context.Context, req *api.AckMoveRequest) (*api.AckMoveResponse, error) {
	switch {
	case req.GetOpId() == 0:
		return nil, invalid("op_id: must be set")
	case req.GetRouteId() == 0:
		return nil, invalid("route_id: must be set (route ids start at 1)")
	case req.GetAck() == api.MoveAck_MOVE_ACK_UNSPECIFIED:
		return nil, invalid("ack: must be COPIED, FENCED or CAUGHT_UP")
	}
	if err := checkMutationMeta(req.GetRequestId(), req.GetIdentity()); err != nil {
		return nil, err
	}
	identity := req.GetIdentity()
	if p, ok := PrincipalFrom(ctx); ok && p != insecurePrincipal && p.Name != "" {
		if identity != "" && identity != p.Name {
			return nil, statusWith(codes.PermissionDenied, api.Outcome_OUTCOME_NOT_APPLIED, req.GetRequestId(), nil,
				"identity: "+identity+" declared, but the caller is "+p.Name)
		}
		identity = p.Name
	}
	if identity == "" {
		return nil, invalid("identity: must be set on an insecure node")
	}
	if resp, handled, err := forwardWrite(ctx, c.s, req.GetRequestId(), func(ctx context.Context, cc *grpc.ClientConn) (*api.AckMoveResponse, error) {
		// The leader learns the caller's identity from the forwarded
		// principal, as it learns an actor's.
		return api.NewCatalogClient(cc).AckMove(ctx, req)
	}); handled {
		return resp, err
	}
	if err := featureGate(c.s.cfg.FSM.State(), clusterversion.RangeMoves, "move acknowledgement", req.GetRequestId()); err != nil {
		return nil, err
	}
	res, err := c.s.propose(ctx, &api.Command{MinVersion: clusterversion.RangeMoves.Version(), RequestId: req.GetRequestId(),
		Body: &api.Command_AckMove{AckMove: &api.AckMove{
			OpId: req.GetOpId(), RouteId: req.GetRouteId(), CatalogVersion: req.GetCatalogVersion(), Ack: req.GetAck(),
			Watermark: req.GetWatermark(), Identity: identity,
		}}})
	if err != nil {
		return nil, err
	}
	return &api.AckMoveResponse{Op: res.GetOp(), Duplicate: res.GetMessage() != ""}, nil
}
