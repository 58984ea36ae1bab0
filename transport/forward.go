package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// forwarder keeps one client connection per peer gRPC address; the set is
// bounded by the cluster size.
type forwarder struct {
	opts []grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newForwarder(opts []grpc.DialOption) *forwarder {
	return &forwarder{opts: opts, conns: make(map[string]*grpc.ClientConn)}
}

func (f *forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, f.opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to leader %s: %w", addr, err)
	}
	f.conns[addr] = c
	return c, nil
}

func (f *forwarder) close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for addr, c := range f.conns {
		errs = append(errs, c.Close())
		delete(f.conns, addr)
	}
	return errors.Join(errs...)
}

// forward sends one request to the leader named by hint, marked as
// forwarded so the leader never forwards it again. Statuses from the leader
// pass through unchanged. Failures of the hop itself: for reads and for
// calls that never left this node, definite; for mutations, unknown, since
// the leader may have received the request.
func forward[Resp any](ctx context.Context, s *Server, hint *api.LeaderHint, mutation bool, requestID string, call func(ctx context.Context, cc *grpc.ClientConn) (Resp, error)) (Resp, error) {
	var zero Resp
	cc, err := s.fwd.conn(hint.LeaderGrpcAddr)
	if err != nil {
		return zero, unavailable(hint, "%v", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ForwardTimeout)
		defer cancel()
	}
	ctx = metadata.AppendToOutgoingContext(ctx, forwardedKey, s.cfg.NodeID)
	if p, ok := PrincipalFrom(ctx); ok && p != insecurePrincipal {
		ctx = metadata.AppendToOutgoingContext(ctx, principalHeader, encodePrincipal(p))
	}
	resp, err := call(ctx, cc)
	if err == nil {
		return resp, nil
	}
	st, _ := status.FromError(err)
	if hasOutcome(st) || st.Code() != codes.Unavailable && st.Code() != codes.DeadlineExceeded && st.Code() != codes.Canceled && st.Code() != codes.Unknown {
		return zero, err // the leader's own answer
	}
	if !mutation {
		return zero, unavailable(hint, "forwarding to leader %s: %v", hint.LeaderId, st.Message())
	}
	return zero, statusWith(codes.Unknown, api.Outcome_OUTCOME_UNKNOWN, requestID, hint, fmt.Sprintf("forwarding to leader %s failed after sending: %v", hint.LeaderId, st.Message()))
}

func hasOutcome(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*api.ErrorOutcome); ok {
			return true
		}
	}
	return false
}
