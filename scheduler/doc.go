// Package scheduler holds every duty a node has because it is the leader:
// establishing and renewing the HLC fence, the single proposer that stamps
// every command, membership changes, stepping detector ops and assembling
// load columns (SPEC §4, §7, §8).
//
// It is the only package that acts because this node leads. It decides
// nothing the FSM decides: it proposes, and the replicated state says what
// happened. It does no network I/O of its own; what it needs from peers
// comes through the small interfaces its constructor takes.
package scheduler
