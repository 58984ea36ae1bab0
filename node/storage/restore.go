package storage

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// RestoreGuard makes a refused snapshot final. When the FSM refuses the
// snapshot raft restores at start, raft would fall back to an older one —
// whose log may not reach it (CheckSnapshotCoverage vetted only the newest
// valid one) and which silently rolls the node back. Instead every later
// restore of this start fails too, raft gives up, and the start error names
// the snapshot and the reason. Once raft runs, a refused snapshot (one the
// leader installs) halts the node: fail-stop rather than serve an old state.
//
// Safe for concurrent use: raft restores on its own goroutines.
type RestoreGuard struct {
	raft.ConfigurationStore
	halt func(error)
	// snapshot names the snapshot raft restores at start, for the error.
	snapshot string

	mu      sync.Mutex
	last    error
	started bool
}

// NewRestoreGuard guards the restores of f; snapshot names the snapshot
// raft restores at start (CheckSnapshotCoverage's answer), halt stops the
// node.
func NewRestoreGuard(f raft.ConfigurationStore, halt func(error), snapshot string) *RestoreGuard {
	return &RestoreGuard{ConfigurationStore: f, halt: halt, snapshot: snapshot}
}

func (r *RestoreGuard) Restore(rc io.ReadCloser) error {
	r.mu.Lock()
	refused, started := r.last, r.started
	r.mu.Unlock()
	if refused != nil && !started {
		rc.Close()
		return fmt.Errorf("not falling back to an older snapshot after refusing %s: %w", r.snapshot, refused)
	}
	err := r.ConfigurationStore.Restore(rc)
	if err != nil {
		r.mu.Lock()
		r.last = err
		r.mu.Unlock()
		if started {
			r.halt(fmt.Errorf("refused a snapshot installed by the leader: %w", err))
		}
	}
	return err
}

// Running marks the end of raft's start: later refusals halt.
func (r *RestoreGuard) Running() {
	r.mu.Lock()
	r.started, r.last = true, nil
	r.mu.Unlock()
}

// Explain adds the refusal to a raft start error.
func (r *RestoreGuard) Explain(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return err
	}
	return fmt.Errorf("%w (snapshot %s refused: %v)", err, r.snapshot, r.last)
}
