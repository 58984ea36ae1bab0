package client

import (
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// The consumer-side interfaces keyviz defines (ReportSender, RouteSource)
// and the ones the simulator and CLI rely on: *Client must keep satisfying
// them.
var (
	_ interface {
		Report(context.Context, *api.ReportRequest) (*api.ReportResponse, error)
	} = (*Client)(nil)
	_ interface {
		Watch(context.Context, uint64, func(*api.WatchRoutesResponse) error) error
	} = (*Client)(nil)
)

func TestNewNoEndpoints(t *testing.T) {
	for _, eps := range [][]string{nil, {}} {
		_, err := New(Config{Endpoints: eps})
		if !errors.Is(err, ErrNoEndpoints) {
			t.Fatalf("New(%q) = %v, want ErrNoEndpoints", eps, err)
		}
		if !strings.Contains(err.Error(), "Config.Endpoints") {
			t.Errorf("error %q does not name the field", err)
		}
	}
}

func TestNewBadEndpoints(t *testing.T) {
	bad := []struct{ ep, why string }{
		{"", "missing port"},
		{"localhost", "missing port"},
		{"127.0.0.1:", "port"},
		{":7001", "empty host"},
		{"127.0.0.1:0", "1..65535"},
		{"127.0.0.1:65536", "1..65535"},
		{"127.0.0.1:http", "not a number"},
		{"dns:///127.0.0.1:7001", "too many colons"},
		{"http://h:1", "too many colons"},
		{"h/x:1", "slash"},
		{"my host:1", "space"},
		{"::1:7001", "too many colons"},
	}
	for _, tc := range bad {
		_, err := New(Config{Endpoints: []string{"127.0.0.1:7001", tc.ep}})
		if !errors.Is(err, ErrBadEndpoint) {
			t.Errorf("New(%q) = %v, want ErrBadEndpoint", tc.ep, err)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, "Config.Endpoints[1]") || !strings.Contains(msg, `"`+tc.ep+`"`) || !strings.Contains(msg, tc.why) {
			t.Errorf("New(%q) error %q should name entry [1], its value and %q", tc.ep, msg, tc.why)
		}
	}
	good := []string{"127.0.0.1:7001", "[::1]:7001", "localhost:1", "node-3.example:65535"}
	c, err := New(Config{Endpoints: append(good, good[0]), Insecure: true})
	if err != nil {
		t.Fatalf("New(%q) = %v", good, err)
	}
	if got := c.Endpoints(); strings.Join(got, ",") != strings.Join(good, ",") {
		t.Errorf("Endpoints() = %q, want %q (duplicates dropped, order kept)", got, good)
	}
	c.Close()
}

func TestNewNegativeDurations(t *testing.T) {
	for _, cfg := range []Config{
		{DialTimeout: -1}, {RequestTimeout: -1}, {Backoff: -1},
	} {
		cfg.Endpoints = []string{"127.0.0.1:7001"}
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "negative") {
			t.Errorf("New(%+v) = %v, want a 'negative' error", cfg, err)
		}
	}
}

