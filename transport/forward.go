package transport

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Forwarding bounds (Config.ForwardTimeout, Config.ForwardDialTimeout).
const (
	// DefaultForwardTimeout bounds one forwarded call: longer than any
	// healthy leader needs (a commit, a read-index round), shorter than a
	// client's --timeout so the follower can still answer with a hint.
	DefaultForwardTimeout = 3 * time.Second
	// DefaultForwardDialTimeout bounds the wait for a connection to the
	// leader; a paused leader accepts TCP but never completes the handshake.
	DefaultForwardDialTimeout = 500 * time.Millisecond
)

// peerConnectParams reconnect to a restarted peer within a second instead
// of gRPC's default backoff of up to two minutes: a node that comes back as
// the leader must be reachable for forwarding at once.
var peerConnectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: DefaultForwardDialTimeout,
}

// forwarder keeps one client connection per peer gRPC address; the set is
// bounded by the cluster size.
type forwarder struct {
	opts []grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

func newForwarder(opts []grpc.DialOption) *forwarder {
	opts = append(append([]grpc.DialOption(nil), opts...), grpc.WithConnectParams(peerConnectParams))
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

// waitReady waits, at most d, until cc is READY. A connection that is not
// ready has sent nothing, so a forward that gives up here is definite.
func waitReady(ctx context.Context, cc *grpc.ClientConn, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			cc.Connect()
		case connectivity.TransientFailure:
			cc.ResetConnectBackoff()
		case connectivity.Shutdown:
			return errors.New("connection closed")
		}
		if !cc.WaitForStateChange(ctx, s) {
			return fmt.Errorf("no connection within %v (state %s)", d, s)
		}
	}
}

// leaderWatch wakes forwards when this node learns of a leader change.
type leaderWatch struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced on every change
}

func (w *leaderWatch) changed() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *leaderWatch) note() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
	}
	w.ch = make(chan struct{})
}

// NoteLeaderChange tells the server that raft's view of the leader
// changed (the node calls it on every leader observation): forwards to a
// leader this node no longer believes in are abandoned at once, so their
// clients learn the new leader instead of waiting out their deadline.
func (s *Server) NoteLeaderChange() { s.leader.note() }

// errAbandoned: the forward's leader is no longer this node's leader.
var errAbandoned = errors.New("abandoned: a newer leader is known")

// forward sends one request to the leader named by hint, marked as
// forwarded so the leader never forwards it again. Statuses from the leader
// pass through unchanged. Failures of the hop itself: for reads and for
// calls that never left this node (no connection within the dial bound),
// definite; for mutations sent, unknown, since the leader may have received
// the request. The hop is bounded by ForwardTimeout and abandoned when this
// node learns of another leader; the answer then carries the new hint.
func forward[Resp any](ctx context.Context, s *Server, hint *api.LeaderHint, mutation bool, requestID string, call func(ctx context.Context, cc *grpc.ClientConn) (Resp, error)) (Resp, error) {
	return forwardHop(ctx, s, hint, mutation, requestID, hopOptions{}, call)
}

// hopOptions adjust one forward: keepOnLeaderChange for calls that change
// leadership themselves, timeout to replace ForwardTimeout when longer.
type hopOptions struct {
	keepOnLeaderChange bool
	timeout            time.Duration
}

// leadershipForwardTimeout bounds a forwarded leadership change: raft's
// transfer timeout (an election timeout) plus the time to learn the leader.
const leadershipForwardTimeout = 10 * time.Second

func forwardHop[Resp any](ctx context.Context, s *Server, hint *api.LeaderHint, mutation bool, requestID string, o hopOptions, call func(ctx context.Context, cc *grpc.ClientConn) (Resp, error)) (Resp, error) {
	var zero Resp
	changed := s.leader.changed() // before the check, so no change is missed
	if !s.stillLeader(hint) {
		return zero, unavailable(s.leaderHint(), "node %s no longer believes %s leads", s.cfg.NodeID, hint.LeaderId)
	}
	cc, err := s.fwd.conn(hint.LeaderGrpcAddr)
	if err != nil {
		return zero, unavailable(nil, "%v", err)
	}
	timeout := max(s.cfg.ForwardTimeout, o.timeout)
	if dl, ok := ctx.Deadline(); ok {
		// Answer before the caller gives up: a client that times out an
		// attempt learns nothing (and suspects this node, not the leader).
		timeout = max(min(timeout, time.Until(dl)-holdMargin), time.Millisecond)
	}
	ctx, abandon := context.WithCancelCause(ctx)
	defer abandon(nil)
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("no answer within %v", timeout))
	defer cancel()
	if !o.keepOnLeaderChange {
		go s.abandonOnLeaderChange(ctx, hint, changed, abandon)
	}
	if err := waitReady(ctx, cc, s.cfg.ForwardDialTimeout); err != nil {
		// Nothing was sent. Do not hint at a leader this node cannot reach.
		return zero, unavailable(s.freshHint(hint), "leader %s at %s unreachable from %s: %v", hint.LeaderId, hint.LeaderGrpcAddr, s.cfg.NodeID, err)
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
	why := st.Message()
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		<-ctx.Done() // gRPC's own deadline timer may beat the context's
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		why = cause.Error()
	}
	if !mutation {
		return zero, unavailable(s.freshHint(hint), "forwarding to leader %s: %s", hint.LeaderId, why)
	}
	return zero, statusWith(codes.Unknown, api.Outcome_OUTCOME_UNKNOWN, requestID, s.freshHint(hint), fmt.Sprintf("forwarding to leader %s failed after sending: %s", hint.LeaderId, why))
}

// stillLeader reports whether this node still believes hint's leader leads.
func (s *Server) stillLeader(hint *api.LeaderHint) bool {
	_, id := s.cfg.Raft.LeaderWithID()
	return string(id) == hint.LeaderId
}

// freshHint is the hint to hand back after a failed hop: this node's
// current leader if it changed, none if it is still the one that failed.
func (s *Server) freshHint(old *api.LeaderHint) *api.LeaderHint {
	h := s.leaderHint()
	if h == nil || h.LeaderId == old.LeaderId {
		return nil
	}
	return h
}

// abandonOnLeaderChange cancels the forward (cause errAbandoned) once this
// node knows another leader than hint's; it returns when ctx ends. Losing
// track of the leader (this node became a candidate) is not enough: the old
// leader may be alive and about to answer.
func (s *Server) abandonOnLeaderChange(ctx context.Context, hint *api.LeaderHint, changed <-chan struct{}, abandon context.CancelCauseFunc) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changed:
			changed = s.leader.changed()
			if _, id := s.cfg.Raft.LeaderWithID(); id != "" && string(id) != hint.LeaderId {
				abandon(fmt.Errorf("%w (this node now sees leader %q)", errAbandoned, id))
				return
			}
		}
	}
}

func hasOutcome(st *status.Status) bool {
	for _, d := range st.Details() {
		if _, ok := d.(*api.ErrorOutcome); ok {
			return true
		}
	}
	return false
}
