package node

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/fsm"
)

// clusterVersionKey holds, in the raft stable store, the highest cluster
// version this data dir has applied. It is checked before raft starts, so an
// older binary refuses the data dir in one line instead of replaying a log
// it may not be able to apply (SPEC §5).
var clusterVersionKey = []byte("hotsplit_cluster_version")

// checkClusterVersion refuses a data dir that has run at a cluster version
// above what this build supports.
func checkClusterVersion(stable raft.StableStore, dataDir string) error {
	v, err := stable.GetUint64(clusterVersionKey)
	if err != nil {
		return nil // never recorded: a fresh data dir, or one of the first release
	}
	if !fsm.Supported(v) {
		return fmt.Errorf("data dir %s has run at cluster version %d, this build supports %d: start a newer hotsplitd", dataDir, v, fsm.SupportedVersion)
	}
	return nil
}

// recordClusterVersion persists every raise of the applied cluster version
// until ctx ends. A failed write halts through the fatal stable store.
func (n *Node) recordClusterVersion(ctx context.Context, stable raft.StableStore) {
	recorded, _ := stable.GetUint64(clusterVersionKey)
	for {
		ch := n.fsm.Changed()
		if v := uint64(n.fsm.State().ClusterVersion()); v > recorded {
			if err := stable.SetUint64(clusterVersionKey, v); err != nil {
				return
			}
			recorded = v
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}
