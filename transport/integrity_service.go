package transport

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/scheduler"
)

// The node-to-node integrity calls of the Cluster service (docs/design.md#trust-and-integrity): the
// clock-offset ping and the state-hash report, and the operator's state
// check that uses them.

// ClockPing answers with this node's physical clock; never forwarded (the
// caller measures this very node).
func (c *clusterServer) ClockPing(_ context.Context, req *api.ClockPingRequest) (*api.ClockPingResponse, error) {
	if err := checkText("from_node_id", req.GetFromNodeId(), api.MaxNodeIDLen); err != nil {
		return nil, err
	}
	return &api.ClockPingResponse{NodeId: c.s.cfg.NodeID, PhysicalMs: int64(c.s.cfg.Sched.Clock().PhysicalNow())}, nil
}

// StateHash answers with this node's state hash at a CheckState marker's
// index, waiting (bounded by the caller's deadline) until it has applied it.
func (c *clusterServer) StateHash(ctx context.Context, req *api.StateHashRequest) (*api.StateHashResponse, error) {
	if req.GetIndex() == 0 {
		return nil, invalid("index: must be set")
	}
	checks := c.s.cfg.Sched.StateChecks()
	if checks == nil {
		return nil, statusWith(codes.Unimplemented, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, "this node runs no state checker")
	}
	rep, err := checks.Report(ctx, req.GetIndex())
	if err != nil {
		return nil, unavailable(nil, "state hash at index %d: %v", req.GetIndex(), err)
	}
	return &api.StateHashResponse{Report: rep}, nil
}

// CheckState runs the cross-replica state check on the leader.
func (c *clusterServer) CheckState(ctx context.Context, req *api.CheckStateRequest) (*api.CheckStateResponse, error) {
	if err := checkText("actor", req.GetActor(), maxActorLen); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardWrite(ctx, c.s, "", func(ctx context.Context, cc *grpc.ClientConn) (*api.CheckStateResponse, error) {
		return api.NewClusterClient(cc).CheckState(ctx, req)
	}); handled {
		return resp, err
	}
	actor, _ := actorOf(ctx, req.GetActor())
	resp, err := c.s.cfg.Sched.CheckState(ctx, actor)
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, clusterversion.ErrVersionTooLow):
		return nil, statusWith(codes.FailedPrecondition, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, err.Error())
	case errors.Is(err, scheduler.ErrNoVerdict):
		// The marker committed; only the verdict is missing.
		return nil, statusWith(codes.DeadlineExceeded, api.Outcome_OUTCOME_UNKNOWN, "", nil, err.Error())
	}
	return nil, proposalError(err, "", c.s.leaderHint())
}
