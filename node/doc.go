// Package node wires one hotsplit server together and runs it. Start
// makes the node's HLC first (a recovery seeds from its physical clock),
// then builds the rest in phases, each handing what it built to the next
// ones' constructors:
//
//   - listen: the process metrics, the node's identity (TLS material,
//     bearer tokens) and its raft, gRPC and HTTP listeners, capped;
//   - storage: raft's log, stable and snapshot stores (node/storage:
//     checksummed, fail-stop);
//   - raft: the network to the other nodes (node/raftnet: the stream
//     layer with its membership check, the transport, the fresh leadership
//     verification), the FSM, the configured recovery (--restoreSnapshot,
//     --forceNewCluster) and the data dir's checks, then raft itself and,
//     for a fresh --bootstrap node, its one-voter configuration;
//   - duties: the peer client (transport.Peers) and what runs
//     beside raft: the clock monitor, the state checker, the scheduler
//     (leader duties, the column aggregator) and the health monitor
//     (node/health);
//   - servers: the gRPC services (transport) and the HTTP endpoints
//     (/metrics with raft's bridged metrics from node/raftobs, /healthz,
//     /readyz, /debug/pprof/);
//   - serve: every goroutine, and the join or announcement to the cluster.
//
// Node itself owns what ties those together: the membership answers the
// raft port asks (who is a member, who lives at an address, the latest
// committed configuration), the halt that stops the process in one line
// (and the gate that makes it the last), removal from the cluster, the
// node's own metrics, recovery and --inspect, and Close.
//
// It holds no business rules: those live in fsm (what a command does),
// scheduler (what the leader does) and transport (how requests arrive);
// nor does it reach into its sub-packages' work (integrity checks, the
// network's identity checks, health decisions). Test seams — a
// fault-injecting dialer (node/raftnet), a clock offset, failpoints, a disk
// that fills up (node/storage), an in-memory state corruption — are
// compiled in only with the `jepsen` build tag.
package node
