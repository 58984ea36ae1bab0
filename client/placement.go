package client

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// ListGroups returns the shard groups (cluster version 4) with the number
// of routes each serves. It is a read.
func (c *Client) ListGroups(ctx context.Context, req *api.ListGroupsRequest) (*api.ListGroupsResponse, error) {
	return invoke(ctx, c, call{name: "ListGroups"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.ListGroupsResponse, error) {
		return api.NewCatalogClient(cc).ListGroups(ctx, req)
	})
}

// AddGroup creates a shard group (cluster version 4). Like every mutation
// here, a request id is generated when req.RequestId is empty and kept
// across retries; Config.Actor fills an empty actor; req itself is not
// modified.
func (c *Client) AddGroup(ctx context.Context, req *api.AddGroupRequest) (*api.GroupResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId, req.Actor = orNewRequestID(req.RequestId), c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "AddGroup", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.GroupResponse, error) {
			return api.NewCatalogClient(cc).AddGroup(ctx, req)
		})
}

// SetGroup changes a shard group's name, capacity, state or identities.
func (c *Client) SetGroup(ctx context.Context, req *api.SetGroupRequest) (*api.GroupResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId, req.Actor = orNewRequestID(req.RequestId), c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "SetGroup", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.GroupResponse, error) {
			return api.NewCatalogClient(cc).SetGroup(ctx, req)
		})
}

// RemoveGroup deletes a shard group that serves no route.
func (c *Client) RemoveGroup(ctx context.Context, req *api.RemoveGroupRequest) (*api.GroupResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId, req.Actor = orNewRequestID(req.RequestId), c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "RemoveGroup", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.GroupResponse, error) {
			return api.NewCatalogClient(cc).RemoveGroup(ctx, req)
		})
}

// MoveRange begins an operator's move of a route to another shard group
// (cluster version 4); the leader takes it through its steps as the data
// plane acknowledges them.
func (c *Client) MoveRange(ctx context.Context, req *api.MoveRangeRequest) (*api.MoveRangeResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId, req.Actor = orNewRequestID(req.RequestId), c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "MoveRange", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.MoveRangeResponse, error) {
			return api.NewCatalogClient(cc).MoveRange(ctx, req)
		})
}

// AckMove sends a data node's acknowledgement of a move's step. A repeat
// changes nothing, so it is retried like any mutation.
func (c *Client) AckMove(ctx context.Context, req *api.AckMoveRequest) (*api.AckMoveResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId = orNewRequestID(req.RequestId)
	return invoke(ctx, c, call{name: "AckMove", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.AckMoveResponse, error) {
			return api.NewCatalogClient(cc).AckMove(ctx, req)
		})
}
