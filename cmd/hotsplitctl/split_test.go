package main

import (
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func splitResponse() *api.SplitRangeResponse {
	active := api.RouteState_ROUTE_STATE_ACTIVE
	return &api.SplitRangeResponse{
		CatalogVersion: 10,
		CommitHlc:      splitHLC,
		Left:           &api.RouteDescriptor{RouteId: 9, Start: []byte("g"), End: []byte("user:42"), GroupId: 1, State: active, ParentRouteId: 5, SplitAtHlc: splitHLC},
		// Cluster version 3: the operator's split key is pinned.
		Right: &api.RouteDescriptor{RouteId: 10, Start: []byte("user:42"), End: []byte("user:42\x00"), GroupId: 1, State: active, ParentRouteId: 5, SplitAtHlc: splitHLC,
			OperatorStart: true},
	}
}

func TestSplit(t *testing.T) {
	f := startCluster(t)
	f.set("SplitRange", splitResponse())
	r := ctl(t, f, "split", "r5", "user:42", "--expected-version", "9")
	want := lines(
		`split r5 at "user:42": catalog version 10, committed at 1723456789012.3 (2024-08-12 09:59:49.012Z)`,
		`ROUTE  START      END            GROUP  STATE   FROM  MADE AT                                     PINNED`,
		`9      "g"        "user:42"      1      active  5     1723456789012.3 (2024-08-12 09:59:49.012Z)  -`,
		`10     "user:42"  "user:42\x00"  1      active  5     1723456789012.3 (2024-08-12 09:59:49.012Z)  yes`,
		pinnedNote,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("split: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	req := f.last("SplitRange").(*api.SplitRangeRequest)
	if req.GetRouteId() != 5 || string(req.GetSplitKey()) != "user:42" || req.ExpectedVersion == nil || req.GetExpectedVersion() != 9 || req.GetActor() != "alice@ops1" {
		t.Fatalf("sent %v", req)
	}
	if b, err := hex.DecodeString(req.GetRequestId()); err != nil || len(b) != 16 {
		t.Fatalf("request id %q is not 16 hex bytes", req.GetRequestId())
	}

	// Without --expected-version the split is unconditional; --hex,
	// --actor and --request-id reach the request.
	r = ctl(t, f, "split", "5", "--hex", "757365723a343200", "--actor", "bob", "--request-id", "0123abcd", "-o", "json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	req = f.last("SplitRange").(*api.SplitRangeRequest)
	if req.ExpectedVersion != nil || string(req.GetSplitKey()) != "user:42\x00" || req.GetActor() != "bob" || req.GetRequestId() != "0123abcd" {
		t.Fatalf("sent %v", req)
	}
	var got api.SplitRangeResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || !proto.Equal(&got, splitResponse()) {
		t.Fatalf("json %s: %v", r.stdout, err)
	}
}

func TestSplitErrors(t *testing.T) {
	f := startCluster(t)
	notApplied, err := status.New(codes.Unavailable, "leadership transfer in progress").
		WithDetails(&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_NOT_APPLIED})
	if err != nil {
		t.Fatal(err)
	}
	unknown, err := status.New(codes.Unknown, "leadership lost after enqueue").
		WithDetails(&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_UNKNOWN, RequestId: "feedface"})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		err   error
		args  []string
		code  int
		calls int
		want  string // the whole stderr line, with ADDR for the server's address
	}{
		{
			name: "stale expected version is refused, not applied",
			err:  status.Error(codes.FailedPrecondition, "catalog version mismatch: expected 9, current 10"),
			args: []string{"split", "5", "m", "--expected-version", "9"},
			code: exitRefused, calls: 1,
			want: `hotsplitctl: split r5 at "m": FailedPrecondition from ADDR: catalog version mismatch: expected 9, current 10 (not applied)`,
		},
		{
			name: "unknown outcome names the request id and how to resolve it",
			err:  unknown.Err(),
			args: []string{"split", "5", "m", "--request-id", "feedface"},
			code: exitUnavailable, calls: 1,
			want: `hotsplitctl: split r5 at "m": outcome unknown, it may have been applied (request id feedface): Unknown from ADDR: leadership lost after enqueue; re-run the same command with --request-id feedface to learn whether it was applied`,
		},
		{
			name: "definitely not applied after every retry",
			err:  notApplied.Err(),
			args: []string{"split", "5", "m", "--timeout", "1s"},
			code: exitUnavailable, calls: -1, // retried until --timeout
			want: `hotsplitctl: split r5 at "m": Unavailable from ADDR: leadership transfer in progress (not applied, N attempts)`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.fail("SplitRange", tc.err)
			before := f.calls("SplitRange")
			r := ctl(t, f, tc.args...)
			n := f.calls("SplitRange") - before
			want := strings.ReplaceAll(tc.want, "ADDR", f.addr) + "\n"
			if tc.calls < 0 {
				// Retried until --timeout: many attempts, each counted.
				if n < 3 {
					t.Fatalf("server called %d times in 1 s of retries", n)
				}
				want = strings.ReplaceAll(want, "N attempts", fmt.Sprintf("%d attempts", n))
			} else if n != tc.calls {
				t.Fatalf("server called %d times, want %d", n, tc.calls)
			}
			if r.code != tc.code || r.stderr != want || r.stdout != "" {
				t.Fatalf("exit %d stderr:\n%q\nwant exit %d:\n%q", r.code, r.stderr, tc.code, want)
			}
		})
	}
}
