package client

import (
	"context"

	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Join adds a node to the cluster (a mutation). JoinRequest has no
// request_id field: the generated id travels only in the RequestIDHeader
// metadata and in a returned error, for logs.
func (c *Client) Join(ctx context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	return invoke(ctx, c, call{name: "Join", mutation: true, requestID: NewRequestID(), long: true},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.JoinResponse, error) {
			return api.NewClusterClient(cc).Join(ctx, req)
		})
}

// Remove removes a node from the cluster (a mutation; request id as for Join).
func (c *Client) Remove(ctx context.Context, req *api.RemoveRequest) (*api.RemoveResponse, error) {
	return invoke(ctx, c, call{name: "Remove", mutation: true, requestID: NewRequestID(), long: true},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.RemoveResponse, error) {
			return api.NewClusterClient(cc).Remove(ctx, req)
		})
}

// Members lists the cluster members (a read).
func (c *Client) Members(ctx context.Context, req *api.MembersRequest) (*api.MembersResponse, error) {
	return invoke(ctx, c, call{name: "Members"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.MembersResponse, error) {
		return api.NewClusterClient(cc).Members(ctx, req)
	})
}

// Leader asks a node who it believes the leader is (a read).
func (c *Client) Leader(ctx context.Context, req *api.LeaderRequest) (*api.LeaderResponse, error) {
	return invoke(ctx, c, call{name: "Leader"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.LeaderResponse, error) {
		return api.NewClusterClient(cc).Leader(ctx, req)
	})
}

// TransferLeadership moves leadership to another voter (a mutation; request
// id as for Join).
func (c *Client) TransferLeadership(ctx context.Context, req *api.TransferLeadershipRequest) (*api.TransferLeadershipResponse, error) {
	return invoke(ctx, c, call{name: "TransferLeadership", mutation: true, requestID: NewRequestID(), long: true},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.TransferLeadershipResponse, error) {
			return api.NewClusterClient(cc).TransferLeadership(ctx, req)
		})
}

// Admit lets a node id join later from a raft address (a mutation; request
// id as for Join).
func (c *Client) Admit(ctx context.Context, req *api.AdmitRequest) (*api.AdmitResponse, error) {
	return invoke(ctx, c, call{name: "Admit", mutation: true, requestID: NewRequestID(), long: true},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.AdmitResponse, error) {
			return api.NewClusterClient(cc).Admit(ctx, req)
		})
}

// CheckState runs the cross-replica state check on the leader: it commits
// a marker and returns every member's state hash at its index (a mutation:
// it writes a log entry; request id as for Join).
func (c *Client) CheckState(ctx context.Context, req *api.CheckStateRequest) (*api.CheckStateResponse, error) {
	return invoke(ctx, c, call{name: "CheckState", mutation: true, requestID: NewRequestID()},
		func(ctx context.Context, cc grpc.ClientConnInterface) (*api.CheckStateResponse, error) {
			return api.NewClusterClient(cc).CheckState(ctx, req)
		})
}

// Health asks the answering node for its view of every member and of
// quorum (a read it answers without a leader; no retry once answered).
func (c *Client) Health(ctx context.Context, req *api.HealthRequest) (*api.HealthResponse, error) {
	return invoke(ctx, c, call{name: "Health"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.HealthResponse, error) {
		return api.NewClusterClient(cc).Health(ctx, req)
	})
}

// Version asks the answering node for its build and versions (a read).
func (c *Client) Version(ctx context.Context, req *api.VersionRequest) (*api.VersionResponse, error) {
	return invoke(ctx, c, call{name: "Version"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.VersionResponse, error) {
		return api.NewClusterClient(cc).Version(ctx, req)
	})
}

// MintUILogin asks the answering node for a one-time login URL to its key
// visualizer page (a read: nothing is replicated; the code lives in that
// node's memory and opens a reader session there only).
func (c *Client) MintUILogin(ctx context.Context, req *api.MintUILoginRequest) (*api.MintUILoginResponse, error) {
	return invoke(ctx, c, call{name: "MintUILogin"}, func(ctx context.Context, cc grpc.ClientConnInterface) (*api.MintUILoginResponse, error) {
		return api.NewClusterClient(cc).MintUILogin(ctx, req)
	})
}
