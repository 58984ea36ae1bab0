// Package raftfuture waits for a hashicorp/raft future within a context.
//
// raft's futures block until raft answers and take no context; every
// caller that must honour a deadline (a proposal, a membership change, a
// leadership check) needs the same small wait, so it is written here once.
// The package only waits: it never cancels, retries or classifies errors,
// which stay the caller's business.
package raftfuture

import (
	"context"

	"github.com/hashicorp/raft"
)

// Wait returns f's error once raft answers, or ctx.Err() itself if ctx
// ends first. Giving up does not cancel anything: the operation may still
// complete, and the goroutine waiting on f ends when raft answers it (raft
// answers every future, at the latest on shutdown). raft never answers
// with a context error, so errors.Is(err, ctx.Err()) tells the two apart.
func Wait(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
