package node

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// restoreRecorder makes a refused snapshot final. When the FSM refuses the
// snapshot raft restores at start, raft would fall back to an older one —
// whose log may not reach it (checkSnapshotCoverage vetted only the newest
// valid one) and which silently rolls the node back. Instead every later
// restore of this start fails too, raft gives up, and the start error names
// the snapshot and the reason. Once raft runs, a refused snapshot (one the
// leader installs) halts the node: fail-stop rather than serve an old state.
type restoreRecorder struct {
	raft.ConfigurationStore
	halt func(error)
	// snapshot names the snapshot raft restores at start, for the error.
	snapshot string

	mu      sync.Mutex
	last    error
	started bool
}

func (r *restoreRecorder) Restore(rc io.ReadCloser) error {
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

// running marks the end of raft's start: later refusals halt.
func (r *restoreRecorder) running() {
	r.mu.Lock()
	r.started, r.last = true, nil
	r.mu.Unlock()
}

// explain adds the refusal to a raft start error.
func (r *restoreRecorder) explain(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return err
	}
	return fmt.Errorf("%w (snapshot %s refused: %v)", err, r.snapshot, r.last)
}