// Each duration of Config: zero takes its default, negative is refused,
// positive is kept (the backoff capped at MaxBackoff).
func TestNewDurationSettings(t *testing.T) {
	fields := []struct {
		name string
		set  func(*Config, time.Duration)
		get  func(*Client) time.Duration
		def  time.Duration
		hour time.Duration // what an hour becomes
	}{
		{"DialTimeout", func(c *Config, d time.Duration) { c.DialTimeout = d }, func(c *Client) time.Duration { return c.dialTimeout }, DefaultDialTimeout, time.Hour},
		{"AttemptTimeout", func(c *Config, d time.Duration) { c.AttemptTimeout = d }, func(c *Client) time.Duration { return c.attemptTimeout }, DefaultAttemptTimeout, time.Hour},
		{"RequestTimeout", func(c *Config, d time.Duration) { c.RequestTimeout = d }, func(c *Client) time.Duration { return c.requestTimeout }, DefaultRequestTimeout, time.Hour},
		{"Backoff", func(c *Config, d time.Duration) { c.Backoff = d }, func(c *Client) time.Duration { return c.backoff }, DefaultBackoff, MaxBackoff},
	}
	for _, f := range fields {
		for _, tc := range []struct {
			in, want time.Duration
			refused  bool
		}{
			{in: 0, want: f.def},
			{in: -time.Millisecond, refused: true},
			{in: 1234 * time.Millisecond, want: 1234 * time.Millisecond},
			{in: time.Hour, want: f.hour},
		} {
			cfg := Config{Endpoints: []string{"127.0.0.1:7001"}, Insecure: true}
			f.set(&cfg, tc.in)
			c, err := New(cfg)
			switch {
			case tc.refused:
				if err == nil || !strings.Contains(err.Error(), "Config."+f.name+" is negative") {
					t.Errorf("%s %v: New = %v, want a refusal naming the field", f.name, tc.in, err)
				}
			case err != nil:
				t.Errorf("%s %v: New = %v", f.name, tc.in, err)
			default:
				if got := f.get(c); got != tc.want {
					t.Errorf("%s %v: got %v, want %v", f.name, tc.in, got, tc.want)
				}
				c.Close()
			}
		}
	}
}

func TestLeaderHintFollowed(t *testing.T) {
	leader := startFake(t, &fakeNode{split: okSplit})
	follower := startFake(t, &fakeNode{split: func(int, *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
		return nil, notLeader(t, leader.addr)
	}})
	c := testClient(t, Config{Endpoints: []string{follower.addr}})
	ctx := context.Background()
	if _, err := c.SplitRange(ctx, &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if got := c.LeaderAddr(); got != leader.addr {
		t.Fatalf("LeaderAddr() = %q, want %q", got, leader.addr)
	}
	if f, l := follower.called("SplitRange"), leader.called("SplitRange"); f != 1 || l != 1 {
		t.Fatalf("calls: follower %d leader %d, want 1 and 1", f, l)
	}
	// The next call goes to the remembered leader directly.
	if _, err := c.SplitRange(ctx, &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("n")}); err != nil {
		t.Fatal(err)
	}
	if f, l := follower.called("SplitRange"), leader.called("SplitRange"); f != 1 || l != 2 {
		t.Fatalf("second call: follower %d leader %d calls, want 1 and 2", f, l)
	}
}

func TestLeaderForgottenWhenUnreachable(t *testing.T) {
	leader := startFake(t, &fakeNode{split: okSplit})
	follower := startFake(t, &fakeNode{split: func(int, *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
		return nil, notLeader(t, leader.addr)
	}})
	dead := deadAddr(t)
	c := testClient(t, Config{Endpoints: []string{follower.addr}})
	// Teach the client a leader that is gone.
	c.learnLeader(&api.LeaderHint{LeaderGrpcAddr: dead}, "test")
	if _, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if got := c.LeaderAddr(); got != leader.addr {
		t.Fatalf("LeaderAddr() = %q, want the re-learned %q", got, leader.addr)
	}
}

func TestBusyLeaderRetriedInPlace(t *testing.T) {
	other := startFake(t, &fakeNode{split: okSplit})
	leader := startFake(t, &fakeNode{})
	leader.split = func(n int, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
		if n == 1 {
			return nil, notLeader(t, leader.addr) // enqueue timeout: the hint is the leader itself
		}
		return okSplit(n, req)
	}
	c := testClient(t, Config{Endpoints: []string{leader.addr, other.addr}})
	if _, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	if l, o := leader.called("SplitRange"), other.called("SplitRange"); l != 2 || o != 0 {
		t.Fatalf("calls: leader %d other %d, want 2 and 0", l, o)
	}
	if got := c.LeaderAddr(); got != leader.addr {
		t.Fatalf("LeaderAddr() = %q, want %q", got, leader.addr)
	}
}

