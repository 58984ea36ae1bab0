package transport

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/scheduler"
)

func outcomeOf(t *testing.T, err error) (codes.Code, api.Outcome, *api.LeaderHint) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("%v is not a status error", err)
	}
	var out api.Outcome
	var hint *api.LeaderHint
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *api.ErrorOutcome:
			out = d.Outcome
		case *api.LeaderHint:
			hint = d
		}
	}
	return st.Code(), out, hint
}

func TestResultErrorMapping(t *testing.T) {
	want := map[api.ResultCode]codes.Code{
		api.ResultCode_RESULT_CODE_INVALID_ARGUMENT:        codes.InvalidArgument,
		api.ResultCode_RESULT_CODE_KEY_TOO_LARGE:           codes.InvalidArgument,
		api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND:         codes.NotFound,
		api.ResultCode_RESULT_CODE_OP_NOT_FOUND:            codes.NotFound,
		api.ResultCode_RESULT_CODE_MEMBER_NOT_FOUND:        codes.NotFound,
		api.ResultCode_RESULT_CODE_FENCE_VIOLATION:         codes.Aborted,
		api.ResultCode_RESULT_CODE_ROUTE_NOT_ACTIVE:        codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_SPLIT_KEY_AT_BOUNDARY:   codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_SPLIT_KEY_OUTSIDE_ROUTE: codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_VERSION_MISMATCH:        codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_OP_PAUSED:               codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_OP_ABORTED:              codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_OP_FINISHED:             codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_NOT_BOOTSTRAPPED:        codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_ALREADY_BOOTSTRAPPED:    codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_STALE_COLUMN:            codes.FailedPrecondition,
		// A merge refused for the routes' shape or state: the request was
		// well formed, the catalog is not as it assumed.
		api.ResultCode_RESULT_CODE_ROUTES_NOT_ADJACENT:        codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_ROUTES_IN_DIFFERENT_GROUPS: codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_MERGE_ROUTE_NOT_ACTIVE:     codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_ROUTE_IN_LIVE_OP:           codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED:          codes.FailedPrecondition,
		// Shard groups: an unknown id; a name or identity another group
		// has; a group that still serves routes, or one group too many.
		api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND: codes.NotFound,
		api.ResultCode_RESULT_CODE_GROUP_CONFLICT:  codes.AlreadyExists,
		api.ResultCode_RESULT_CODE_GROUP_NOT_EMPTY: codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_GROUP_LIMIT:     codes.FailedPrecondition,
		// Moves: a move the groups refuse, an acknowledgement from a node
		// of another group, one the move does not wait for.
		api.ResultCode_RESULT_CODE_MOVE_REFUSED:         codes.FailedPrecondition,
		api.ResultCode_RESULT_CODE_MOVE_ACK_WRONG_GROUP: codes.PermissionDenied,
		api.ResultCode_RESULT_CODE_MOVE_ACK_STALE:       codes.FailedPrecondition,
	}
	// Every result code is mapped deliberately.
	for v, name := range api.ResultCode_name {
		code := api.ResultCode(v)
		if code == api.ResultCode_RESULT_CODE_OK {
			if err := resultError(&api.CommandResult{Code: code}, "r"); err != nil {
				t.Fatalf("OK mapped to %v", err)
			}
			continue
		}
		w, ok := want[code]
		if !ok {
			t.Fatalf("result code %s has no expected status in this test", name)
		}
		err := resultError(&api.CommandResult{Code: code, Message: "route 7 gone"}, "req-1")
		got, outcome, _ := outcomeOf(t, err)
		if got != w || outcome != api.Outcome_OUTCOME_NOT_APPLIED || !strings.Contains(err.Error(), "route 7 gone") {
			t.Errorf("%s -> %v %v (%v), want %v NOT_APPLIED", name, got, outcome, err, w)
		}
	}
}

