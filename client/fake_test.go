package client

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// fakeNode is an in-process gRPC server on 127.0.0.1:0 whose answers are
// scripted by the test through the hook fields (set before first use).
type fakeNode struct {
	api.UnimplementedCatalogServer
	api.UnimplementedAutoSplitServer
	api.UnimplementedClusterServer
	api.UnimplementedLoadServer

	addr string

	split  func(n int, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error)
	merge  func(n int, req *api.MergeRangeRequest) (*api.MergeRangeResponse, error)
	list   func(n int, req *api.ListRoutesRequest) (*api.ListRoutesResponse, error)
	get    func(n int, req *api.GetRouteRequest) (*api.GetRouteResponse, error)
	watch  func(n int, req *api.WatchRoutesRequest, s grpc.ServerStreamingServer[api.WatchRoutesResponse]) error
	report func(n int, req *api.ReportRequest) (*api.ReportResponse, error)
	// creds serve TLS when set; the default is plaintext.
	creds credentials.TransportCredentials
	// accepts counts the TCP connections the server accepted.
	accepts atomic.Int32

	mu       sync.Mutex
	auth     []string // "authorization" metadata seen, in order
	peerCN   []string // verified client certificate CN per call ("" without one)
	calls    map[string]int
	headerID []string // RequestIDHeader metadata seen, in order
	splits   []*api.SplitRangeRequest
	merges   []*api.MergeRangeRequest
}

func startFake(t *testing.T, f *fakeNode) *fakeNode { return startFakeB(t, f) }

func startFakeB(t testing.TB, f *fakeNode) *fakeNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	f.calls = map[string]int{}
	lis = countingListener{lis, &f.accepts}
	var opts []grpc.ServerOption
	if f.creds != nil {
		opts = append(opts, grpc.Creds(f.creds))
	}
	s := grpc.NewServer(opts...)
	api.RegisterCatalogServer(s, f)
	api.RegisterAutoSplitServer(s, f)
	api.RegisterClusterServer(s, f)
	api.RegisterLoadServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return f
}

// countingListener counts the connections it accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// count records a call and returns its 1-based number for this method.
func (f *fakeNode) count(ctx context.Context, method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		f.headerID = append(f.headerID, md.Get(RequestIDHeader)...)
		f.auth = append(f.auth, md.Get("authorization")...)
	}
	cn := ""
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			cn = ti.State.VerifiedChains[0][0].Subject.CommonName
		}
	}
	f.peerCN = append(f.peerCN, cn)
	return f.calls[method]
}

func (f *fakeNode) called(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fakeNode) SplitRange(ctx context.Context, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
	n := f.count(ctx, "SplitRange")
	f.mu.Lock()
	f.splits = append(f.splits, req)
	f.mu.Unlock()
	if f.split == nil {
		return nil, status.Error(codes.Unimplemented, "no split hook")
	}
	return f.split(n, req)
}

func (f *fakeNode) MergeRange(ctx context.Context, req *api.MergeRangeRequest) (*api.MergeRangeResponse, error) {
	n := f.count(ctx, "MergeRange")
	f.mu.Lock()
	f.merges = append(f.merges, req)
	f.mu.Unlock()
	if f.merge == nil {
		return nil, status.Error(codes.Unimplemented, "no merge hook")
	}
	return f.merge(n, req)
}

func (f *fakeNode) ListRoutes(ctx context.Context, req *api.ListRoutesRequest) (*api.ListRoutesResponse, error) {
	n := f.count(ctx, "ListRoutes")
	if f.list == nil {
		return nil, status.Error(codes.Unimplemented, "no list hook")
	}
	return f.list(n, req)
}

func (f *fakeNode) GetRoute(ctx context.Context, req *api.GetRouteRequest) (*api.GetRouteResponse, error) {
	n := f.count(ctx, "GetRoute")
	if f.get == nil {
		return nil, status.Error(codes.Unimplemented, "no get hook")
	}
	return f.get(n, req)
}

func (f *fakeNode) WatchRoutes(req *api.WatchRoutesRequest, s grpc.ServerStreamingServer[api.WatchRoutesResponse]) error {
	n := f.count(s.Context(), "WatchRoutes")
	if f.watch == nil {
		return status.Error(codes.Unimplemented, "no watch hook")
	}
	return f.watch(n, req, s)
}

func (f *fakeNode) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	n := f.count(ctx, "Report")
	if f.report == nil {
		return nil, status.Error(codes.Unimplemented, "no report hook")
	}
	return f.report(n, req)
}

type protoMessage = protoadapt.MessageV1

// notLeader is the definite "not applied, go there" answer of a follower.
func notLeader(t *testing.T, leaderAddr string) error {
	t.Helper()
	details := []protoMessage{&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_NOT_APPLIED}}
	if leaderAddr != "" {
		details = append(details, &api.LeaderHint{LeaderId: "leader", LeaderGrpcAddr: leaderAddr})
	}
	return withDetails(t, codes.Unavailable, "not leader", details...)
}

func unknownOutcome(t *testing.T, reqID string) error {
	t.Helper()
	return withDetails(t, codes.Unknown, "leadership lost after enqueue",
		&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_UNKNOWN, RequestId: reqID})
}

func withDetails(t *testing.T, code codes.Code, msg string, details ...protoMessage) error {
	t.Helper()
	st := status.New(code, msg)
	for _, d := range details {
		var err error
		if st, err = st.WithDetails(d); err != nil {
			t.Fatal(err)
		}
	}
	return st.Err()
}

// testClient returns a client with fast retries, closed at the end of t.
// Without TLS settings it talks plaintext to the (plaintext) fakes.
func testClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.TLS == nil && cfg.CACertFile == "" {
		cfg.Insecure = true
	}
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func okSplit(_ int, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
	return &api.SplitRangeResponse{
		CatalogVersion: 2,
		Left:           &api.RouteDescriptor{RouteId: 2, End: req.GetSplitKey()},
		Right:          &api.RouteDescriptor{RouteId: 3, Start: req.GetSplitKey()},
	}, nil
}