func TestMutationRetryPolicy(t *testing.T) {
	tests := []struct {
		name      string
		fail      func(t *testing.T, n int, req *api.SplitRangeRequest) error // nil error = succeed
		wantCalls int
		wantErr   bool
		definite  bool
		code      codes.Code
	}{
		{
			name: "not applied unavailable is retried until success",
			fail: func(t *testing.T, n int, _ *api.SplitRangeRequest) error {
				if n <= 3 {
					return notLeader(t, "")
				}
				return nil
			},
			wantCalls: 4,
		},
		{
			name: "aborted fence violation is retried",
			fail: func(t *testing.T, n int, _ *api.SplitRangeRequest) error {
				if n == 1 {
					return status.Error(codes.Aborted, "fence violation")
				}
				return nil
			},
			wantCalls: 2,
		},
		{
			name: "unknown outcome is not retried",
			fail: func(t *testing.T, _ int, req *api.SplitRangeRequest) error {
				return unknownOutcome(t, req.GetRequestId())
			},
			wantCalls: 1, wantErr: true, code: codes.Unknown,
		},
		{
			name: "server deadline is an unknown outcome",
			fail: func(*testing.T, int, *api.SplitRangeRequest) error {
				return status.Error(codes.DeadlineExceeded, "forwarding timed out")
			},
			wantCalls: 1, wantErr: true, code: codes.DeadlineExceeded,
		},
		{
			name: "unavailable without the not-applied detail is unknown",
			fail: func(*testing.T, int, *api.SplitRangeRequest) error {
				return status.Error(codes.Unavailable, "transport is closing")
			},
			wantCalls: 1, wantErr: true, code: codes.Unavailable,
		},
		{
			name: "failed precondition is definite and final",
			fail: func(*testing.T, int, *api.SplitRangeRequest) error {
				return status.Error(codes.FailedPrecondition, "catalog version mismatch: expected 4, current 5")
			},
			wantCalls: 1, wantErr: true, definite: true, code: codes.FailedPrecondition,
		},
		{
			name: "invalid argument is definite and final",
			fail: func(*testing.T, int, *api.SplitRangeRequest) error {
				return status.Error(codes.InvalidArgument, "split_key: 5000 bytes, at most 4097")
			},
			wantCalls: 1, wantErr: true, definite: true, code: codes.InvalidArgument,
		},
		{
			name: "retries are bounded by MaxRetries",
			fail: func(t *testing.T, _ int, _ *api.SplitRangeRequest) error {
				return notLeader(t, "")
			},
			wantCalls: 4, wantErr: true, definite: true, code: codes.Unavailable,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := startFake(t, &fakeNode{})
			f.split = func(n int, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
				if err := tc.fail(t, n, req); err != nil {
					return nil, err
				}
				return okSplit(n, req)
			}
			c := testClient(t, Config{Endpoints: []string{f.addr}, MaxRetries: 3, Actor: "alice@host"})
			req := &api.SplitRangeRequest{RouteId: 7, SplitKey: []byte("k")}
			_, err := c.SplitRange(context.Background(), req)
			if got := f.called("SplitRange"); got != tc.wantCalls {
				t.Errorf("server called %d times, want %d", got, tc.wantCalls)
			}
			if req.GetRequestId() != "" || req.GetActor() != "" {
				t.Errorf("caller's request was modified: %v", req)
			}
			// Every attempt carried the same, well-formed request id, in
			// the field and in the metadata, and the configured actor.
			f.mu.Lock()
			splits, headers := f.splits, f.headerID
			f.mu.Unlock()
			id := splits[0].GetRequestId()
			if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
				t.Errorf("request id %q is not 16 bytes of hex", id)
			}
			for i, s := range splits {
				if s.GetRequestId() != id || headers[i] != id || s.GetActor() != "alice@host" {
					t.Errorf("attempt %d: request id %q header %q actor %q, want %q, %q, alice@host", i+1, s.GetRequestId(), headers[i], s.GetActor(), id, id)
				}
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("SplitRange = %v, want success", err)
				}
				return
			}
			if err == nil {
				t.Fatal("SplitRange succeeded, want an error")
			}
			if IsDefinite(err) != tc.definite || errors.Is(err, ErrNotApplied) != tc.definite || errors.Is(err, ErrUnknownOutcome) == tc.definite {
				t.Errorf("error %v: definite=%v, want %v", err, IsDefinite(err), tc.definite)
			}
			if got := RequestID(err); got != id {
				t.Errorf("RequestID(err) = %q, want %q", got, id)
			}
			if st, ok := status.FromError(err); !ok || st.Code() != tc.code {
				t.Errorf("status.FromError(err) = %v, %v; want code %v", st, ok, tc.code)
			}
			var ce *Error
			if !errors.As(err, &ce) || ce.Attempts != tc.wantCalls || ce.Endpoint != f.addr {
				t.Errorf("errors.As *Error = %+v, want %d attempts at %s", ce, tc.wantCalls, f.addr)
			}
			msg := err.Error()
			wantClass := "outcome unknown"
			if tc.definite {
				wantClass = "not applied"
			}
			if !strings.Contains(msg, wantClass) || !strings.Contains(msg, id) || !strings.Contains(msg, tc.code.String()) {
				t.Errorf("error %q should say %q, the code and the request id", msg, wantClass)
			}
		})
	}
}

