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
