// Package health is one node's view of its cluster's health (docs/design.md#trust-and-integrity,
// Cluster.Health): a monitor probes every member's progress, follows
// raft's heartbeat observations on the leader, and decides per member
// whether it is reachable and caught up, and for the cluster whether it
// has a quorum (decideHealth, a pure function of what the monitor saw).
// Any node answers from it, leader or not. It also notices when a leader's
// committed configuration no longer lists this node, and reports the
// newest committed configuration the members answered with (the raft
// port's admission check reads it).
//
// It acts on nothing: it neither changes membership nor stops the node;
// it calls the node back (onRemoved) and answers questions.
//
// Concurrency: a Monitor is safe for concurrent use; Run and the probes
// run on their own goroutines, onRemoved may be called from either.
package health