func TestCallerRequestIDKept(t *testing.T) {
	f := startFake(t, &fakeNode{split: okSplit})
	c := testClient(t, Config{Endpoints: []string{f.addr}, Actor: "default"})
	_, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m"), RequestId: "mine", Actor: "bob"})
	if err != nil {
		t.Fatal(err)
	}
	if s := f.splits[0]; s.GetRequestId() != "mine" || s.GetActor() != "bob" {
		t.Fatalf("sent request id %q actor %q, want mine and bob", s.GetRequestId(), s.GetActor())
	}
}

func TestUnreachableEndpointIsDefiniteAndRetried(t *testing.T) {
	live := startFake(t, &fakeNode{split: okSplit})
	c := testClient(t, Config{Endpoints: []string{deadAddr(t), live.addr}})
	if _, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")}); err != nil {
		t.Fatalf("SplitRange with one dead endpoint = %v, want success via the live one", err)
	}
	if n := live.called("SplitRange"); n != 1 {
		t.Fatalf("live endpoint called %d times, want 1", n)
	}
}

func TestAllEndpointsUnreachable(t *testing.T) {
	dead := deadAddr(t)
	c := testClient(t, Config{Endpoints: []string{dead}, MaxRetries: 2})
	_, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")})
	if !IsDefinite(err) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err = %v, want a definite Unavailable", err)
	}
	for _, want := range []string{dead, "unreachable", "connection refused", "not applied", "3 attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// Reads fail the same way, without an outcome class.
	_, err = c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("k")})
	if status.Code(err) != codes.Unavailable || IsDefinite(err) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("read err = %v, want Unavailable without an outcome class", err)
	}
}

func TestReadsRetriedOnUnavailable(t *testing.T) {
	f := startFake(t, &fakeNode{get: func(n int, _ *api.GetRouteRequest) (*api.GetRouteResponse, error) {
		if n < 3 {
			return nil, status.Error(codes.Unavailable, "no leader yet")
		}
		return &api.GetRouteResponse{Route: &api.RouteDescriptor{RouteId: 9}}, nil
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	resp, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("k")})
	if err != nil || resp.GetRoute().GetRouteId() != 9 {
		t.Fatalf("GetRoute = %v, %v", resp, err)
	}
	if n := f.called("GetRoute"); n != 3 {
		t.Fatalf("GetRoute called %d times, want 3", n)
	}
	// A business answer is not retried.
	f2 := startFake(t, &fakeNode{get: func(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) {
		return nil, status.Error(codes.InvalidArgument, "key: 5000 bytes")
	}})
	c2 := testClient(t, Config{Endpoints: []string{f2.addr}})
	if _, err := c2.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("k")}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("err = %v, want InvalidArgument", err)
	}
	if n := f2.called("GetRoute"); n != 1 {
		t.Fatalf("InvalidArgument read called %d times, want 1", n)
	}
}

