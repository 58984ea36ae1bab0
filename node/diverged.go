package node

import (
	"fmt"
	"os"
	"path/filepath"

	"google.golang.org/protobuf/encoding/protojson"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
)

// diverged runs when a majority of the members holds another state hash
// than this node at a CheckState marker: this replica applied the same log
// into a different state (memory corruption, a bug, a changed entry that
// slipped past the checksums). It writes the state for a post-mortem, then
// stops the node in one line: a replica that may serve wrong reads must not
// serve at all, the leader included (docs/design.md#trust-and-integrity).
func (n *Node) diverged(index uint64, st *fsm.State, v *api.CheckStateResponse) {
	var mine, theirs []byte
	for _, r := range v.GetReports() {
		switch r.GetOutcome() {
		case api.StateOutcome_STATE_OUTCOME_DIVERGED:
			if r.GetNodeId() == n.cfg.ID {
				mine = r.GetHash()
			}
		case api.StateOutcome_STATE_OUTCOME_AGREES:
			theirs = r.GetHash()
		}
	}
	path := filepath.Join(n.cfg.DataDir, fmt.Sprintf("diverged-state-%d.json", index))
	dumped := "state dumped to " + path
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(st.Proto())
	if err == nil {
		err = os.WriteFile(path, b, 0o640)
	}
	if err != nil {
		dumped = fmt.Sprintf("state dump to %s failed: %v", path, err)
	}
	n.halt(fmt.Errorf("state check at index %d: this node's state hash %x differs from %x held by a majority of the members; %s",
		index, mine, theirs, dumped))
}
