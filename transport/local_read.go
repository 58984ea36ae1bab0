package transport

import (
	"context"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
)

// The read path for callers inside this process (the key visualizer's
// page): stale reads of this node's own applied state, answered as the
// gRPC services answer CONSISTENCY_STALE. They authenticate nothing; the
// caller has.

// LocalRead returns this node's applied state and the ReadInfo a stale
// read of it carries.
func (s *Server) LocalRead() (*fsm.State, *api.ReadInfo) {
	st := s.cfg.FSM.State()
	return st, s.readInfo(st, api.Consistency_CONSISTENCY_STALE)
}

// Explain answers AutoSplit.Explain about routeID from this node's own
// state, with the gRPC status errors the service returns (NotFound for a
// route never created, Unavailable before bootstrap).
func (s *Server) Explain(ctx context.Context, routeID uint64) (*api.ExplainResponse, error) {
	return (&autoSplitServer{s: s}).Explain(ctx, &api.ExplainRequest{RouteId: routeID, Consistency: api.Consistency_CONSISTENCY_STALE})
}

// NowMs is this node's physical HLC reading in ms.
func (s *Server) NowMs() uint64 { return s.nowMs() }