func TestRequestTimeoutBoundsRetries(t *testing.T) {
	f := startFake(t, &fakeNode{split: func(int, *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
		return nil, notLeader(t, "")
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}, RequestTimeout: 200 * time.Millisecond, MaxRetries: 1 << 20, Backoff: 20 * time.Millisecond})
	start := time.Now()
	_, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")})
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("SplitRange took %v with a 200ms RequestTimeout", took)
	}
	// The deadline ends the call either during a backoff (the last answer,
	// definite, stands) or while an attempt is in flight (our own deadline
	// on a sent mutation: unknown).
	switch status.Code(err) {
	case codes.Unavailable:
		if !IsDefinite(err) {
			t.Fatalf("err = %v, want definite", err)
		}
	case codes.DeadlineExceeded:
		if !errors.Is(err, ErrUnknownOutcome) {
			t.Fatalf("err = %v, want an unknown outcome", err)
		}
	default:
		t.Fatalf("err = %v, want Unavailable or DeadlineExceeded", err)
	}
}

func TestReportFollowsHint(t *testing.T) {
	leader := startFake(t, &fakeNode{report: func(int, *api.ReportRequest) (*api.ReportResponse, error) {
		return &api.ReportResponse{AckedWindowStarts: []uint64{60000}}, nil
	}})
	follower := startFake(t, &fakeNode{report: func(int, *api.ReportRequest) (*api.ReportResponse, error) {
		return nil, notLeader(t, leader.addr)
	}})
	c := testClient(t, Config{Endpoints: []string{follower.addr}})
	resp, err := c.Report(context.Background(), &api.ReportRequest{ReporterId: "dn1"})
	if err != nil || len(resp.GetAckedWindowStarts()) != 1 {
		t.Fatalf("Report = %v, %v", resp, err)
	}
	leader.mu.Lock()
	defer leader.mu.Unlock()
	if len(leader.headerID) != 1 || len(leader.headerID[0]) != 32 {
		t.Fatalf("Report carried request id header %q, want one 32-hex id", leader.headerID)
	}
}

func TestClosed(t *testing.T) {
	f := startFake(t, &fakeNode{split: okSplit})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	c.Close()
	if _, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1}); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

func TestBackoffDelayBounded(t *testing.T) {
	c := &Client{backoff: 10 * time.Millisecond}
	for retry := 1; retry < 80; retry++ {
		d := c.backoffDelay(retry)
		ceil := min(10*time.Millisecond<<min(retry-1, 20), MaxBackoff)
		if d < ceil/2 || d > ceil {
			t.Fatalf("backoffDelay(%d) = %v, want within [%v, %v]", retry, d, ceil/2, ceil)
		}
	}
}

func TestLeaderHintHelper(t *testing.T) {
	err := notLeader(t, "127.0.0.1:9")
	if h := LeaderHint(err); h.GetLeaderGrpcAddr() != "127.0.0.1:9" {
		t.Fatalf("LeaderHint(raw status) = %v", h)
	}
	wrapped := &Error{RPC: "SplitRange", Err: err, outcome: outcomeNotApplied}
	if h := LeaderHint(wrapped); h.GetLeaderGrpcAddr() != "127.0.0.1:9" {
		t.Fatalf("LeaderHint(*Error) = %v", h)
	}
	if LeaderHint(errors.New("plain")) != nil || LeaderHint(nil) != nil {
		t.Fatal("LeaderHint of a non-status error should be nil")
	}
	if RequestID(unknownOutcome(t, "abc")) != "abc" {
		t.Fatal("RequestID should read the ErrorOutcome detail of a raw status")
	}
}
