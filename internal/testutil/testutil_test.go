package testutil

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as testing.T's does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a recorder on its own goroutine and returns what it
// failed with ("" if it returned).
func run(fn func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r.failed
}

func TestWaitForReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	failed := run(func(tb testing.TB) {
		WaitFor(tb, 10*time.Second, "the third call", func() bool { calls++; return calls == 3 })
	})
	if failed != "" || calls != 3 {
		t.Fatalf("failed %q after %d calls, want success on the third", failed, calls)
	}
}

func TestWaitForFailsAtTheDeadline(t *testing.T) {
	start := time.Now()
	failed := run(func(tb testing.TB) {
		WaitFor(tb, 20*time.Millisecond, "a condition that never holds", func() bool { return false })
	})
	if !strings.Contains(failed, "waiting for a condition that never holds") || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("failed %q after %v", failed, time.Since(start))
	}
}

func TestEventuallyNamesTheLastError(t *testing.T) {
	n := 0
	failed := run(func(tb testing.TB) {
		Eventually(tb, 20*time.Millisecond, "a ready leader", func() error { n++; return fmt.Errorf("attempt %d: no leader", n) })
	})
	want := fmt.Sprintf("attempt %d: no leader", n)
	if !strings.Contains(failed, "waiting for a ready leader") || !strings.HasSuffix(failed, want) {
		t.Fatalf("failed %q, want it to name the last error %q", failed, want)
	}
	if failed := run(func(tb testing.TB) {
		Eventually(tb, time.Second, "nothing", func() error { return nil })
	}); failed != "" {
		t.Fatalf("Eventually of a nil error failed: %q", failed)
	}
}

// Writers on many goroutines lose nothing, and reading meanwhile is safe
// (the race detector checks).
func TestLogBufferConcurrent(t *testing.T) {
	var b LogBuffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				fmt.Fprintf(&b, "line from %d\n", i)
				_ = b.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(b.String(), "\n"); got != 800 {
		t.Fatalf("%d lines, want 800", got)
	}
}
