// Package storage is a node's durable raft state and its integrity
// (docs/design.md#fail-stop, docs/design.md#checksummed-log): raft.db opened
// defensively (bbolt's panics and mmap faults become errors naming the file),
// every log entry and stable-store value checksummed on write and verified on
// read, a failed write or a damaged read stopping the node in one line,
// snapshots that cannot be written doing the same, and the checks a data dir
// passes before raft starts — the snapshot raft will restore must meet the log
// (CheckSnapshotCoverage), the data dir must not have run at a newer cluster
// version (CheckClusterVersion, RecordClusterVersion keep that mark), a
// snapshot refused at start stays refused (RestoreGuard), and a recovery flag
// runs once per data dir (CheckRecoveryOnce, WriteRecoveryMark). It also keeps
// the member table the node last applied in the data dir (RecordMembers,
// ReadMemberRecord), which health uses after a restart until the log applies
// again.
//
// It does not start raft, does not decide what a command does, and does
// not recover a cluster: node does those with the stores it opens. The
// jepsen build adds a disk that fills up (SetDiskFullAfter); normal builds
// have no seam.
//
// Concurrency: the stores are safe for concurrent use as raft uses them;
// Config.Halt may be called from raft's goroutines.
package storage
