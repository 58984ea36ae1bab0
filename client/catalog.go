package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// maxListRestarts bounds how often ListAllRoutes starts over because the
// catalog changed between its pages.
const maxListRestarts = 8

// ListRoutes returns one page of routes. It is a read: retried on
// Unavailable and on unreachable endpoints.
func (c *Client) ListRoutes(ctx context.Context, req *api.ListRoutesRequest) (*api.ListRoutesResponse, error) {
	return invoke(ctx, c, call{name: "ListRoutes"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.ListRoutesResponse, error) {
		return api.NewCatalogClient(cc).ListRoutes(ctx, req)
	})
}

// GetRoute returns the route holding req.Key, or the route req.RouteId.
func (c *Client) GetRoute(ctx context.Context, req *api.GetRouteRequest) (*api.GetRouteResponse, error) {
	return invoke(ctx, c, call{name: "GetRoute"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.GetRouteResponse, error) {
		return api.NewCatalogClient(cc).GetRoute(ctx, req)
	})
}

// SplitRange splits a route by hand. A request id is generated when
// req.RequestId is empty and kept across retries; Config.Actor fills an
// empty actor. req itself is not modified.
func (c *Client) SplitRange(ctx context.Context, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId = orNewRequestID(req.RequestId)
	req.Actor = c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "SplitRange", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.SplitRangeResponse, error) {
			return api.NewCatalogClient(cc).SplitRange(ctx, req)
		})
}

// MergeRange joins two adjacent routes by hand (cluster version 3): the
// left route (the one that ends where the other starts), then the right.
// A request id is generated when req.RequestId is empty and kept across
// retries, so a retry after an unknown outcome returns the first answer;
// Config.Actor fills an empty actor. req itself is not modified.
func (c *Client) MergeRange(ctx context.Context, req *api.MergeRangeRequest) (*api.MergeRangeResponse, error) {
	req = proto.CloneOf(req)
	req.RequestId = orNewRequestID(req.RequestId)
	req.Actor = c.orActor(req.Actor)
	return invoke(ctx, c, call{name: "MergeRange", mutation: true, requestID: req.RequestId},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.MergeRangeResponse, error) {
			return api.NewCatalogClient(cc).MergeRange(ctx, req)
		})
}

// GetTimestamp returns a batch of fenced HLC timestamps. Issuing changes no
// replicated state, so it is retried like a read.
func (c *Client) GetTimestamp(ctx context.Context, req *api.GetTimestampRequest) (*api.GetTimestampResponse, error) {
	return invoke(ctx, c, call{name: "GetTimestamp"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.GetTimestampResponse, error) {
		return api.NewCatalogClient(cc).GetTimestamp(ctx, req)
	})
}

// ListAllRoutes follows ListRoutes pages to the end and returns every route
// of one catalog version, shaped as a single ListRoutesResponse (no page
// token; Read from the last page). When the version changes between pages
// it starts over, at most a bounded number of times, then fails with
// ErrCatalogChanging.
func (c *Client) ListAllRoutes(ctx context.Context, consistency api.Consistency) (*api.ListRoutesResponse, error) {
	var lastVersions [2]uint64
	for range maxListRestarts {
		all, err := c.listOnce(ctx, consistency)
		if err == nil {
			return all, nil
		}
		vc, ok := err.(versionChange)
		if !ok {
			return nil, err
		}
		lastVersions = [2]uint64{vc.from, vc.to}
		c.log.Debug("catalog changed while listing; starting over", "catalog_version", vc.to, "from_version", vc.from)
	}
	return nil, fmt.Errorf("%w (%d attempts; last saw version %d then %d)", ErrCatalogChanging, maxListRestarts, lastVersions[0], lastVersions[1])
}

// versionChange is listOnce's signal that the pages it got span versions.
type versionChange struct{ from, to uint64 }

func (v versionChange) Error() string {
	return fmt.Sprintf("catalog version changed from %d to %d between pages", v.from, v.to)
}

func (c *Client) listOnce(ctx context.Context, consistency api.Consistency) (*api.ListRoutesResponse, error) {
	var (
		routes  []*api.RouteDescriptor
		token   []byte
		version uint64
	)
	for page := 0; ; page++ {
		resp, err := c.ListRoutes(ctx, &api.ListRoutesRequest{Consistency: consistency, PageToken: token})
		if err != nil {
			return nil, err
		}
		v := resp.GetRead().GetCatalogVersion()
		if page == 0 {
			version = v
		} else if v != version {
			return nil, versionChange{version, v}
		}
		routes = append(routes, resp.GetRoutes()...)
		n := resp.GetRouteCount()
		if n != 0 && uint64(len(routes)) > n {
			return nil, fmt.Errorf("%w: ListRoutes returned %d routes, more than its route_count %d", ErrProtocol, len(routes), n)
		}
		if len(resp.GetNextPageToken()) == 0 {
			if n != 0 && uint64(len(routes)) != n {
				return nil, fmt.Errorf("%w: ListRoutes pages held %d routes, route_count says %d", ErrProtocol, len(routes), n)
			}
			return &api.ListRoutesResponse{Routes: routes, Read: resp.GetRead(), RouteCount: uint64(len(routes))}, nil
		}
		if len(resp.GetRoutes()) == 0 {
			// A page without routes but with a next token makes no
			// progress; following it could go on forever.
			return nil, fmt.Errorf("%w: ListRoutes page %d is empty but has a next page token", ErrProtocol, page)
		}
		token = resp.GetNextPageToken()
	}
}

func orNewRequestID(id string) string {
	if id == "" {
		return NewRequestID()
	}
	return id
}

func (c *Client) orActor(actor string) string {
	if actor == "" {
		return c.actor
	}
	return actor
}
