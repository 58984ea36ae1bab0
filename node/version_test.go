package node

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	raftboltdb "github.com/hashicorp/raft-boltdb/v2"

	"github.com/hotsplit/hotsplit/fsm"
)

// A data dir that has run at a cluster version above this build's is
// refused before raft starts, naming both versions.
func TestIntegrationDataDirAboveSupportedVersionIsRefused(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 1, nil)
	cfg := c.cfgs["n1"]
	waitFor(t, 5*time.Second, "cluster version recorded", func() bool {
		v, err := c.node("n1").store.GetUint64(clusterVersionKey)
		return err == nil && v == uint64(c.node("n1").FSM().State().ClusterVersion())
	})
	c.stop("n1")

	store, err := raftboltdb.NewBoltStore(filepath.Join(cfg.DataDir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	sealed := &checksumStableStore{inner: store, path: "raft.db"}
	if err := sealed.SetUint64(clusterVersionKey, fsm.SupportedVersion+1); err != nil {
		t.Fatal(err)
	}
	store.Close()

	_, err = Start(cfg)
	if err == nil {
		t.Fatal("a data dir at a newer cluster version started")
	}
	if want := "has run at cluster version"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
}
