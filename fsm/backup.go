package fsm

import (
	"fmt"
	"io"
)

// WriteState writes s in the snapshot file format (what raft's snapshots
// and hotsplitctl's backups hold). s is immutable, so this may run beside
// Apply.
func WriteState(w io.Writer, s *State) error {
	if err := writeSnapshot(w, s); err != nil {
		return fmt.Errorf("fsm: write state at index %d: %w", s.index, err)
	}
	return nil
}

// ReadState decodes a snapshot file (WriteState's output) with the default
// table limits and checks every invariant, as Restore does. It is how a
// backup is verified before it seeds a new cluster.
func ReadState(r io.Reader) (*State, error) {
	return readSnapshot(r, snapshotLimits{requests: DefaultRequestTableSize, decisions: DefaultDecisionRingSize, finishedOps: DefaultFinishedOps})
}
