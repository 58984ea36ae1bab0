// Package model is the jepsen checker's own reading of hotsplit's raft log:
// a small catalog model (routes, the split transition, the SPEC §3
// invariants, a canonical hash) and a replay of the committed log under the
// SPEC's rules for manual splits (expected-version CAS, the HLC fence),
// op steps (duplicates, pausing, aborting), the auto-split switch and the
// request-id table.
//
// It deliberately shares no code with catalog/ or fsm/: a bug there must
// show up as a difference between this model and what the cluster
// answered, not be reproduced by the checker. Where the replay cannot know
// something the FSM knows (which ops the detector planned, and how many
// steps each has), it follows the entries the leader proposed and says so
// in its notes; anything it cannot decide is an error, never a guess.
//
// It does no I/O and keeps no global state; everything is a pure function
// of the entries it is given.
package model
