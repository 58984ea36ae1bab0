package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/hotsplit/hotsplit/client"
)

// Exit codes (documented in the root command's help).
const (
	exitOK          = 0
	exitRefused     = 1 // the cluster answered no: validation, precondition, not found
	exitUsage       = 2 // the command line is wrong; nothing was sent
	exitUnavailable = 3 // no answer, or a mutation whose outcome is unknown
	exitDegraded    = 4 // cluster health: quorum holds, a member is not healthy
	exitNoQuorum    = 5 // cluster health: no quorum or no leader
	// exitCredentials: the connection settings cannot work, and retrying
	// will not change that: a certificate expired, not yet valid or
	// refused, the wrong CA, TLS against plaintext or the reverse, a port
	// that is no gRPC port. Nothing was applied; the message names the flag
	// or file to fix.
	exitCredentials = 6
)

// usageError is a command line the CLI refuses before contacting anyone.
type usageError struct {
	path string // command path, e.g. "hotsplitctl split"
	err  error
}

func (e *usageError) Error() string {
	cmd, isSub := strings.CutPrefix(e.path, "hotsplitctl ")
	if !isSub {
		return fmt.Sprintf("%v (see '%s --help')", e.err, e.path)
	}
	return fmt.Sprintf("%s: %v (see '%s --help')", cmd, e.err, e.path)
}

func (e *usageError) Unwrap() error { return e.err }

func usageErr(cmd *cobra.Command, err error) error {
	return &usageError{path: cmd.CommandPath(), err: err}
}

func usageErrorf(cmd *cobra.Command, format string, args ...any) error {
	return usageErr(cmd, fmt.Errorf(format, args...))
}

// cmdError is a failed request, with what the operator asked for and, for a
// mutation, how to resolve an unknown outcome.
type cmdError struct {
	action  string // e.g. `split r7 at "k"`
	err     error
	resolve string // advice when the outcome is unknown
}

func (e *cmdError) Error() string { return e.action + ": " + e.err.Error() }
func (e *cmdError) Unwrap() error { return e.err }

// failed wraps a read's error.
func failed(action string, err error) error {
	return &cmdError{action: action, err: err}
}

// failedMutation wraps the error of a mutation that carries a request id
// the server remembers: re-sending it with that id learns its first answer.
func failedMutation(action string, err error) error {
	id := client.RequestID(err)
	return &cmdError{action: action, err: err,
		resolve: fmt.Sprintf("re-run the same command with --request-id %s to learn whether it was applied", id)}
}

// failedMembership wraps the error of a membership mutation, whose request
// has no request id to re-send.
func failedMembership(action string, err error) error {
	return &cmdError{action: action, err: err,
		resolve: "check 'hotsplitctl cluster members' before retrying"}
}

// describe renders err as the one line printed to stderr.
func describe(err error) string {
	var ue *usageError
	if errors.As(err, &ue) {
		return oneLine(ue.Error())
	}
	var ce *cmdError
	if errors.As(err, &ce) {
		s := ce.action + ": " + describeCause(ce.err)
		if errors.Is(ce.err, client.ErrUnknownOutcome) && ce.resolve != "" {
			s += "; " + ce.resolve
		}
		return oneLine(s)
	}
	if _, ok := errors.AsType[*client.Error](err); ok {
		return oneLine(describeCause(err))
	}
	return oneLine(err.Error())
}

func describeCause(err error) string {
	if pe, ok := errors.AsType[*client.PermanentError](err); ok {
		// The flag or file to fix, and why: gRPC's code and the attempt
		// count say nothing more.
		return pe.Explain(flagName)
	}
	var e *client.Error
	if !errors.As(err, &e) {
		switch {
		case errors.Is(err, context.Canceled):
			return "interrupted"
		case errors.Is(err, context.DeadlineExceeded):
			return "timed out (see --timeout)"
		}
		return err.Error()
	}
	where := ""
	msg := forPeople(e.Message())
	if e.Endpoint != "" && !strings.Contains(msg, e.Endpoint) {
		where = " from " + e.Endpoint
	}
	var notes []string
	if e.Attempts > 1 {
		notes = append(notes, fmt.Sprintf("%d attempts", e.Attempts))
	}
	for _, pe := range e.Skipped {
		notes = append(notes, "skipped "+pe.Explain(flagName))
	}
	switch {
	case errors.Is(err, client.ErrUnknownOutcome):
		return fmt.Sprintf("outcome unknown, it may have been applied (request id %s): %s%s: %s",
			e.RequestID, e.Code(), where, msg)
	case client.IsDefinite(err):
		notes = append([]string{"not applied"}, notes...)
	}
	s := fmt.Sprintf("%s%s: %s", e.Code(), where, msg)
	if len(notes) > 0 {
		s += " (" + strings.Join(notes, ", ") + ")"
	}
	return s
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ue *usageError
	if code, ok := healthExit(err); ok {
		return code
	}
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.Is(err, client.ErrPermanent):
		return exitCredentials
	case errors.Is(err, client.ErrUnknownOutcome),
		errors.Is(err, client.ErrCatalogChanging),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded):
		return exitUnavailable
	}
	var e *client.Error
	if errors.As(err, &e) {
		switch e.Code() {
		case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
			return exitUnavailable
		}
	}
	return exitRefused
}
