package transport

import (
	"context"
	"log/slog"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/scheduler"
)

// RaftView is the part of *raft.Raft the servers read or steer directly.
type RaftView interface {
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	State() raft.RaftState
	CurrentTerm() uint64
	CommitIndex() uint64
	GetConfiguration() raft.ConfigurationFuture
	LeadershipTransfer() raft.Future
	LeadershipTransferToServer(id raft.ServerID, address raft.ServerAddress) raft.Future
}

// Config configures the servers of one node.
type Config struct {
	NodeID string
	FSM    *fsm.FSM
	Sched  *scheduler.Scheduler
	Raft   RaftView
	// Peers are the connections to other nodes that forwarding uses (nil:
	// a Peers without dial options, for servers that never forward). The
	// server does not close them: their owner does, after the server
	// stopped.
	Peers *Peers
	// ForwardTimeout bounds every forwarded call, whatever the caller's
	// deadline (default DefaultForwardTimeout): a follower answers its
	// client before the client's own attempt deadline, with what it knows
	// of the leader by then. A forward is also abandoned as soon as this
	// node learns of another leader (NoteLeaderChange).
	ForwardTimeout time.Duration
	// ForwardDialTimeout bounds the wait for a connection to the leader
	// before a forward counts as not sent (default DefaultForwardDialTimeout).
	ForwardDialTimeout time.Duration
	// Loads receives Load.Report calls on the leader; nil answers
	// Unimplemented.
	Loads   LoadSink
	Logger  *slog.Logger
	Metrics *Metrics

	// Auth authenticates callers; nil runs the node insecure (every caller
	// anonymous, nothing refused).
	Auth *Authenticator
	// IsMember reports whether a node id is a current member, whose node
	// certificate may forward calls on behalf of the callers it
	// authenticated (default: the FSM's member table).
	IsMember func(id string) bool
	// Limits bound connections, streams, report bytes and per-identity
	// rates (zero fields: the defaults).
	Limits Limits
	// Health is this node's view of its peers; nil answers Cluster.Health
	// with Unimplemented and adds no health to other answers.
	Health HealthSource
	// CommittedConfiguration is the latest raft configuration this node
	// knows committed (its index and server ids), for Progress; nil: raft's
	// latest, committed or not, at index 0.
	CommittedConfiguration func() (uint64, []string)
	// UILogin mints browser logins to this node's page (Cluster.
	// MintUILogin); nil answers Unimplemented.
	UILogin UILogin
}

// LoadSink takes load reports on the leader (the column aggregator,
// columns.Aggregator.Take): Take validates and merges an encoded
// ReportRequest and returns the wait for its answer; once Take has
// returned the bytes are no longer needed.
type LoadSink interface {
	Take(ctx context.Context, report []byte) (func(context.Context) (*api.ReportResponse, error), error)
}

// Server implements the four hotsplit.v1 services for one node.
type Server struct {
	cfg    Config
	log    *slog.Logger
	fwd    *forwarder
	leader leaderWatch
	auth   *Authenticator
	codec  *requestCodec
	lim    Limits
	limits *limiters
	budget *reportBudget
}

// New returns the servers of one node; register them with Register.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = DefaultForwardTimeout
	}
	if cfg.ForwardDialTimeout <= 0 {
		cfg.ForwardDialTimeout = DefaultForwardDialTimeout
	}
	auth := cfg.Auth
	if auth == nil {
		auth = &Authenticator{Insecure: true}
	}
	if cfg.Peers == nil {
		cfg.Peers = NewPeers(cfg.NodeID)
	}
	lim := cfg.Limits.WithDefaults()
	return &Server{cfg: cfg, log: cfg.Logger, fwd: cfg.Peers.fwd, auth: auth, codec: newRequestCodec(),
		lim: lim, limits: newLimiters(*lim.Rate), budget: &reportBudget{limit: lim.ReportBudgetBytes}}
}

