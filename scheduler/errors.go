package scheduler

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/hlc"
)

// Proposal failures come in two classes (docs/design.md#interfaces). Definite errors mean the
// command was certainly not appended: the caller may retry. Unknown errors
// mean it may or may not commit: only re-sending with the same request id is
// safe (the FSM's request table answers with the first result).
var (
	// ErrNotLeader: this node is not the leader (definite).
	ErrNotLeader = errors.New("not the leader")
	// ErrNotReady: leader, but the fence of this term is not established yet
	// (definite).
	ErrNotReady = errors.New("leader not ready: fence of this term not yet committed")
	// ErrEnqueueTimeout: raft did not accept the command in time (definite).
	ErrEnqueueTimeout = errors.New("raft enqueue timeout")
	// ErrTransferInProgress: a leadership transfer is under way (definite).
	ErrTransferInProgress = errors.New("leadership transfer in progress")
	// ErrOutcomeUnknown: the command was handed to raft and its fate is
	// unknown (leadership lost, shutdown, caller gave up waiting).
	ErrOutcomeUnknown = errors.New("outcome unknown")
)

// IsDefinite reports whether err means "certainly not applied". A stamp
// that waited in vain for the clock (hlc.ErrAheadOfClock) never reached raft.
func IsDefinite(err error) bool {
	return errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNotReady) ||
		errors.Is(err, ErrEnqueueTimeout) || errors.Is(err, ErrTransferInProgress) ||
		errors.Is(err, hlc.ErrAheadOfClock)
}

// classify maps a raft future error to our classes. ErrRaftShutdown is
// treated as unknown: raft reports it both for commands never enqueued and
// for commands already appended, and the two cannot be told apart.
func classify(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader):
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	case errors.Is(err, raft.ErrEnqueueTimeout):
		return fmt.Errorf("%w: %w", ErrEnqueueTimeout, err)
	case errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return fmt.Errorf("%w: %w", ErrTransferInProgress, err)
	default:
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
}
