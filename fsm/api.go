package fsm

import (
	"errors"
	"log/slog"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Default bounds of the replicated tables. They are part of the replicated
// state machine: every replica must run with the same values, or their states
// (and hashes) diverge once a table fills up. Restore refuses a snapshot that
// holds more entries than the local bound.
const (
	// DefaultRequestTableSize bounds the table of recent client request ids.
	DefaultRequestTableSize = 10000
	// DefaultDecisionRingSize bounds the ring of recent decisions.
	DefaultDecisionRingSize = 256
	// DefaultFinishedOps is how many DONE/ABORTED ops are kept (for status
	// and duplicate steps); the lowest ids are dropped first.
	DefaultFinishedOps = 128
)

// Errors returned by DecodeCommand, Restore and the read side. Errors wrap
// one of them with the detail; test with errors.Is.
var (
	// ErrUnknownCommand: a log entry holds no command this build knows
	// (empty body, or a oneof case added by a newer version).
	ErrUnknownCommand = errors.New("unknown command")
	// ErrDecode: bytes that are not a well-formed, fully known message.
	ErrDecode = errors.New("decode")
	// ErrVersion: an entry or snapshot needs a cluster version above
	// SupportedVersion.
	ErrVersion = errors.New("unsupported version")
	// ErrSnapshot: a snapshot is malformed or breaks an invariant; the
	// current state is left untouched.
	ErrSnapshot = errors.New("invalid snapshot")
)

// Options configure an FSM. Zero values take the documented defaults.
type Options struct {
	Logger *slog.Logger
	// Halt stops the process when the log or a snapshot holds something this
	// build cannot apply safely. Default: log one line at error level and
	// os.Exit(2). Tests replace it to observe the halt. Apply returns after
	// Halt returns, having changed nothing (not even the applied index).
	Halt func(error)
	// RequestTableSize bounds the table of recent client request ids
	// (default DefaultRequestTableSize); the oldest entry (by apply order) is
	// evicted first. Must be equal on every replica.
	RequestTableSize int
	// DecisionRingSize bounds the ring of recent decisions (default
	// DefaultDecisionRingSize). Must be equal on every replica.
	DecisionRingSize int
	// FinishedOps bounds the DONE/ABORTED ops kept (default
	// DefaultFinishedOps). Must be equal on every replica.
	FinishedOps int
	// HistorySize is how many catalog deltas are kept for watchers
	// (default catalog.DefaultHistory). Local serving aid, not replicated.
	HistorySize int
	// Metrics receives apply-side counters; nil disables them.
	Metrics *Metrics
	// OnCheckState receives, inside Apply of a CheckState marker, the state
	// right after it and its index, before it is published. It must not
	// block or modify the state: capture the pointer (O(1)) and hash it on
	// another goroutine. nil: nothing is captured.
	OnCheckState func(index uint64, s *State)
}

// StateHashFormat names how State.Hash is computed (sha256 of the
// deterministic protobuf encoding of State.Proto). Replicas compare hashes
// only within one format; change it whenever that encoding may change for
// an unchanged state.
const StateHashFormat = 1

// Result is what Apply returns for every entry (through
// raft.ApplyFuture.Response). Business failures are in Result.Code, never a
// Go error: the entry applied (and changed nothing unless documented).
type Result struct {
	// Index is the raft index of the entry.
	Index uint64
	*api.CommandResult
	// Duplicate is set when the request id was already applied and this is
	// its first answer returned again.
	Duplicate bool
}
