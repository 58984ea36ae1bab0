package node

import (
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// restoreRecorder remembers why the FSM refused a snapshot. When raft finds
// no snapshot it can restore it says only "failed to load any existing
// snapshots"; the node's exit line names the reason instead (SPEC §12).
type restoreRecorder struct {
	raft.ConfigurationStore

	mu   sync.Mutex
	last error
}

func (r *restoreRecorder) Restore(rc io.ReadCloser) error {
	err := r.ConfigurationStore.Restore(rc)
	if err != nil {
		r.mu.Lock()
		r.last = err
		r.mu.Unlock()
	}
	return err
}

// explain adds the last refusal to a raft start error.
func (r *restoreRecorder) explain(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.last == nil {
		return err
	}
	return fmt.Errorf("%w (last snapshot refused: %v)", err, r.last)
}
