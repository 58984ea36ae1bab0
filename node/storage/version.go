package storage

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
)

// ClusterVersionKey holds, in the raft stable store, the highest cluster
// version this data dir has applied. It is checked before raft starts, so an
// older binary refuses the data dir in one line instead of replaying a log
// it may not be able to apply (docs/design.md#the-state-machine).
var ClusterVersionKey = []byte("hotsplit_cluster_version")

// CheckClusterVersion refuses a data dir that has run at a cluster version
// above what this build supports.
func CheckClusterVersion(stable raft.StableStore, dataDir string) error {
	v, err := stable.GetUint64(ClusterVersionKey)
	if err != nil {
		return nil // never recorded: a fresh data dir, or one of the first release
	}
	if !clusterversion.IsSupported(v) {
		return fmt.Errorf("data dir %s has run at cluster version %d, this build supports %d: start a newer hotsplitd", dataDir, v, clusterversion.Supported)
	}
	return nil
}

// RecordClusterVersion persists every raise of f's applied cluster
// version until ctx ends. A failed write halts through the fatal stable
// store.
func RecordClusterVersion(ctx context.Context, stable raft.StableStore, f *fsm.FSM) {
	recorded, _ := stable.GetUint64(ClusterVersionKey)
	for {
		ch := f.Changed()
		if v := uint64(f.State().ClusterVersion()); v > recorded {
			if err := stable.SetUint64(ClusterVersionKey, v); err != nil {
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
