// Package node wires one hotsplit server together: the raft log and stable
// store (bbolt, wrapped so that a failed write stops the process), the
// snapshot store, raft's TCP stream layer, the FSM, the scheduler (leader
// duties), the gRPC transport and the HTTP endpoints (/metrics, /healthz,
// /readyz, /debug/pprof/).
//
// It holds no business rules: those live in fsm (what a command does),
// scheduler (what the leader does) and transport (how requests arrive).
// Test seams — a fault-injecting dialer, a clock offset, failpoints — are
// compiled in only with the `jepsen` build tag.
package node
