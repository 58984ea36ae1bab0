//go:build jepsen

package transport

import (
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// The jepsen negative controls of the read path: deliberate bugs that the
// jepsen suite turns on to prove its checker catches them. They exist only
// in builds with the jepsen tag and are off by default.
var readControls struct {
	followerLocalReads atomic.Bool
	skipReadIndex      atomic.Bool
}

// SetReadControls sets the read-path negative controls:
// followerLocalReads makes a follower answer linearizable ListRoutes from
// its own state instead of forwarding it; skipReadIndex makes the leader
// answer linearizable reads without the read-index round.
func SetReadControls(followerLocalReads, skipReadIndex bool) {
	readControls.followerLocalReads.Store(followerLocalReads)
	readControls.skipReadIndex.Store(skipReadIndex)
}

// unsafeLocalRead reports whether a negative control says to answer a
// linearizable read from this node's own state right now.
func (s *Server) unsafeLocalRead() bool {
	if readControls.followerLocalReads.Load() && s.cfg.Raft.State() != raft.Leader {
		return true
	}
	return readControls.skipReadIndex.Load() && s.cfg.Sched.IsReady()
}
