// Package columns assembles the cluster-wide load columns on the leader
// (docs/design.md#the-load-pipeline): it validates every reporter's report,
// merges the reporters' columns of one window into one, and hands the
// ObserveColumn entry to the leader's single proposer, in window order,
// exactly once per window.
//
// It has a pure core and a concurrent shell. The core is functions of their
// inputs — validating a report against a catalog and config
// (validate.go), the canonical content digest that tells a resend from a
// conflicting report (report_digest.go), the bounded priority sample of a
// row's sampled keys (priority_sample.go), and assembling the entry from a
// sealed sum (entry.go); MergeColumn runs the whole merge in one call for
// tools that replay the pipeline without a cluster (simlab). The shell is
// the sharded sum that reporters merge into in parallel (column_sum.go)
// and the Aggregator (aggregator.go, term.go), which owns a leadership
// term's open columns, acknowledgements and commit loop.
//
// It must not decide anything the state machine decides: it proposes
// columns and reads the replicated state (State) to know what applied. It
// imports neither the state machine nor raft nor any server package, does
// no network I/O of its own, and reads the wall clock only through
// Config.Now, to tell when a window has closed.
package columns
