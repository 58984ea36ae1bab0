package transport

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// A malformed merge is refused before anything is forwarded or proposed:
// InvalidArgument naming the field, definitely not applied. (The server
// has no raft, FSM or peers: reaching them would panic.)
func TestMergeRangeValidation(t *testing.T) {
	c := &catalogServer{s: &Server{}}
	for _, tc := range []struct {
		name  string
		req   *api.MergeRangeRequest
		field string
	}{
		{"no left route", &api.MergeRangeRequest{RightRouteId: 2}, "left_route_id"},
		{"no right route", &api.MergeRangeRequest{LeftRouteId: 2}, "right_route_id"},
		{"the same route twice", &api.MergeRangeRequest{LeftRouteId: 2, RightRouteId: 2}, "right_route_id: 2 is left_route_id too"},
		{"request id too long", &api.MergeRangeRequest{LeftRouteId: 1, RightRouteId: 2, RequestId: strings.Repeat("r", maxRequestIDLen+1)}, "request_id"},
		{"actor not UTF-8", &api.MergeRangeRequest{LeftRouteId: 1, RightRouteId: 2, Actor: "\xff"}, "actor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.MergeRange(context.Background(), tc.req)
			code, outcome, _ := outcomeOf(t, err)
			if code != codes.InvalidArgument || outcome != api.Outcome_OUTCOME_NOT_APPLIED || !strings.Contains(status.Convert(err).Message(), tc.field) {
				t.Fatalf("%v, want InvalidArgument NOT_APPLIED naming %s", err, tc.field)
			}
		})
	}
}

// Below cluster version 3 the leader refuses a merge before proposing it
// (a member that cannot apply it would halt): FailedPrecondition, not
// applied, naming the feature and the versions; at 3 it passes.
func TestMergeRangeFeatureGate(t *testing.T) {
	for _, v := range clusterversion.Versions() {
		boot := bootstrapCmd(2, nil)
		boot.GetBootstrap().ClusterVersion = v
		st := appliedFSM(t, boot).State()
		err := featureGate(st, clusterversion.ManualMerge, "merge", "req-7")
		if clusterversion.ManualMerge.EnabledAt(v) {
			if err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
			continue
		}
		code, outcome, _ := outcomeOf(t, err)
		msg := status.Convert(err).Message()
		if code != codes.FailedPrecondition || outcome != api.Outcome_OUTCOME_NOT_APPLIED ||
			!strings.Contains(msg, "manual_merge needs cluster version 3") || !strings.Contains(msg, "not been upgraded") {
			t.Fatalf("version %d: %v", v, err)
		}
	}
}
