package transport

import (
	"context"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// PeerAppliedIndex asks the node at grpcAddr for its own applied index (a
// stale read answered from its FSM), for promoting caught-up non-voters.
func (s *Server) PeerAppliedIndex(ctx context.Context, grpcAddr string) (uint64, error) {
	cc, err := s.fwd.conn(grpcAddr)
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
func (s *Server) Probe(ctx context.Context, grpcAddr string) (*api.ProgressResponse, error) {
	cc, err := s.fwd.conn(grpcAddr)
	if err != nil {
		return nil, err
	}
	resp, err := api.NewClusterClient(cc).Progress(ctx, &api.ProgressRequest{FromNodeId: s.cfg.NodeID})
	if err != nil {
		return nil, fmt.Errorf("progress of %s: %w", grpcAddr, err)
	}
	return resp, nil
}
