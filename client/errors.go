package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Sentinel errors. Test with errors.Is; the errors returned by calls wrap
// them together with the gRPC status of the last attempt.
var (
	// ErrNoEndpoints: Config.Endpoints is empty.
	ErrNoEndpoints = errors.New("client: Config.Endpoints is empty: give at least one host:port")
	// ErrBadEndpoint: an endpoint (or a flag holding endpoints) is not
	// host:port; the error names the entry.
	ErrBadEndpoint = errors.New("client: bad endpoint")
	// ErrClosed: the Client was closed.
	ErrClosed = errors.New("client: closed")
	// ErrNotApplied: a mutation definitely was not applied. Retrying it with
	// the same request id is safe (though a validation or precondition
	// failure will fail again).
	ErrNotApplied = errors.New("not applied")
	// ErrUnknownOutcome: a mutation may or may not have been applied. Do not
	// blindly retry a non-idempotent request: re-send it with the same
	// request id (RequestID(err)) to learn its first answer.
	ErrUnknownOutcome = errors.New("outcome unknown, the request may have been applied")
	// ErrCatalogChanging: ListAllRoutes saw the catalog version change
	// between pages on every one of its bounded attempts.
	ErrCatalogChanging = errors.New("client: catalog changed between pages on every attempt")
	// ErrProtocol: a server answered something the API does not allow
	// (e.g. a watch stream that skipped versions); the error says what.
	ErrProtocol = errors.New("client: protocol violation by server")
)

// outcome is the error class of a failed call.
type outcome uint8

const (
	outcomeRead       outcome = iota // a read: nothing to apply
	outcomeNotApplied                // a mutation, definitely not applied
	outcomeUnknown                   // a mutation that may have applied
)

// Error is the error of a failed call. It wraps ErrNotApplied or
// ErrUnknownOutcome (mutations only) and the gRPC status error of the last
// attempt, so status.FromError, status.Code and errors.Is all see through it.
type Error struct {
	// RPC is the method name, e.g. "SplitRange".
	RPC string
	// Endpoint is the address that gave the last answer, or that could not
	// be reached.
	Endpoint string
	// RequestID is the id sent with a mutation ("" for reads).
	RequestID string
	// Attempts is how many attempts were made.
	Attempts int
	// Hint is the leader hint of the last answer, if it carried one.
	Hint *api.LeaderHint
	// Err is the last attempt's error: a gRPC status error, or a
	// *PermanentError (which wraps ErrPermanent and has a gRPC status too).
	Err error
	// Skipped are the endpoints this call dropped after a permanent
	// failure of their own (a wrong port, a node's certificate), when the
	// call went on without them.
	Skipped []*PermanentError

	outcome outcome
}

// Unwrap exposes the outcome sentinel (for mutations) and the status error.
func (e *Error) Unwrap() []error {
	switch e.outcome {
	case outcomeNotApplied:
		return []error{ErrNotApplied, e.Err}
	case outcomeUnknown:
		return []error{ErrUnknownOutcome, e.Err}
	}
	return []error{e.Err}
}

// Code is the gRPC status code of the last attempt.
func (e *Error) Code() codes.Code { return status.Code(e.Err) }

// Message is the server's (or the transport's) message, without the code.
func (e *Error) Message() string { return status.Convert(e.Err).Message() }

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.RPC)
	if e.Endpoint != "" {
		b.WriteString(" via ")
		b.WriteString(e.Endpoint)
	}
	fmt.Fprintf(&b, ": %s: %s", e.Code(), e.Message())
	var notes []string
	switch e.outcome {
	case outcomeNotApplied:
		notes = append(notes, "not applied")
	case outcomeUnknown:
		notes = append(notes, "outcome unknown: may have been applied")
	}
	if e.RequestID != "" {
		notes = append(notes, "request id "+e.RequestID)
	}
	if e.Attempts > 1 {
		notes = append(notes, fmt.Sprintf("%d attempts", e.Attempts))
	}
	for _, pe := range e.Skipped {
		if pe.Endpoint != e.Endpoint {
			notes = append(notes, "skipped "+pe.Error())
		}
	}
	if len(notes) > 0 {
		b.WriteString(" (")
		b.WriteString(strings.Join(notes, "; "))
		b.WriteString(")")
	}
	return b.String()
}

