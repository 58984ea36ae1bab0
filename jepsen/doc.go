// Package jepsen is hotsplit's fault-injection suite: real hotsplitd
// processes (built with the jepsen tag, without -race) on 127.0.0.1 under
// kills, pauses, partitions, clock offsets and failpoints, concurrent
// clients recording what they did and saw, and a checker that judges the
// run against each node's raft log read back after the run.
//
// The suite runs with `go test -p 1 -count=1 -tags jepsen ./jepsen/...`
// (every file of this package but this one carries the jepsen tag); the
// checker's parts live in subpackages that build and test without it:
// raftlog (the independent log decoder), model (the independent catalog
// model and log replay), history (client records), checker (all checks,
// porcupine, artifacts) and cluster (process control and the jepsen HTTP
// seam). docs/jepsen.md explains the faults, the model, the invariants,
// how to rerun a seed, and the latest results.
//
// The suite never touches an address outside 127.0.0.0/8, bounds every
// loop in operations and time, and writes everything a failed run leaves
// behind under one directory whose path it prints.
package jepsen
