// Package model is the jepsen checker's own reading of hotsplit's raft log:
// a small catalog model (routes with their lineage, the split and merge
// transitions, the docs/design.md#the-catalog invariants, a canonical hash) and a replay of
// the committed log under the design's rules for manual splits and merges
// (expected-version CAS, the HLC fence, the merge refusals), op steps of
// split and merge ops (duplicates, pausing, aborting), the auto-split
// switch, the request-id table and the cluster version that turns merges
// on.
//
// It deliberately shares no code with catalog/ or fsm/: a bug there must
// show up as a difference between this model and what the cluster
// answered, not be reproduced by the checker. Where the replay cannot know
// something the FSM knows (which ops the detector planned, how many steps
// each has, which routes a live op holds against a manual merge), it
// follows the op-step entries the leader proposed — earlier and later in
// the log — and says so in its notes; anything it cannot decide is an
// error, never a guess.
//
// It does no I/O and keeps no global state; everything is a pure function
// of the entries it is given.
package model
