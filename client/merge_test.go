package client

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// MergeRange is a mutation like SplitRange: it follows the leader hint,
// retries a definite "not applied" with the same generated request id and
// the configured actor, leaves the caller's request alone, and returns a
// refusal as a definite error with its status code.
func TestMergeRange(t *testing.T) {
	merged := &api.RouteDescriptor{RouteId: 9, Start: []byte("f"), End: []byte("t"), MergedFromLeft: 2, MergedFromRight: 3, MergedAtHlc: 77}
	leader := startFake(t, &fakeNode{})
	leader.merge = func(n int, req *api.MergeRangeRequest) (*api.MergeRangeResponse, error) {
		if n == 1 {
			return nil, notLeader(t, leader.addr) // busy: the hint is the leader itself
		}
		return &api.MergeRangeResponse{Merged: merged, CatalogVersion: 4, CommitHlc: 77}, nil
	}
	follower := startFake(t, &fakeNode{merge: func(int, *api.MergeRangeRequest) (*api.MergeRangeResponse, error) {
		return nil, notLeader(t, leader.addr)
	}})
	c := testClient(t, Config{Endpoints: []string{follower.addr}, MaxRetries: 3, Actor: "alice@host"})
	req := &api.MergeRangeRequest{LeftRouteId: 2, RightRouteId: 3, ExpectedVersion: proto.Uint64(3)}
	resp, err := c.MergeRange(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(resp.GetMerged(), merged) || resp.GetCatalogVersion() != 4 || resp.GetCommitHlc() != 77 {
		t.Fatalf("response %v", resp)
	}
	if req.GetRequestId() != "" || req.GetActor() != "" {
		t.Fatalf("caller's request was modified: %v", req)
	}
	if f, l := follower.called("MergeRange"), leader.called("MergeRange"); f != 1 || l != 2 {
		t.Fatalf("calls: follower %d leader %d, want 1 and 2", f, l)
	}
	var sent []*api.MergeRangeRequest
	for _, n := range []*fakeNode{follower, leader} {
		n.mu.Lock()
		sent = append(sent, n.merges...)
		n.mu.Unlock()
	}
	id := sent[0].GetRequestId()
	for i, s := range sent {
		if id == "" || s.GetRequestId() != id || s.GetActor() != "alice@host" || s.GetLeftRouteId() != 2 || s.GetRightRouteId() != 3 || s.GetExpectedVersion() != 3 {
			t.Fatalf("attempt %d sent %v (first request id %q)", i+1, s, id)
		}
	}

	// A refusal is final and definite.
	refusing := startFake(t, &fakeNode{merge: func(int, *api.MergeRangeRequest) (*api.MergeRangeResponse, error) {
		return nil, withDetails(t, codes.FailedPrecondition, "routes not adjacent: r1 does not end where r3 starts",
			&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_NOT_APPLIED})
	}})
	c2 := testClient(t, Config{Endpoints: []string{refusing.addr}, MaxRetries: 3})
	_, err = c2.MergeRange(context.Background(), &api.MergeRangeRequest{LeftRouteId: 1, RightRouteId: 3, RequestId: "mine"})
	var ce *Error
	if !errors.As(err, &ce) || ce.Code() != codes.FailedPrecondition || !errors.Is(err, ErrNotApplied) || ce.RPC != "MergeRange" ||
		refusing.called("MergeRange") != 1 {
		t.Fatalf("refusal: %v (calls %d)", err, refusing.called("MergeRange"))
	}
	refusing.mu.Lock()
	defer refusing.mu.Unlock()
	if refusing.merges[0].GetRequestId() != "mine" {
		t.Fatalf("the caller's request id was replaced: %q", refusing.merges[0].GetRequestId())
	}
}
