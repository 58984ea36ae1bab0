// Package raftobs adapts what hashicorp/raft says about itself to
// hotsplit's observability: its hclog lines become slog lines (levels
// mapped, keys in snake_case, per-peer warnings rate-limited; NewLogger)
// and its go-metrics become Prometheus metrics through one table
// (InstallMetrics, Registry).
//
// It only translates: it decides nothing about raft, reads no state of
// the node, and adds no metric raft does not emit. The go-metrics sink is
// process-global (raft reports through go-metrics' global), so the bridge
// is installed once per process and every node of the process shares
// Registry.
//
// Concurrency: the logger and the bridge are safe for concurrent use.
package raftobs
