//go:build jepsen

package scheduler

import "sync/atomic"

// The jepsen negative control of the timestamp fence: a deliberate bug
// that the jepsen suite turns on to prove its timestamp check catches it.
// It exists only in builds with the jepsen tag and is off by default.
var skipCeilingObserveControl atomic.Bool

// SetSkipCeilingObserve makes a new leader skip Observe(old ceiling) when
// it establishes its fence (on), or observe it again (off). It still
// observes the last committed HLC, so its own entries keep moving forward;
// what it loses is the guarantee that its timestamps exceed every one the
// old leader handed out after its last entry.
func SetSkipCeilingObserve(on bool) { skipCeilingObserveControl.Store(on) }

func skipCeilingObserve() bool { return skipCeilingObserveControl.Load() }