// ServerOptions are the gRPC server options every node's server needs: the
// request codec, the limits, and the interceptors that admit each call.
func (s *Server) ServerOptions() []grpc.ServerOption {
	return append(s.limitOptions(),
		grpc.ForceServerCodecV2(s.codec),
		grpc.ChainUnaryInterceptor(s.UnaryInterceptor()),
		grpc.ChainStreamInterceptor(s.StreamInterceptor()),
	)
}

// Register adds the services to g.
func (s *Server) Register(g *grpc.Server) {
	api.RegisterCatalogServer(g, &catalogServer{s: s})
	api.RegisterLoadServer(g, &loadServer{s: s})
	api.RegisterAutoSplitServer(g, &autoSplitServer{s: s})
	api.RegisterClusterServer(g, &clusterServer{s: s})
}

// forwardedKey marks a request that already made its one hop.
const forwardedKey = "hotsplit-forwarded"

func isForwarded(ctx context.Context) bool {
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

// leaderHint names the leader as this node sees it; empty when unknown or
// when the leader's gRPC address is not in the member table yet.
func (s *Server) leaderHint() *api.LeaderHint {
	_, id := s.cfg.Raft.LeaderWithID()
	if id == "" {
		return nil
	}
	hint := &api.LeaderHint{LeaderId: string(id)}
	if m, ok := s.cfg.FSM.State().Member(string(id)); ok {
		hint.LeaderGrpcAddr = m.GrpcAddr
	}
	return hint
}

// route decides where a leader-only request is served: here (nil hint, nil
// error), or forwarded to the returned leader. It refuses a second hop.
func (s *Server) route(ctx context.Context) (*api.LeaderHint, error) {
	if s.cfg.Sched.IsReady() {
		return nil, nil
	}
	if s.awaitLeader(ctx) {
		return nil, nil
	}
	hint := s.leaderHint()
	if s.cfg.Raft.State() == raft.Leader {
		return nil, unavailable(hint, "leader %s is establishing its fence; retry shortly", s.cfg.NodeID)
	}
	if hint == nil || hint.LeaderGrpcAddr == "" || hint.LeaderId == s.cfg.NodeID {
		return nil, unavailable(hint, "no known leader at node %s", s.cfg.NodeID)
	}
	if isForwarded(ctx) {
		return nil, unavailable(hint, "node %s is not the leader; already forwarded once", s.cfg.NodeID)
	}
	return hint, nil
}

// Holding a request through an election (awaitLeader).
const (
	// electionHold bounds how long a request waits for a leader to be
	// known, or for this new leader's fence, before it is answered
	// Unavailable: about one election.
	electionHold = time.Second
	// holdMargin is left of the caller's deadline, so a held request is
	// answered (definitely) before its client gives up on it (which would
	// make a mutation's outcome unknown).
	holdMargin = 150 * time.Millisecond
)

// awaitLeader holds a request while no leader is known, or while this node
// leads but has not established its fence, until either changes, for at
// most electionHold and never past the caller's deadline less holdMargin.
// It reports whether this node is now ready to serve it itself. Without
// the hold, a client polls through the election and finds the new leader
// a backoff late; with it, the request goes on the moment there is one.
func (s *Server) awaitLeader(ctx context.Context) bool {
	deadline := time.Now().Add(electionHold)
	if dl, ok := ctx.Deadline(); ok && dl.Add(-holdMargin).Before(deadline) {
		deadline = dl.Add(-holdMargin)
	}
	for {
		changed := s.leader.changed() // before the checks, so no change is missed
		ready := s.cfg.Sched.Ready()  // nil unless this node leads
		if s.cfg.Sched.IsReady() {
			return true
		}
		if ready == nil {
			if h := s.leaderHint(); h != nil && h.LeaderGrpcAddr != "" && h.LeaderId != s.cfg.NodeID {
				return false // a leader to forward to
			}
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return false
		}
		if ready == nil && s.cfg.Raft.State() == raft.Leader {
			// raft made this node leader; the scheduler starts the term
			// on its own notification, a moment later: look again soon.
			wait = min(wait, 5*time.Millisecond)
		}
		t := time.NewTimer(wait)
		select {
		case <-changed:
		case <-ready:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil {
			return false
		}
	}
}

// readState answers the read path of docs/design.md#interfaces: stale reads from the local
// FSM; linearizable reads (on the leader, which route has established) wait
// for the read index.
func (s *Server) readState(ctx context.Context, c api.Consistency) (*fsm.State, *api.ReadInfo, error) {
	if c == api.Consistency_CONSISTENCY_STALE || s.unsafeLocalRead() {
		st := s.cfg.FSM.State()
		return st, s.readInfo(st, c), nil
	}
	idx, err := s.cfg.Sched.ReadIndex(ctx)
	if err != nil {
		return nil, nil, unavailable(s.leaderHint(), "linearizable read: %v", err)
	}
	st, err := s.cfg.FSM.WaitIndex(ctx, idx)
	if err != nil {
		return nil, nil, unavailable(s.leaderHint(), "linearizable read: waiting for index %d: %v", idx, err)
	}
	return st, s.readInfo(st, c), nil
}

func (s *Server) readInfo(st *fsm.State, c api.Consistency) *api.ReadInfo {
	info := &api.ReadInfo{AppliedIndex: st.Index(), ServedBy: s.cfg.NodeID, Consistency: c}
	if st.Bootstrapped() {
		info.CatalogVersion = st.Catalog().Version()
	}
	return info
}

// propose runs a command through the single proposer and maps failures.
func (s *Server) propose(ctx context.Context, cmd *api.Command) (*api.CommandResult, error) {
	requestID := cmd.RequestId
	res, err := s.cfg.Sched.Proposer().Propose(ctx, cmd)
	if err != nil {
		return nil, proposalError(err, requestID, s.leaderHint())
	}
	if err := resultError(res.CommandResult, requestID); err != nil {
		return nil, err
	}
	return res.CommandResult, nil
}

// forwardRead forwards a linearizable read when this node cannot serve it;
// handled is false when the caller should serve it here.
func forwardRead[Resp any](ctx context.Context, s *Server, c api.Consistency, call func(ctx context.Context, cc *grpc.ClientConn) (Resp, error)) (resp Resp, handled bool, err error) {
	if c != api.Consistency_CONSISTENCY_LINEARIZABLE {
		return resp, false, nil
	}
	hint, err := s.route(ctx)
	if err != nil {
		return resp, true, err
	}
	if hint == nil {
		return resp, false, nil
	}
	resp, err = forward(ctx, s, hint, false, "", call)
	return resp, true, err
}

// forwardWrite forwards a leader-only mutation when this node cannot serve
// it; handled is false when the caller should serve it here. A failure of
// the hop itself after sending is an unknown outcome.
func forwardWrite[Resp any](ctx context.Context, s *Server, requestID string, call func(ctx context.Context, cc *grpc.ClientConn) (Resp, error)) (resp Resp, handled bool, err error) {
	return forwardWriteHop(ctx, s, requestID, hopOptions{}, call)
}

// forwardLeadership is forwardWrite for the calls that move leadership on
// purpose (TransferLeadership, Remove of the leader): the leader change they
// cause must not abandon them, and they may take an election timeout plus
// the time to learn the new leader.
func forwardLeadership[Resp any](ctx context.Context, s *Server, call func(ctx context.Context, cc *grpc.ClientConn) (Resp, error)) (resp Resp, handled bool, err error) {
	return forwardWriteHop(ctx, s, "", hopOptions{keepOnLeaderChange: true, timeout: leadershipForwardTimeout}, call)
}

func forwardWriteHop[Resp any](ctx context.Context, s *Server, requestID string, o hopOptions, call func(ctx context.Context, cc *grpc.ClientConn) (Resp, error)) (resp Resp, handled bool, err error) {
	hint, err := s.route(ctx)
	if err != nil {
		return resp, true, err
	}
	if hint == nil {
		return resp, false, nil
	}
	resp, err = forwardHop(ctx, s, hint, true, requestID, o, call)
	return resp, true, err
}
