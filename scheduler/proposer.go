package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/raftfuture"
)

// Applier is the part of *raft.Raft the proposer needs.
type Applier interface {
	Apply(cmd []byte, timeout time.Duration) raft.ApplyFuture
}

// Proposer is the single proposer of docs/design.md#hlc-and-the-fence: it stamps a command with the
// leader's HLC and enqueues it into raft inside one critical section, so the
// log order equals the HLC order. It never waits on a future while holding
// the lock. Safe for concurrent use.
type Proposer struct {
	raft           Applier
	clock          *hlc.Clock
	enqueueTimeout time.Duration
	minVersion     func() uint32

	mu sync.Mutex // serialises stamp+enqueue
}

// NewProposer returns a proposer over r. minVersion gives the min_version to
// put on every command (the cluster version the command's shape needs).
func NewProposer(r Applier, clock *hlc.Clock, enqueueTimeout time.Duration, minVersion func() uint32) *Proposer {
	return &Proposer{raft: r, clock: clock, enqueueTimeout: enqueueTimeout, minVersion: minVersion}
}

// Propose stamps cmd with a fenced timestamp, enqueues it and waits for it
// to apply. The returned Result carries the FSM's answer, business failures
// included; err is a definite or unknown proposal failure (see IsDefinite).
// cmd must not be used by the caller afterwards (its hlc is set here).
func (p *Proposer) Propose(ctx context.Context, cmd *api.Command) (*fsm.Result, error) {
	f, err := p.enqueue(cmd, true)
	if err != nil {
		return nil, err
	}
	return p.wait(ctx, f)
}

// proposeUnfenced is Propose with an unfenced stamp: only for
// AdvanceCeiling, which must be proposable while the fence is expired.
func (p *Proposer) proposeUnfenced(ctx context.Context, cmd *api.Command) (*fsm.Result, error) {
	f, err := p.enqueue(cmd, false)
	if err != nil {
		return nil, err
	}
	return p.wait(ctx, f)
}

func (p *Proposer) enqueue(cmd *api.Command, fenced bool) (raft.ApplyFuture, error) {
	cmd.MinVersion = max(cmd.MinVersion, p.minVersion())
	p.mu.Lock()
	defer p.mu.Unlock()
	if fenced {
		// A timestamp flood may have used up the current millisecond: wait
		// for the next one rather than fail the command.
		ts, err := p.clock.NextFencedBatchWait(1, TimestampWait)
		if errors.Is(err, hlc.ErrAheadOfClock) {
			return nil, err // definite: nothing was enqueued
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotReady, err)
		}
		cmd.Hlc = ts
	} else {
		cmd.Hlc = p.clock.Next()
	}
	data, err := fsm.EncodeCommand(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: encode command: %w", ErrNotReady, err)
	}
	return p.raft.Apply(data, p.enqueueTimeout), nil
}

func (p *Proposer) wait(ctx context.Context, f raft.ApplyFuture) (*fsm.Result, error) {
	if err := raftfuture.Wait(ctx, f); err != nil {
		// A context that ended first classifies as ErrOutcomeUnknown too:
		// the entry may still commit.
		return nil, classify(err)
	}
	res, ok := f.Response().(*fsm.Result)
	if !ok || res == nil {
		return nil, fmt.Errorf("%w: unexpected apply response %T", ErrOutcomeUnknown, f.Response())
	}
	return res, nil
}
