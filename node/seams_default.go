//go:build !jepsen

package node

import (
	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
)

// Normal builds have no fault seams: the clock is the clock and the FSM is
// the FSM.
func wrapClock(src hlc.Source) hlc.Source { return src }

func wrapFSM(_ string, f *fsm.FSM, _ func() bool) raft.ConfigurationStore { return f }

// wrapDiskLog is the identity: the disk-full seam is jepsen-only.
func wrapDiskLog(_ string, s raft.LogStore) raft.LogStore { return s }

// wrapDiskSnapshots is the identity: the disk-full seam is jepsen-only.
func wrapDiskSnapshots(_ string, s raft.SnapshotStore) raft.SnapshotStore { return s }
