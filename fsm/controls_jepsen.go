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
