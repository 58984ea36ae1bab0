package main

import (
	"encoding/hex"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func mergeResponse() *api.MergeRangeResponse {
	return &api.MergeRangeResponse{
		CatalogVersion: 11,
		CommitHlc:      splitHLC,
		Merged: &api.RouteDescriptor{RouteId: 12, Start: []byte("g"), End: []byte("user:42\x00"), GroupId: 1,
			State: api.RouteState_ROUTE_STATE_ACTIVE, MergedFromLeft: 7, MergedFromRight: 8, MergedAtHlc: splitHLC},
	}
}

func TestMerge(t *testing.T) {
	f := startCluster(t)
	f.set("MergeRange", mergeResponse())
	r := ctl(t, f, "merge", "r7", "r8", "--expected-version", "10")
	want := lines(
		`merged r7 and r8 into r12 ["g", "user:42\x00"): catalog version 11, committed at 1723456789012.3 (2024-08-12 09:59:49.012Z)`,
		`ROUTE  START  END            GROUP  STATE   FROM  MADE AT                                     PINNED`,
		`12     "g"    "user:42\x00"  1      active  7+8   1723456789012.3 (2024-08-12 09:59:49.012Z)  -`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("merge: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	req := f.last("MergeRange").(*api.MergeRangeRequest)
	if req.GetLeftRouteId() != 7 || req.GetRightRouteId() != 8 || req.ExpectedVersion == nil || req.GetExpectedVersion() != 10 || req.GetActor() != "alice@ops1" {
		t.Fatalf("sent %v", req)
	}
	if b, err := hex.DecodeString(req.GetRequestId()); err != nil || len(b) != 16 {
		t.Fatalf("request id %q is not 16 hex bytes", req.GetRequestId())
	}

	// Bare numbers work too; without --expected-version the merge is
	// unconditional; --request-id reaches the request; -o json is the
	// response.
	r = ctl(t, f, "merge", "7", "r8", "--request-id", "0123abcd", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	req = f.last("MergeRange").(*api.MergeRangeRequest)
	if req.ExpectedVersion != nil || req.GetRequestId() != "0123abcd" || req.GetLeftRouteId() != 7 || req.GetRightRouteId() != 8 {
		t.Fatalf("sent %v", req)
	}
	var got api.MergeRangeResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || !proto.Equal(&got, mergeResponse()) {
		t.Fatalf("json %s: %v", r.stdout, err)
	}
}

// Bad arguments are usage errors before anything is sent; each refusal of
// the cluster is one line naming the merge and the reason, exit 1.
func TestMergeErrors(t *testing.T) {
	f := startCluster(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"merge", "r7"}, "RIGHT_ROUTE_ID"},
		{[]string{"merge", "r7", "x8"}, `RIGHT_ROUTE_ID "x8": want a positive integer`},
		{[]string{"merge", "0", "8"}, `LEFT_ROUTE_ID "0"`},
		{[]string{"merge", "r7", "7"}, "both r7"},
		{[]string{"merge", "7", "8", "--expected-version", "0"}, "--expected-version 0"},
		{[]string{"merge", "7", "8", "--request-id", "a b"}, "--request-id"},
	} {
		r := ctl(t, f, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q, want usage error mentioning %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := f.calls("MergeRange"); n != 0 {
		t.Fatalf("usage errors sent %d requests", n)
	}
	// The server's words reach the operator as written, enum names as the
	// tables' words (forPeople).
	for _, tc := range []struct {
		code codes.Code
		msg  string
	}{
		{codes.FailedPrecondition, "routes not adjacent: r7[\"a\", \"g\") ACTIVE does not end where r9[\"h\", \"k\") ACTIVE starts"},
		{codes.FailedPrecondition, "routes in different groups: route 7 is served by group 1, route 8 by group 2"},
		{codes.FailedPrecondition, "route not active: route 8 is ROUTE_STATE_WRITE_FENCED"},
		{codes.FailedPrecondition, "route 7 belongs to live op 3 (paused): abort the op first"},
		{codes.FailedPrecondition, "catalog version mismatch: expected version 10, catalog is at 11"},
		{codes.FailedPrecondition, "merge: cluster version too low: manual_merge needs cluster version 3, the cluster runs 2 (a member has not been upgraded)"},
		{codes.NotFound, "route not found: route 8 (right)"},
	} {
		st, err := status.New(tc.code, tc.msg).WithDetails(&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_NOT_APPLIED})
		if err != nil {
			t.Fatal(err)
		}
		f.fail("MergeRange", st.Err())
		r := ctl(t, f, "merge", "r7", "r8")
		want := "hotsplitctl: merge r7 r8: " + tc.code.String() + " from " + f.addr + ": " + forPeople(tc.msg) + " (not applied)\n"
		if r.code != exitRefused || r.stderr != want || r.stdout != "" {
			t.Errorf("exit %d stderr %q, want %q", r.code, r.stderr, want)
		}
	}
}
