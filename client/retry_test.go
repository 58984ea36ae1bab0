package client

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// With MaxRetries unset, a call retries for as long as RequestTimeout
// allows, not a fixed number of times: a read through an election that
// lasts longer than six quick retries still succeeds.
func TestRetriesUntilTimeoutNotACount(t *testing.T) {
	start := time.Now()
	f := startFake(t, &fakeNode{get: func(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) {
		if time.Since(start) < 1500*time.Millisecond {
			return nil, status.Error(codes.Unavailable, "no leader yet")
		}
		return &api.GetRouteResponse{Route: &api.RouteDescriptor{RouteId: 9}}, nil
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}, RequestTimeout: 5 * time.Second, Backoff: 10 * time.Millisecond})
	resp, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("k")})
	if err != nil || resp.GetRoute().GetRouteId() != 9 {
		t.Fatalf("GetRoute = %v, %v: want success once the election ended", resp, err)
	}
	if n := f.called("GetRoute"); n < 8 {
		t.Fatalf("%d attempts in 1.5 s: want the election backoff (at most %v) to keep retrying", n, MaxElectionBackoff)
	}
	if took := time.Since(start); took > 1500*time.Millisecond+MaxElectionBackoff+500*time.Millisecond {
		t.Fatalf("success %v after the start: the backoff let the new leader wait", took)
	}
}

// Refusals are final, whatever the time left: PermissionDenied,
// Unauthenticated and InvalidArgument are asked once.
func TestRefusalsNeverRetried(t *testing.T) {
	for _, code := range []codes.Code{codes.PermissionDenied, codes.Unauthenticated, codes.InvalidArgument} {
		f := startFake(t, &fakeNode{
			get: func(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) { return nil, status.Error(code, "no") },
			split: func(int, *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
				return nil, status.Error(code, "no")
			},
		})
		c := testClient(t, Config{Endpoints: []string{f.addr}, RequestTimeout: 2 * time.Second})
		if _, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("k")}); status.Code(err) != code {
			t.Errorf("%v read: err %v", code, err)
		}
		if _, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")}); status.Code(err) != code || !IsDefinite(err) {
			t.Errorf("%v mutation: err %v, want definite", code, err)
		}
		if r, s := f.called("GetRoute"), f.called("SplitRange"); r != 1 || s != 1 {
			t.Errorf("%v: %d reads and %d mutations sent, want 1 each", code, r, s)
		}
	}
}

// ResourceExhausted (a rate limit, the report budget) is retried after a
// backoff that grows past the election cap: the cluster asked for less.
func TestResourceExhaustedBacksOff(t *testing.T) {
	var at []time.Time
	f := startFake(t, &fakeNode{split: func(n int, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
		at = append(at, time.Now())
		if n <= 5 {
			return nil, status.Error(codes.ResourceExhausted, "rate limited")
		}
		return okSplit(n, req)
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}, RequestTimeout: 10 * time.Second, Backoff: 40 * time.Millisecond})
	if _, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")}); err != nil {
		t.Fatalf("SplitRange = %v, want success after the limit lifted", err)
	}
	if len(at) != 6 {
		t.Fatalf("%d attempts, want 6", len(at))
	}
	// The fifth backoff is drawn from [320, 640] ms: beyond the 200 ms cap
	// of retries that wait for a leader.
	if gap := at[5].Sub(at[4]); gap < 300*time.Millisecond {
		t.Fatalf("backoff after the fifth refusal %v: overload must back off past %v", gap, MaxElectionBackoff)
	}
}

