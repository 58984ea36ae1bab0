//go:build jepsen

package fsm

import "sync/atomic"

// The jepsen negative controls of the FSM: deliberate bugs that the jepsen
// suite turns on to prove its checker catches them. They exist only in
// builds with the jepsen tag and are off by default. The harness sets them
// on every node before any traffic (POST /jepsen/control); replicas must
// agree on them or they would diverge.
var skipCASControl, skipMergeCASControl atomic.Bool

// SetSkipCAS makes applyManualSplit ignore expected_version (on) or honour
// it again (off).
func SetSkipCAS(on bool) { skipCASControl.Store(on) }

func skipCAS() bool { return skipCASControl.Load() }

// SetSkipMergeCAS makes applyManualMerge ignore expected_version (on) or
// honour it again (off).
func SetSkipMergeCAS(on bool) { skipMergeCASControl.Store(on) }

func skipMergeCAS() bool { return skipMergeCASControl.Load() }

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
