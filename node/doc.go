// Package node wires one hotsplit server together: the raft log and stable
// store (bbolt, checksummed on every write and read, wrapped so that a
// failed write or a damaged read stops the process in one line), the
// snapshot store (checked before raft starts), raft's TCP stream layer, the FSM, the scheduler (leader
// duties), the gRPC transport and the HTTP endpoints (/metrics, /healthz,
// /readyz, /debug/pprof/).
//
// It holds no business rules: those live in fsm (what a command does),
// scheduler (what the leader does) and transport (how requests arrive).
// Test seams — a fault-injecting dialer, a clock offset, failpoints, a disk
// that fills up, an in-memory state corruption — are compiled in only with
// the `jepsen` build tag.
package node