func TestProposalErrorClasses(t *testing.T) {
	hint := &api.LeaderHint{LeaderId: "n2", LeaderGrpcAddr: "127.0.0.1:9"}
	for _, tc := range []struct {
		err     error
		code    codes.Code
		outcome api.Outcome
	}{
		{fmt.Errorf("%w: x", scheduler.ErrNotLeader), codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED},
		{fmt.Errorf("%w: x", scheduler.ErrNotReady), codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED},
		{fmt.Errorf("%w: x", scheduler.ErrEnqueueTimeout), codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED},
		{fmt.Errorf("%w: x", scheduler.ErrTransferInProgress), codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED},
		{fmt.Errorf("%w: x", scheduler.ErrOutcomeUnknown), codes.Unknown, api.Outcome_OUTCOME_UNKNOWN},
		{errors.New("anything else"), codes.Unknown, api.Outcome_OUTCOME_UNKNOWN},
	} {
		code, outcome, h := outcomeOf(t, proposalError(tc.err, "req-9", hint))
		if code != tc.code || outcome != tc.outcome || h.GetLeaderGrpcAddr() != hint.LeaderGrpcAddr {
			t.Errorf("%v -> %v %v hint %v", tc.err, code, outcome, h)
		}
	}
}

func TestMembershipErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
	}{
		{fmt.Errorf("%w: n2", scheduler.ErrMemberExists), codes.AlreadyExists},
		{fmt.Errorf("%w: x", scheduler.ErrForeignCluster), codes.FailedPrecondition},
		{fmt.Errorf("%w: x", scheduler.ErrUnsupportedVersion), codes.FailedPrecondition},
		{fmt.Errorf("admitting nodes: %w", clusterversion.Admission.CheckAt(clusterversion.Version1)), codes.FailedPrecondition},
		{fmt.Errorf("%w: x", scheduler.ErrNoSuchMember), codes.NotFound},
		{fmt.Errorf("%w: x", scheduler.ErrNotLeader), codes.Unavailable},
	} {
		if code, _, _ := outcomeOf(t, membershipError(tc.err, nil)); code != tc.code {
			t.Errorf("%v -> %v, want %v", tc.err, code, tc.code)
		}
	}
}

func TestValidationNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		err   error
		field string
	}{
		{checkSplitKey("split_key", nil), "split_key"},
		{checkSplitKey("split_key", make([]byte, 4098)), "4098 bytes"},
		{checkDataKey("key", make([]byte, 4097)), "key: 4097"},
		{checkText("actor", strings.Repeat("a", 300), maxActorLen), "actor"},
		{checkText("reason", "\xff", maxReasonLen), "UTF-8"},
		{checkAddr("raft_addr", "nohost"), "raft_addr"},
		{checkNodeID("a b"), "node_id"},
		{checkNodeID(""), "node_id"},
		{checkNodeID("N1"), "node_id"},
		{checkNodeID("-n1"), "node_id"},
		{checkNodeID(strings.Repeat("n", 64)), "64 bytes"},
		{checkSplitKey("split_key", append(make([]byte, 4096), 'x')), "must end in 0x00"},
	} {
		code, _, _ := outcomeOf(t, tc.err)
		if code != codes.InvalidArgument || !strings.Contains(tc.err.Error(), tc.field) {
			t.Errorf("%v: want InvalidArgument naming %q", tc.err, tc.field)
		}
	}
	if checkSplitKey("k", make([]byte, 4097)) != nil || checkDataKey("k", make([]byte, 4096)) != nil ||
		checkNodeID(strings.Repeat("n", 63)) != nil || checkNodeID("n1.zone-a_2") != nil {
		t.Fatal("limits off by one")
	}
}

// A refused report carries the replicated config beside its outcome, so a
// reporter on another step learns the one to use; other failures do not.
func TestRefusedReportCarriesTheConfig(t *testing.T) {
	cfg := &api.Config{StepMs: 10000}
	refused := statusWith(codes.InvalidArgument, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, "columns[0].step_ms: 60000 differs")
	st := status.Convert(withReplicatedConfig(refused, cfg))
	var got *api.Config
	outcome := false
	for _, d := range st.Details() {
		switch x := d.(type) {
		case *api.Config:
			got = x
		case *api.ErrorOutcome:
			outcome = true
		}
	}
	if !proto.Equal(got, cfg) || !outcome || st.Code() != codes.InvalidArgument || st.Message() != "columns[0].step_ms: 60000 differs" {
		t.Fatalf("refusal %v with details %v", st, st.Details())
	}
	busy := status.Error(codes.Unavailable, "no leader")
	if err := withReplicatedConfig(busy, cfg); len(status.Convert(err).Details()) != 0 {
		t.Fatalf("an unavailable answer carries %v", status.Convert(err).Details())
	}
}
