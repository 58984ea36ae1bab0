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
