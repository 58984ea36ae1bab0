package transport

import (
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/scheduler"
)

// statusWith builds a status with the outcome class (and leader hint) as
// details, so clients can tell "not applied" from "unknown" without parsing
// messages.
func statusWith(code codes.Code, outcome api.Outcome, requestID string, hint *api.LeaderHint, msg string) error {
	st := status.New(code, msg)
	details := []protoadapt.MessageV1{protoadapt.MessageV1Of(&api.ErrorOutcome{Outcome: outcome, RequestId: requestID})}
	if hint != nil && hint.LeaderGrpcAddr != "" {
		details = append(details, protoadapt.MessageV1Of(hint))
	}
	if withDetails, err := st.WithDetails(details...); err == nil {
		st = withDetails
	}
	return st.Err()
}

// invalid is a validation failure: definitely not applied.
func invalid(format string, args ...any) error {
	return statusWith(codes.InvalidArgument, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, fmt.Sprintf(format, args...))
}

// unavailable is a definite "not here, not now": retry elsewhere or later.
func unavailable(hint *api.LeaderHint, format string, args ...any) error {
	return statusWith(codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED, "", hint, fmt.Sprintf(format, args...))
}

// proposalError maps a scheduler proposal failure to its class.
func proposalError(err error, requestID string, hint *api.LeaderHint) error {
	if scheduler.IsDefinite(err) {
		return statusWith(codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED, requestID, hint, err.Error())
	}
	return statusWith(codes.Unknown, api.Outcome_OUTCOME_UNKNOWN, requestID, hint, err.Error())
}

// resultError maps a business failure of an applied command (the entry
// applied and changed nothing) to a status; nil for OK.
func resultError(res *api.CommandResult, requestID string) error {
	var code codes.Code
	switch res.GetCode() {
	case api.ResultCode_RESULT_CODE_OK:
		return nil
	case api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, api.ResultCode_RESULT_CODE_KEY_TOO_LARGE:
		code = codes.InvalidArgument
	case api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, api.ResultCode_RESULT_CODE_OP_NOT_FOUND, api.ResultCode_RESULT_CODE_MEMBER_NOT_FOUND,
		api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND:
		code = codes.NotFound
	case api.ResultCode_RESULT_CODE_GROUP_CONFLICT:
		// Another group has the name or the identity.
		code = codes.AlreadyExists
	case api.ResultCode_RESULT_CODE_MOVE_ACK_WRONG_GROUP:
		// The caller does not serve the group that owes the acknowledgement.
		code = codes.PermissionDenied
	case api.ResultCode_RESULT_CODE_FENCE_VIOLATION:
		code = codes.Aborted
	case api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED:
		// The idempotency-key rule: the id's first request stands and this
		// one is refused, as a precondition the caller must fix (a new id).
		code = codes.FailedPrecondition
	default:
		code = codes.FailedPrecondition
	}
	msg := res.GetMessage()
	if msg == "" {
		msg = strings.ToLower(strings.TrimPrefix(res.GetCode().String(), "RESULT_CODE_"))
	}
	return statusWith(code, api.Outcome_OUTCOME_NOT_APPLIED, requestID, nil, msg)
}

// statusUnimplemented is a call this node cannot serve in its setup.
func statusUnimplemented(format string, args ...any) error {
	return status.Errorf(codes.Unimplemented, format, args...)
}

// membershipError maps scheduler membership errors.
func membershipError(err error, hint *api.LeaderHint) error {
	switch {
	case errors.Is(err, scheduler.ErrMemberExists):
		return statusWith(codes.AlreadyExists, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, err.Error())
	case errors.Is(err, scheduler.ErrForeignCluster), errors.Is(err, scheduler.ErrUnsupportedVersion), errors.Is(err, clusterversion.ErrVersionTooLow),
		errors.Is(err, scheduler.ErrRemovedMember):
		return statusWith(codes.FailedPrecondition, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, err.Error())
	case errors.Is(err, scheduler.ErrNotAdmitted):
		return statusWith(codes.PermissionDenied, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, err.Error())
	case errors.Is(err, scheduler.ErrNoSuchMember):
		return statusWith(codes.NotFound, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, err.Error())
	case errors.Is(err, scheduler.ErrNotVoter):
		return statusWith(codes.FailedPrecondition, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, err.Error())
	case errors.Is(err, scheduler.ErrTransferFailed):
		return statusWith(codes.Unavailable, api.Outcome_OUTCOME_NOT_APPLIED, "", hint, err.Error())
	}
	return proposalError(err, "", hint)
}

func statusNotFound(format string, args ...any) error {
	return statusWith(codes.NotFound, api.Outcome_OUTCOME_NOT_APPLIED, "", nil, fmt.Sprintf(format, args...))
}
