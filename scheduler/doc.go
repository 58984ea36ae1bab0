// Package scheduler holds every duty a node has because it is the leader:
// establishing and renewing the HLC fence, the single proposer that stamps
// every command, membership changes, stepping detector ops, and running the
// load-column aggregator (package columns) for each term
// (docs/design.md#the-single-proposer,
// docs/design.md#ops-the-scheduler-and-the-switch) — and the two integrity duties that decide whether this node may lead or
// serve at all (docs/design.md#trust-and-integrity): the clock monitor (a
// node whose clock is off from a majority never keeps leadership) and the
// cross-replica state check (a replica whose state hash differs from a
// majority's stops). Those two run on every node.
//
// It is the only package that acts because this node leads. It decides
// nothing the FSM decides: it proposes, and the replicated state says what
// happened. It does no network I/O of its own; what it needs from peers
// comes through the small interfaces its constructor takes.
package scheduler
