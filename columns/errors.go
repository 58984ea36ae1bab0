package columns

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Errors of Aggregator.Report. Every Report error is definitely-not-applied
// for the reporter (nothing of the report was merged, or what was merged
// dies with the term), and carries its gRPC status itself, so the
// transport may return it unchanged.
var (
	// ErrNotLeader: no leadership term runs here, or the term ended while
	// the report waited. Status Unavailable; the reporter resends to the
	// next leader, which deduplicates.
	ErrNotLeader = errors.New("not the leader")
	// ErrNotReady: the cluster is not bootstrapped yet. Status Unavailable.
	ErrNotReady = errors.New("cluster not bootstrapped")
	// ErrInvalidReport: the report broke a rule of docs/design.md#the-load-pipeline/§12; the
	// message names the field. Status InvalidArgument. Resending it
	// unchanged fails again.
	ErrInvalidReport = errors.New("invalid load report")
	// ErrReportBacklog: too many columns are open on the leader to take
	// any column of the report now. Status Unavailable; resend later.
	ErrReportBacklog = errors.New("too many load columns open")
	// ErrConflictingReport: the reporter already reported one of the
	// report's windows with other content (a restarted reporter reusing its
	// id, or two processes sharing one). Nothing of the report is merged;
	// the first contribution stands. Status AlreadyExists, naming the
	// reporter and the window; resending fails again.
	ErrConflictingReport = errors.New("conflicting load report")
)

// reportError is a Report failure with its gRPC status: Unwrap gives the
// sentinel (errors.Is), GRPCStatus the code and an ErrorOutcome detail
// saying NOT_APPLIED (errors.md).
type reportError struct {
	code codes.Code
	err  error
}

func (e *reportError) Error() string { return e.err.Error() }
func (e *reportError) Unwrap() error { return e.err }

func (e *reportError) GRPCStatus() *status.Status {
	st := status.New(e.code, e.err.Error())
	if d, err := st.WithDetails(protoadapt.MessageV1Of(&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_NOT_APPLIED})); err == nil {
		return d
	}
	return st
}

// invalidReport is the InvalidArgument error of a rejection. The message
// is the rejection's alone ("columns[0].step_ms: …"), so that it names the
// field first.
func invalidReport(r *rejection) error {
	return &reportError{code: codes.InvalidArgument, err: &fieldError{msg: r.msg}}
}

// malformedReport is the InvalidArgument error of report bytes protobuf
// would not decode; it wraps ErrInvalidReport and api.ErrMalformedReport.
func malformedReport(err error) error {
	return &reportError{code: codes.InvalidArgument, err: fmt.Errorf("load report does not decode: %w (%w)", err, ErrInvalidReport)}
}

// fieldError is a validation message that wraps ErrInvalidReport without
// prefixing its text.
type fieldError struct{ msg string }

func (e *fieldError) Error() string { return e.msg }
func (e *fieldError) Unwrap() error { return ErrInvalidReport }

// notLeaderReport is the Unavailable error of a report that arrived, or was
// waiting, when this node was not (or no longer) running a term: the
// reporter resends to the next leader, which deduplicates.
func notLeaderReport(why string) error {
	return &reportError{code: codes.Unavailable, err: fmt.Errorf("load report: %s: %w", why, ErrNotLeader)}
}

// notReadyReport is the Unavailable error of a report that reached a
// leader whose cluster is not bootstrapped yet.
func notReadyReport() error {
	return &reportError{code: codes.Unavailable, err: fmt.Errorf("load report: %w", ErrNotReady)}
}

func backlogReport(open int) error {
	return &reportError{code: codes.Unavailable, err: fmt.Errorf("load report: %d columns open: %w", open, ErrReportBacklog)}
}

func conflictingReport(reporter string, w uint64) error {
	return &reportError{code: codes.AlreadyExists, err: fmt.Errorf(
		"load report: reporter %q already reported window %d with different content; the first report stands: %w",
		reporter, w, ErrConflictingReport)}
}
