package node

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// failingLogStore fails every write once armed.
type failingLogStore struct {
	raft.LogStore
	armed *atomic.Bool
}

var errDiskGone = errors.New("injected: disk gone")

func (s failingLogStore) StoreLog(l *raft.Log) error {
	if s.armed.Load() {
		return errDiskGone
	}
	return s.LogStore.StoreLog(l)
}

func (s failingLogStore) StoreLogs(ls []*raft.Log) error {
	if s.armed.Load() {
		return errDiskGone
	}
	return s.LogStore.StoreLogs(ls)
}

func TestIntegrationFailingLogStoreStopsTheNode(t *testing.T) {
	skipShort(t)
	var armed atomic.Bool
	halted := make(chan error, 1)
	c := newTestCluster(t, 3, func(cfg *Config) {
		if cfg.ID == "n1" {
			cfg.wrapLogStore = func(s raft.LogStore) raft.LogStore { return failingLogStore{s, &armed} }
			cfg.Halt = func(err error) { halted <- err }
		}
	})
	n1 := c.node("n1")
	armed.Store(true)
	// Any write reaches n1's log: a split as leader, or replication as
	// follower. Its outcome may well be unknown: n1 stops mid-request.
	c.split(c.followers()[0], "q")
	select {
	case err := <-halted:
		if !errors.Is(err, errDiskGone) {
			t.Fatalf("halt reason %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("node with a failing log store kept running")
	}
	<-n1.Halted()
	testutil.WaitFor(t, 5*time.Second, "n1 to stop serving", func() bool {
		_, err := c.catalogClient("n1").ListRoutes(ctxT(t, time.Second), &api.ListRoutesRequest{Consistency: api.Consistency_CONSISTENCY_STALE})
		return status.Code(err) == codes.Unavailable
	})
	// The others go on without it.
	c.forgetHalted("n1")
	c.waitLeaderReady(5 * time.Second)
	c.mustSplit(c.leader(), "s")
}
