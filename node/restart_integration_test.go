package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/node/storage"
)

// After every node of a cluster stopped, the first one back (alone, so no
// leader can commit and its FSM stays empty: the cluster never took a
// snapshot) reads as what it is: a member of its cluster, by id, without a
// quorum, its two peers listed with their records and unreachable, and a
// reason saying its log is not applied yet; never "cluster -" or servers
// "without a member record (mid-join?)". With the others back it is
// healthy and the reason is gone.
func TestIntegrationFullRestartReadsAsSuch(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 3, nil)
	c.waitLeaderReady(10 * time.Second)
	cluster := c.node("n1").FSM().State().ClusterID()
	for _, id := range []string{"n1", "n2", "n3"} {
		path := filepath.Join(c.cfgs[id].DataDir, storage.MembersFile)
		testutil.WaitFor(t, 10*time.Second, id+" recording three members", func() bool {
			r := storage.ReadMemberRecord(c.cfgs[id].DataDir)
			return r != nil && len(r.Members()) == 3 && r.ClusterID == cluster
		})
		if _, err := os.Stat(path); err != nil {
			t.Fatal(err)
		}
	}
	c.stopAll()
	n1 := c.restart("n1")
	if n1.FSM().State().Bootstrapped() {
		t.Fatal("the restarted node's FSM holds state before any commit: the test would not show the record in use")
	}
	ctx := ctxT(t, time.Minute)
	var r *api.HealthResponse
	testutil.Eventually(t, 10*time.Second, "n1 alone reading as a member of its cluster without a quorum", func() error {
		var err error
		if r, err = c.clusterClient("n1").Health(ctx, &api.HealthRequest{}); err != nil {
			return err
		}
		text := fmt.Sprint(r)
		switch {
		case r.GetClusterId() != cluster:
			return fmt.Errorf("cluster %q, want %q", r.GetClusterId(), cluster)
		case r.GetStatus() != api.HealthStatus_HEALTH_STATUS_NO_QUORUM || r.GetVoters() != 3 || r.GetVotersReachable() != 1:
			return fmt.Errorf("status %v with %d of %d voters reachable", r.GetStatus(), r.GetVotersReachable(), r.GetVoters())
		case strings.Contains(text, "without a member record"):
			return fmt.Errorf("a server without a member record: %v", r)
		case !strings.Contains(strings.Join(r.GetReasons(), "; "), "has not applied its log since it started"):
			return fmt.Errorf("reasons %q", r.GetReasons())
		}
		for _, id := range []string{"n2", "n3"} {
			var m *api.MemberStatus
			for _, ms := range r.GetMembers() {
				if ms.GetMember().GetNodeId() == id {
					m = ms
				}
			}
			if m.GetMember().GetGrpcAddr() != c.cfgs[id].GRPCAddr || !strings.Contains(m.GetHealth().GetReason(), "unreachable") {
				return fmt.Errorf("%s: %v", id, m)
			}
		}
		return nil
	})
	c.restart("n2")
	c.restart("n3")
	testutil.Eventually(t, 20*time.Second, "healthy once the others are back", func() error {
		r, err := c.clusterClient("n1").Health(ctx, &api.HealthRequest{})
		if err != nil {
			return err
		}
		if r.GetStatus() != api.HealthStatus_HEALTH_STATUS_HEALTHY || len(r.GetReasons()) > 0 {
			return fmt.Errorf("%v %q", r.GetStatus(), r.GetReasons())
		}
		return nil
	})
}
