// Package transport adapts gRPC to hotsplit: the Catalog, Load, AutoSplit
// and Cluster services, one-hop forwarding to the leader, the linearizable
// read path of docs/design.md#interfaces, and the mapping of every failure to a deliberately
// chosen status code with its outcome class (definitely not applied, or
// unknown).
//
// It holds no business rules: validation of request shape happens here so
// that nothing of a malformed request reaches the log, but what a command
// does is decided by the FSM and when the leader acts by the scheduler.
package transport
