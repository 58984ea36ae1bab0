// Package simlab replays hotsplit's whole split-decision pipeline in
// virtual time: simulated data nodes (keyviz samplers fed by a sim
// workload), the leader's column merge (columns.MergeColumn), the
// replicated state machine with its detector (fsm), and the scheduler's op
// steps — without raft, network or wall clock. A run of a few hundred
// columns takes a second or two, so split rules can be measured over many
// seeds: how many splits a workload costs, how long until relief, how many
// children never receive load. Runs are reproducible: the same Spec and
// seed give the same result.
//
// It is a measuring instrument for tests, the long suite and
// docs/benchmarks.md (cmd/simtable prints its table); nothing in a server
// or a data node links it.
package simlab
