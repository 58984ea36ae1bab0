//go:build !jepsen

package storage

import "github.com/hashicorp/raft"

// wrapDiskLog is the identity: the disk-full seam is jepsen-only.
func wrapDiskLog(_ string, s raft.LogStore) raft.LogStore { return s }

// wrapDiskSnapshots is the identity: the disk-full seam is jepsen-only.
func wrapDiskSnapshots(_ string, s raft.SnapshotStore) raft.SnapshotStore { return s }
