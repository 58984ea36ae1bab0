// Package raftnet is the network between the nodes of one cluster as raft
// and the node-to-node gRPC calls see it: raft's stream layer (mutual TLS,
// the membership check on every connection, the handshake cap and the
// sweep of removed members' connections), raft's transport with
// heartbeats routed through raft's main loop, the leadership verification
// that counts only fresh answers, and the identity check of every
// connection one node opens to another (raft or gRPC).
//
// It decides nothing about membership: who is a member, and which member
// lives at an address, come in as functions (StreamConfig.Admit,
// ExpectAt). It reads no FSM, starts no raft, and holds no business rule.
// The jepsen build adds a fault-injecting dialer (DefaultDialer,
// SetLinkFaults); normal builds have no seam.
//
// Concurrency: the stream layer, the transport and the credentials are
// safe for concurrent use; Admit and ExpectAt are called from the stream's
// own goroutines, also before raft has started.
package raftnet
