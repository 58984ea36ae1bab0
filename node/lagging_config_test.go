package node

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

// A node whose raft configuration lags the cluster's — here one that
// joins from a snapshot taken before the current leader was a member —
// must still let that leader's raft connections in, or it can never learn
// the newer configuration (the runbook's quorum-loss drill found this:
// after a force-new-cluster, a node added later stayed a non-voter).
func TestIntegrationLaggingConfigurationAdmitsTheNewLeader(t *testing.T) {
	skipShort(t)
	// One trailing entry: the snapshot compacts n1's log, so joining nodes
	// start from the snapshot, as after a restore or force-new-cluster.
	c := newTestCluster(t, 1, func(cfg *Config) { cfg.TrailingLogs = 1 })
	if err := c.node("n1").Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot of configuration {n1}: %v", err)
	}
	joiner := func(id, via string) Config {
		cfg := Config{ID: id, DataDir: filepath.Join(c.dir, id), Logger: quietLogger(), Join: []string{via}, TrailingLogs: 1}
		fastTiming(&cfg)
		return cfg
	}
	c.start(joiner("n2", c.node("n1").GRPCAddr()))
	c.start(joiner("n3", c.node("n1").GRPCAddr()))
	c.waitVoters(3, 20*time.Second)
	// n2 joined from n1's snapshot: the only one it holds lists n1 alone,
	// and it sends that one to the next node that joins through it.
	if err := c.node("n1").Raft().LeadershipTransferToServer("n2", raft.ServerAddress(c.cfgs["n2"].RaftAddr)).Error(); err != nil {
		t.Fatalf("leadership to n2: %v", err)
	}
	testutil.WaitFor(t, 10*time.Second, "n2 leading", func() bool { return c.leader() == "n2" })
	c.start(joiner("n4", c.node("n2").GRPCAddr()))
	c.waitVoters(4, 20*time.Second)
	c.waitConverged(10 * time.Second)
}
