package transport

import (
	"context"
	"fmt"

	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Peers is this node's client side towards the other members: one gRPC
// connection per peer address (the set is bounded by the cluster size),
// shared by forwarding to the leader and by the node-to-node calls of the
// leader duties and the health monitor. It is built from the node's dial
// options before any of its users, so each of them gets it at
// construction. Safe for concurrent use; Close it after its users stopped.
type Peers struct {
	self string
	fwd  *forwarder
}

// NewPeers returns the peer connections of node self, dialled with opts
// (the node's dialer and credentials).
func NewPeers(self string, opts ...grpc.DialOption) *Peers {
	return &Peers{self: self, fwd: newForwarder(opts)}
}

// Close releases the connections.
func (p *Peers) Close() error { return p.fwd.close() }

// AppliedIndex asks the node at grpcAddr for its own applied index (a
// stale read answered from its FSM), for promoting caught-up non-voters.
func (p *Peers) AppliedIndex(ctx context.Context, grpcAddr string) (uint64, error) {
	cc, err := p.fwd.conn(grpcAddr)
	if err != nil {
		return 0, err
	}
	resp, err := api.NewClusterClient(cc).Members(ctx, &api.MembersRequest{Consistency: api.Consistency_CONSISTENCY_STALE})
	if err != nil {
		return 0, fmt.Errorf("progress of %s: %w", grpcAddr, err)
	}
	return resp.GetRead().GetAppliedIndex(), nil
}

// Probe asks the member at grpcAddr for its progress (the health
// monitor's probe; node role).
func (p *Peers) Probe(ctx context.Context, grpcAddr string) (*api.ProgressResponse, error) {
	cc, err := p.fwd.conn(grpcAddr)
	if err != nil {
		return nil, err
	}
	resp, err := api.NewClusterClient(cc).Progress(ctx, &api.ProgressRequest{FromNodeId: p.self})
	if err != nil {
		return nil, fmt.Errorf("progress of %s: %w", grpcAddr, err)
	}
	return resp, nil
}

// ClockPing reads the physical clock of the node at grpcAddr.
func (p *Peers) ClockPing(ctx context.Context, grpcAddr string) (int64, error) {
	cc, err := p.fwd.conn(grpcAddr)
	if err != nil {
		return 0, err
	}
	resp, err := api.NewClusterClient(cc).ClockPing(ctx, &api.ClockPingRequest{FromNodeId: p.self})
	if err != nil {
		return 0, fmt.Errorf("clock ping of %s: %w", grpcAddr, err)
	}
	return resp.GetPhysicalMs(), nil
}

// StateHash asks the node at grpcAddr for its state hash at index.
func (p *Peers) StateHash(ctx context.Context, grpcAddr string, index uint64) (*api.StateReport, error) {
	cc, err := p.fwd.conn(grpcAddr)
	if err != nil {
		return nil, err
	}
	resp, err := api.NewClusterClient(cc).StateHash(ctx, &api.StateHashRequest{Index: index})
	if err != nil {
		return nil, fmt.Errorf("state hash of %s at index %d: %w", grpcAddr, index, err)
	}
	return resp.GetReport(), nil
}
