// Package fsm is hotsplit's replicated state machine: a raft.FSM (and
// raft.ConfigurationStore) whose Apply decodes one Command envelope per log
// entry and runs one applyXxx function per command
// (docs/design.md#the-state-machine and
// docs/design.md#ops-the-scheduler-and-the-switch), and whose snapshots capture
// the whole replicated state.
//
// Determinism. Apply reads no wall clock, no randomness and no map order,
// and uses integer arithmetic only; "now" is the physical part of
// max(entry HLC, last HLC), so no deadline computed in Apply moves
// backwards. The package never touches the network. (The one clock read is
// the monotonic one timing Apply for the latency histogram; nothing read
// from it reaches the state.)
//
// Halting. An entry this build cannot apply safely — an unknown command or
// field at any depth, a min_version or bootstrap cluster_version above
// SupportedVersion, or members that all support a version above it — calls
// Options.Halt and publishes nothing (not even the applied index): a
// replica that guessed would diverge from the others.
//
// Outcomes. Business failures are result codes in the returned *Result,
// never Go errors or panics. A rejected command changes nothing of the
// replicated state except bookkeeping every entry does: last_hlc =
// max(last_hlc, entry HLC), the request table (its answer, failures
// included, is stored under its request id) and, for a fence violation,
// the fence_violations counter. Op steps make the documented op changes
// (PAUSED when the switch is off, ABORTED when the target changed shape).
//
// Publishing. Every entry the FSM sees publishes a new immutable *State
// through an atomic pointer: readers never block Apply, WaitIndex and
// Changed need no lock, and Snapshot is O(1).
//
// Bounded replicated tables (they are part of the state, so every replica
// must use the same bounds): the request-id table (DefaultRequestTableSize,
// FIFO by apply order), the decision ring (DefaultDecisionRingSize), the
// finished ops kept (DefaultFinishedOps, lowest id dropped first). Live ops
// are always kept; the detector's route cap bounds them. Ids — op ids,
// decision and request sequence numbers — are counters starting at 1.
package fsm
