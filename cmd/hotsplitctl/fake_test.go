package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// fakeCluster is one in-process gRPC server on 127.0.0.1:0 answering every
// RPC with the canned response in resp (or the error in errs), and recording
// each request.
type fakeCluster struct {
	api.UnimplementedCatalogServer
	api.UnimplementedAutoSplitServer
	api.UnimplementedClusterServer

	addr string

	mu    sync.Mutex
	resp  map[string]proto.Message // by method name
	errs  map[string]error
	reqs  map[string][]proto.Message
	pages []*api.ListRoutesResponse // ListRoutes answers, by page token index
	watch []*api.WatchRoutesResponse
}

func startCluster(t *testing.T) *fakeCluster {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeCluster{
		addr: lis.Addr().String(),
		resp: map[string]proto.Message{},
		errs: map[string]error{},
		reqs: map[string][]proto.Message{},
	}
	s := grpc.NewServer(testServerCreds(t))
	api.RegisterCatalogServer(s, f)
	api.RegisterAutoSplitServer(s, f)
	api.RegisterClusterServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return f
}

func (f *fakeCluster) set(method string, m proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resp[method] = m
}

func (f *fakeCluster) fail(method string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.errs[method] = err
}

// last returns the last request of method, or nil.
func (f *fakeCluster) last(method string) proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	rs := f.reqs[method]
	if len(rs) == 0 {
		return nil
	}
	return rs[len(rs)-1]
}

func (f *fakeCluster) calls(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs[method])
}

// answer records req and returns the canned response for method.
func answer[T proto.Message](f *fakeCluster, method string, req proto.Message) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs[method] = append(f.reqs[method], proto.Clone(req))
	var zero T
	if err := f.errs[method]; err != nil {
		return zero, err
	}
	m, ok := f.resp[method]
	if !ok {
		return zero, nil
	}
	return proto.Clone(m).(T), nil
}

func (f *fakeCluster) MergeRange(_ context.Context, req *api.MergeRangeRequest) (*api.MergeRangeResponse, error) {
	return answer[*api.MergeRangeResponse](f, "MergeRange", req)
}

func (f *fakeCluster) ListGroups(_ context.Context, req *api.ListGroupsRequest) (*api.ListGroupsResponse, error) {
	return answer[*api.ListGroupsResponse](f, "ListGroups", req)
}

func (f *fakeCluster) AddGroup(_ context.Context, req *api.AddGroupRequest) (*api.GroupResponse, error) {
	return answer[*api.GroupResponse](f, "AddGroup", req)
}

func (f *fakeCluster) SetGroup(_ context.Context, req *api.SetGroupRequest) (*api.GroupResponse, error) {
	return answer[*api.GroupResponse](f, "SetGroup", req)
}

func (f *fakeCluster) MoveRange(_ context.Context, req *api.MoveRangeRequest) (*api.MoveRangeResponse, error) {
	return answer[*api.MoveRangeResponse](f, "MoveRange", req)
}

func (f *fakeCluster) RemoveGroup(_ context.Context, req *api.RemoveGroupRequest) (*api.GroupResponse, error) {
	return answer[*api.GroupResponse](f, "RemoveGroup", req)
}

func (f *fakeCluster) ListRoutes(_ context.Context, req *api.ListRoutesRequest) (*api.ListRoutesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs["ListRoutes"] = append(f.reqs["ListRoutes"], proto.Clone(req))
	if err := f.errs["ListRoutes"]; err != nil {
		return nil, err
	}
	i := 0
	if len(req.GetPageToken()) > 0 {
		i = int(req.GetPageToken()[0])
	}
	return proto.Clone(f.pages[i]).(*api.ListRoutesResponse), nil
}

func (f *fakeCluster) GetRoute(_ context.Context, req *api.GetRouteRequest) (*api.GetRouteResponse, error) {
	return answer[*api.GetRouteResponse](f, "GetRoute", req)
}

func (f *fakeCluster) SplitRange(_ context.Context, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
	return answer[*api.SplitRangeResponse](f, "SplitRange", req)
}

