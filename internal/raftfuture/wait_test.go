package raftfuture

import (
	"context"
	"errors"
	"testing"
	"time"
)

// future is a raft.Future answered when answer is closed.
type future struct {
	answer chan struct{}
	err    error
}

func (f *future) Error() error {
	<-f.answer
	return f.err
}

func TestWaitReturnsTheAnswer(t *testing.T) {
	boom := errors.New("boom")
	for _, want := range []error{nil, boom} {
		f := &future{answer: make(chan struct{}), err: want}
		close(f.answer)
		if err := Wait(context.Background(), f); err != want {
			t.Fatalf("Wait = %v, want %v", err, want)
		}
	}
}

// A context that ends first gives up with its own error, however long raft
// takes; the answer that comes later is not lost to a blocked goroutine.
func TestWaitGivesUpWithTheContext(t *testing.T) {
	f := &future{answer: make(chan struct{}), err: errors.New("late")}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	err := Wait(ctx, f)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ctx.Err()) {
		t.Fatalf("Wait = %v, want the context's deadline error", err)
	}
	close(f.answer) // lets the goroutine still waiting on f finish
}
