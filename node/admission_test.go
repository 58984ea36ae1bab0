package node

import (
	"errors"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/scheduler"
)

// From cluster version 2 a node joining by itself needs an admin's
// admission, from the raft address it was admitted with; the admission
// ends when it joins.
func TestIntegrationJoinNeedsAdmission(t *testing.T) {
	skipShort(t)
	c := newTestCluster(t, 1, nil)
	n := c.node(c.waitLeaderReady(10 * time.Second))
	if v := n.FSM().State().ClusterVersion(); v != clusterversion.Supported || !clusterversion.Admission.EnabledAt(v) {
		t.Fatalf("a new cluster runs version %d, want %d (with admission)", v, clusterversion.Supported)
	}
	ctx := ctxT(t, 10*time.Second)
	m := &api.Member{NodeId: "n9", RaftAddr: "127.0.0.1:1", GrpcAddr: "127.0.0.1:2", SupportedVersion: clusterversion.Supported}
	if err := n.Scheduler().Join(ctx, m, "", true); !errors.Is(err, scheduler.ErrNotAdmitted) {
		t.Fatalf("join without admission: %v, want ErrNotAdmitted", err)
	}
	if err := n.Scheduler().Admit(ctx, "n9", "127.0.0.1:3", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := n.Scheduler().Join(ctx, m, "", true); !errors.Is(err, scheduler.ErrNotAdmitted) {
		t.Fatalf("join from another raft address: %v, want ErrNotAdmitted", err)
	}
	if _, member := n.FSM().State().Member("n9"); member {
		t.Fatal("a refused join recorded a member")
	}
	if err := n.Scheduler().Admit(ctx, "n9", "127.0.0.1:1", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := n.Scheduler().Join(ctx, m, "", true); err != nil {
		t.Fatalf("admitted join: %v", err)
	}
	st := n.FSM().State()
	if _, member := st.Member("n9"); !member || len(st.Admissions()) != 0 {
		t.Fatalf("after join: member=%v admissions=%v", member, st.Admissions())
	}
	if err := n.Scheduler().Remove(ctx, "n9"); err != nil {
		t.Fatal(err)
	}
}
