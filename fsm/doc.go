// Package fsm is hotsplit's replicated state machine: a raft.FSM whose
// Apply decodes one Command envelope per log entry and runs one applyXxx
// function per command (SPEC §5), and whose snapshots capture the whole
// replicated state.
//
// Apply is deterministic: no wall clock, no randomness, no map iteration
// order in outputs, integer arithmetic only; "now" is the physical part of
// max(entry HLC, last HLC). The package never touches the network or the
// wall clock. Every applied entry publishes a new immutable State through an
// atomic pointer, so readers never block Apply and a snapshot is O(1).
//
// An entry this build cannot apply safely (unknown command or field, a
// min_version above SupportedVersion) halts the process through
// Options.Halt rather than let replicas diverge.
package fsm
