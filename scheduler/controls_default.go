//go:build !jepsen

package scheduler

// skipCeilingObserve is the jepsen negative control (see
// controls_jepsen.go); normal builds always observe the old ceiling.
func skipCeilingObserve() bool { return false }
