//go:build jepsen

package fsm

import "sync/atomic"

// The jepsen negative control of the FSM: a deliberate bug that the jepsen
// suite turns on to prove its checker catches it. It exists only in builds
// with the jepsen tag and is off by default. The harness sets it on every
// node before any traffic (POST /jepsen/control); replicas must agree on it
// or they would diverge.
var skipCASControl atomic.Bool

// SetSkipCAS makes applyManualSplit ignore expected_version (on) or honour
// it again (off).
func SetSkipCAS(on bool) { skipCASControl.Store(on) }

func skipCAS() bool { return skipCASControl.Load() }

// testSeams is the jepsen fault seam of one FSM (not a negative control:
// it corrupts one replica on purpose, and the cross-replica state check
// must catch it).
type testSeams struct {
	corrupt atomic.Bool
}

// CorruptNextApply makes this replica's next applied entry change its
// in-memory state as no other replica's does (the fence-violation counter
// jumps by 1000): a silent divergence.
func (f *FSM) CorruptNextApply() { f.seams.corrupt.Store(true) }

func (t *testSeams) perturb(s *State) {
	if t.corrupt.CompareAndSwap(true, false) {
		s.fenceViolations += 1000
	}
}