func (f *fakeCluster) WatchRoutes(req *api.WatchRoutesRequest, s grpc.ServerStreamingServer[api.WatchRoutesResponse]) error {
	f.mu.Lock()
	f.reqs["WatchRoutes"] = append(f.reqs["WatchRoutes"], proto.Clone(req))
	evs := f.watch
	f.mu.Unlock()
	for _, ev := range evs {
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	<-s.Context().Done()
	return nil
}

// Status answers a request for an older page of decisions with the
// response set as "Status@SEQ", if any.
func (f *fakeCluster) Status(_ context.Context, req *api.StatusRequest) (*api.StatusResponse, error) {
	if b := req.GetDecisionsBeforeSeq(); b != 0 {
		return answer[*api.StatusResponse](f, fmt.Sprintf("Status@%d", b), req)
	}
	return answer[*api.StatusResponse](f, "Status", req)
}

func (f *fakeCluster) SetEnabled(_ context.Context, req *api.SetEnabledRequest) (*api.SetEnabledResponse, error) {
	return answer[*api.SetEnabledResponse](f, "SetEnabled", req)
}

func (f *fakeCluster) Explain(_ context.Context, req *api.ExplainRequest) (*api.ExplainResponse, error) {
	return answer[*api.ExplainResponse](f, "Explain", req)
}

func (f *fakeCluster) GetConfig(_ context.Context, req *api.GetConfigRequest) (*api.GetConfigResponse, error) {
	return answer[*api.GetConfigResponse](f, "GetConfig", req)
}

func (f *fakeCluster) SetConfig(_ context.Context, req *api.SetConfigRequest) (*api.SetConfigResponse, error) {
	return answer[*api.SetConfigResponse](f, "SetConfig", req)
}

func (f *fakeCluster) AbortOp(_ context.Context, req *api.AbortOpRequest) (*api.AbortOpResponse, error) {
	return answer[*api.AbortOpResponse](f, "AbortOp", req)
}

func (f *fakeCluster) Join(_ context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	return answer[*api.JoinResponse](f, "Join", req)
}

func (f *fakeCluster) Remove(_ context.Context, req *api.RemoveRequest) (*api.RemoveResponse, error) {
	return answer[*api.RemoveResponse](f, "Remove", req)
}

func (f *fakeCluster) Members(_ context.Context, req *api.MembersRequest) (*api.MembersResponse, error) {
	return answer[*api.MembersResponse](f, "Members", req)
}

func (f *fakeCluster) Leader(_ context.Context, req *api.LeaderRequest) (*api.LeaderResponse, error) {
	return answer[*api.LeaderResponse](f, "Leader", req)
}

func (f *fakeCluster) Admit(_ context.Context, req *api.AdmitRequest) (*api.AdmitResponse, error) {
	return answer[*api.AdmitResponse](f, "Admit", req)
}

func (f *fakeCluster) TransferLeadership(_ context.Context, req *api.TransferLeadershipRequest) (*api.TransferLeadershipResponse, error) {
	return answer[*api.TransferLeadershipResponse](f, "TransferLeadership", req)
}

func (f *fakeCluster) CheckState(_ context.Context, req *api.CheckStateRequest) (*api.CheckStateResponse, error) {
	return answer[*api.CheckStateResponse](f, "CheckState", req)
}

func (f *fakeCluster) MintUILogin(_ context.Context, req *api.MintUILoginRequest) (*api.MintUILoginResponse, error) {
	return answer[*api.MintUILoginResponse](f, "MintUILogin", req)
}

// result is one run of the CLI.
type result struct {
	code           int
	stdout, stderr string
}

var testEnv = env{
	getenv: func(k string) string {
		switch k {
		case "USER":
			return "alice"
		case "HOTSPLIT_CACERT":
			return testCerts.ca
		case "HOTSPLIT_CERT":
			return testCerts.cert
		case "HOTSPLIT_KEY":
			return testCerts.key
		}
		return ""
	},
	hostname: func() (string, error) { return "ops1", nil },
}

// ctl runs hotsplitctl against f with args.
func ctl(t *testing.T, f *fakeCluster, args ...string) result {
	t.Helper()
	return ctlCtx(t, context.Background(), f, args...)
}

func ctlCtx(t *testing.T, ctx context.Context, f *fakeCluster, args ...string) result {
	t.Helper()
	var out, errOut testutil.LogBuffer
	if f != nil {
		args = append([]string{"--endpoints", f.addr, "--timeout", "5s"}, args...)
	}
	code := run(ctx, args, testEnv, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// lines joins golden lines with newlines (and a final one).
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