// A node that stops answering (a paused leader) is given up after the
// attempt timeout, and the call goes on at the next endpoint.
func TestAttemptTimeoutMovesOn(t *testing.T) {
	hung := startFake(t, &fakeNode{get: func(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) {
		time.Sleep(3 * time.Second)
		return nil, status.Error(codes.Internal, "too late")
	}})
	live := startFake(t, &fakeNode{get: func(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) {
		return &api.GetRouteResponse{Route: &api.RouteDescriptor{RouteId: 4}}, nil
	}})
	c := testClient(t, Config{Endpoints: []string{hung.addr, live.addr}, RequestTimeout: 5 * time.Second, AttemptTimeout: 300 * time.Millisecond})
	start := time.Now()
	resp, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("k")})
	if err != nil || resp.GetRoute().GetRouteId() != 4 {
		t.Fatalf("GetRoute = %v, %v", resp, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("took %v with a 300 ms attempt timeout", took)
	}
}

// A hint naming a newer leader is followed at once even if that node was
// tried before (it was a follower then).
func TestNewLeaderHintFollowedAtOnce(t *testing.T) {
	var b *fakeNode
	a := startFake(t, &fakeNode{})
	b = startFake(t, &fakeNode{})
	a.split = func(n int, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
		return nil, notLeader(t, b.addr)
	}
	b.split = func(n int, req *api.SplitRangeRequest) (*api.SplitRangeResponse, error) {
		if n == 1 {
			return nil, notLeader(t, "") // an election: no leader known yet
		}
		return okSplit(n, req)
	}
	// Large backoff: only an immediate follow keeps the call fast.
	c := testClient(t, Config{Endpoints: []string{b.addr, a.addr}, Backoff: MaxElectionBackoff})
	start := time.Now()
	if _, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	// b (no leader) -> backoff -> a (hint: b) -> b at once.
	if took := time.Since(start); took > MaxElectionBackoff+150*time.Millisecond {
		t.Fatalf("took %v: the hint to a tried node that now leads was not followed at once", took)
	}
	if a.called("SplitRange") != 1 || b.called("SplitRange") != 2 {
		t.Fatalf("calls a=%d b=%d, want 1 and 2", a.called("SplitRange"), b.called("SplitRange"))
	}
}

// A DeadlineExceeded counts as no answer when the attempt's own deadline
// has passed or is about to: the server's copy of the deadline may fire
// first. Any other code, or one well before the deadline, is an answer.
func TestAttemptTimedOut(t *testing.T) {
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-expired.Done()
	closing, cancel2 := context.WithTimeout(context.Background(), deadlineSlack/2)
	defer cancel2()
	later, cancel3 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel3()
	de, unavailable := status.Error(codes.DeadlineExceeded, "deadline"), status.Error(codes.Unavailable, "down")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want bool
	}{
		{"our deadline passed", expired, de, true},
		{"the server's copy fired first", closing, de, true},
		{"a server's own timeout, long before ours", later, de, false},
		{"no deadline", context.Background(), de, false},
		{"another code at the deadline", expired, unavailable, false},
	} {
		if got := attemptTimedOut(tc.ctx, tc.err); got != tc.want {
			t.Errorf("%s: attemptTimedOut = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// An endpoint that did not answer is avoided by the next calls while
// another answers: each call would otherwise lose an attempt timeout to a
// paused node.
func TestSilentEndpointAvoided(t *testing.T) {
	hung := startFake(t, &fakeNode{get: func(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) {
		time.Sleep(2 * time.Second)
		return nil, status.Error(codes.Internal, "too late")
	}})
	live := startFake(t, &fakeNode{get: func(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) {
		return &api.GetRouteResponse{Route: &api.RouteDescriptor{RouteId: 4}}, nil
	}})
	c := testClient(t, Config{Endpoints: []string{hung.addr, live.addr}, AttemptTimeout: 200 * time.Millisecond})
	for i := range 6 {
		start := time.Now()
		if _, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("k")}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); i > 0 && took > 150*time.Millisecond {
			t.Fatalf("call %d took %v: it tried the silent endpoint again", i, took)
		}
	}
	if n := hung.called("GetRoute"); n != 1 {
		t.Fatalf("the silent endpoint was called %d times, want once", n)
	}
}
