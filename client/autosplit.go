package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Status returns the automatic-splitting status (a read).
func (c *Client) Status(ctx context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	return invoke(ctx, c, call{name: "Status"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.StatusResponse, error) {
		return api.NewAutoSplitClient(cc).Status(ctx, req)
	})
}

// SetEnabled turns automatic splitting on or off (a mutation; request id and
// actor filled in as for SplitRange).
func (c *Client) SetEnabled(ctx context.Context, req *api.SetEnabledRequest) (*api.SetEnabledResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId = orNewRequestID(req.RequestId)
	req.Actor = c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "SetEnabled", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.SetEnabledResponse, error) {
			return api.NewAutoSplitClient(cc).SetEnabled(ctx, req)
		})
}

// Explain returns why a route was or was not split (a read).
func (c *Client) Explain(ctx context.Context, req *api.ExplainRequest) (*api.ExplainResponse, error) {
	return invoke(ctx, c, call{name: "Explain"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.ExplainResponse, error) {
		return api.NewAutoSplitClient(cc).Explain(ctx, req)
	})
}

// GetConfig returns the replicated detector and load config (a read).
func (c *Client) GetConfig(ctx context.Context, req *api.GetConfigRequest) (*api.GetConfigResponse, error) {
	return invoke(ctx, c, call{name: "GetConfig"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.GetConfigResponse, error) {
		return api.NewAutoSplitClient(cc).GetConfig(ctx, req)
	})
}

// SetConfig changes the fields set in req.Patch (a mutation).
func (c *Client) SetConfig(ctx context.Context, req *api.SetConfigRequest) (*api.SetConfigResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId = orNewRequestID(req.RequestId)
	req.Actor = c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "SetConfig", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.SetConfigResponse, error) {
			return api.NewAutoSplitClient(cc).SetConfig(ctx, req)
		})
}

// AbortOp cancels a live split operation (a mutation).
func (c *Client) AbortOp(ctx context.Context, req *api.AbortOpRequest) (*api.AbortOpResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId = orNewRequestID(req.RequestId)
	req.Actor = c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "AbortOp", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.AbortOpResponse, error) {
			return api.NewAutoSplitClient(cc).AbortOp(ctx, req)
		})
}
