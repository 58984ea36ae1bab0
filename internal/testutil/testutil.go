// Package testutil holds the test helpers that tests across hotsplit's
// packages share, and only those: LogBuffer, a log sink safe to read while
// other goroutines write it, and WaitFor and Eventually, which poll a
// condition until a deadline (tests wait on conditions, never on bare
// sleeps).
//
// It is imported by _test.go files only and must not grow into a grab-bag:
// a helper that one package needs stays in that package's tests, and
// nothing here knows about hotsplit's types.
package testutil

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// LogBuffer is a bytes.Buffer that goroutines may write while the test
// reads it (a slog handler's sink, a command's output).
//
// Concurrency: safe for concurrent use.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Poll intervals: the first poll comes at once, the next after
// firstPoll, then twice as long each time up to maxPoll, so a condition
// that holds soon is seen soon and a slow one (a process, a cluster) is
// not polled in a tight loop.
const (
	firstPoll = time.Millisecond
	maxPoll   = 50 * time.Millisecond
)

var errNotYet = errors.New("condition not met")

// WaitFor polls cond until it holds and fails t, naming what it waited
// for, if d passes first.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, d, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// Eventually polls f until it returns nil and fails t, naming what it
// waited for and f's last error, if d passes first.
func Eventually(t testing.TB, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	wait := firstPoll
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			if errors.Is(err, errNotYet) {
				t.Fatalf("timed out after %v waiting for %s", d, what)
			} else {
				t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
			}
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, maxPoll)
	}
}
