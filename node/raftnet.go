package node

import "github.com/hashicorp/raft"

// mainLoopHeartbeats is raft's NetworkTransport with its heartbeat fast path
// turned off, so every AppendEntries, heartbeats included, is handled by
// raft's main loop.
//
// Why: hashicorp/raft v1.7.2 handles a heartbeat on the transport goroutine
// (hashicorp/raft#695, fix proposed in #701). A heartbeat carrying a newer
// term bumps currentTerm and steps the node down with no synchronisation
// against the leader loop, which can meanwhile stamp a client entry with the
// new term and replicate it: two nodes then commit different entries at
// one index under one term. jepsen's pause storm finds exactly that in about
// one storm in four; with heartbeats in the main loop it found none. The
// cost: a follower busy writing a large batch answers a heartbeat after it
// rather than beside it, which the election timeout (1 s by default, far
// above a batch write) absorbs.
type mainLoopHeartbeats struct {
	*raft.NetworkTransport
}

// SetHeartbeatHandler ignores the handler: raft then receives heartbeats on
// its consumer channel like any other RPC.
func (mainLoopHeartbeats) SetHeartbeatHandler(func(raft.RPC)) {}