// IsDefinite reports whether err says a mutation was definitely not applied.
func IsDefinite(err error) bool { return errors.Is(err, ErrNotApplied) }

// RequestID returns the request id carried by err ("" if none): the id to
// re-send an unknown-outcome mutation with.
func RequestID(err error) string {
	var e *Error
	if errors.As(err, &e) && e.RequestID != "" {
		return e.RequestID
	}
	if o := outcomeDetail(err); o != nil {
		return o.GetRequestId()
	}
	return ""
}

// LeaderHint returns the leader hint attached to err's gRPC status, or nil.
func LeaderHint(err error) *api.LeaderHint {
	var e *Error
	if errors.As(err, &e) && e.Hint != nil {
		return e.Hint
	}
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if h, ok := d.(*api.LeaderHint); ok {
			return h
		}
	}
	return nil
}

func outcomeDetail(err error) *api.ErrorOutcome {
	st, ok := status.FromError(err)
	if !ok {
		return nil
	}
	for _, d := range st.Details() {
		if o, ok := d.(*api.ErrorOutcome); ok {
			return o
		}
	}
	return nil
}

// unreachable is the status of an attempt whose connection never became
// ready: nothing was sent, so even a mutation definitely was not applied.
// A permanent cause is returned as it is, for the caller to stop on.
func unreachable(addr string, cause error) error {
	if pe, ok := errors.AsType[*PermanentError](cause); ok {
		return pe
	}
	return status.Errorf(codes.Unavailable, "endpoint %s unreachable: %v", addr, cause)
}

// verdict is the class of one failed attempt, whether to try again, and
// whether the cluster said it is overloaded (back off longer).
type verdict struct {
	outcome  outcome
	retry    bool
	overload bool
}

// classify applies the error contract (docs: the gRPC error contract shared
// by transport and client) to one failed attempt. The retryable set is:
// unavailable (no leader, not the leader, a node that did not answer),
// reads whose outcome is unknown, and overload, which is retried after a
// longer backoff. PermissionDenied, Unauthenticated and InvalidArgument are
// never retried. sent is false when the connection never became ready, so
// the request never left this process. callCtx is the call's context (not
// the attempt's): an expired call deadline is not a server answer.
func classify(callCtx context.Context, err error, mutation, sent bool) verdict {
	alive := callCtx.Err() == nil
	if !sent {
		if mutation {
			return verdict{outcome: outcomeNotApplied, retry: alive}
		}
		return verdict{outcome: outcomeRead, retry: alive}
	}
	code := status.Code(err)
	if !mutation {
		switch code {
		case codes.Unavailable, codes.Aborted:
			return verdict{outcome: outcomeRead, retry: true}
		case codes.ResourceExhausted:
			return verdict{outcome: outcomeRead, retry: true, overload: true}
		case codes.DeadlineExceeded, codes.Canceled, codes.Unknown:
			// An attempt that timed out or a forward that failed midway:
			// another node, or the next leader, may answer.
			return verdict{outcome: outcomeRead, retry: alive}
		}
		return verdict{outcome: outcomeRead}
	}
	if o := outcomeDetail(err); o != nil {
		switch o.GetOutcome() {
		case api.Outcome_OUTCOME_NOT_APPLIED:
			switch code {
			case codes.Unavailable, codes.Aborted:
				return verdict{outcome: outcomeNotApplied, retry: true}
			case codes.ResourceExhausted:
				return verdict{outcome: outcomeNotApplied, retry: true, overload: true}
			}
			return verdict{outcome: outcomeNotApplied}
		case api.Outcome_OUTCOME_UNKNOWN:
			return verdict{outcome: outcomeUnknown}
		}
	}
	switch code {
	case codes.ResourceExhausted:
		// Refused by a limit before the handler ran: nothing applied.
		return verdict{outcome: outcomeNotApplied, retry: true, overload: true}
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.AlreadyExists,
		codes.OutOfRange, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return verdict{outcome: outcomeNotApplied}
	case codes.Aborted:
		// The FSM refused the entry (fence violation): nothing applied,
		// and the contract says to retry.
		return verdict{outcome: outcomeNotApplied, retry: true}
	}
	// Unknown, DeadlineExceeded, Canceled, Internal, DataLoss, and an
	// Unavailable without the NOT_APPLIED detail (the connection may have
	// broken after the request went out): the outcome is unknown.
	return verdict{outcome: outcomeUnknown}
}
