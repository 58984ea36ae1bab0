package fsm

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

func TestReseed(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version1, nil, nil)
	h.run(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", GrpcAddr: "a:1", RaftAddr: "a:2", SupportedVersion: 1}}}})
	h.run(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n2", GrpcAddr: "b:1", RaftAddr: "b:2", SupportedVersion: 2}}}})
	wantCode(t, h.run(split(1, "m")), api.ResultCode_RESULT_CODE_OK)
	st := h.state()
	self := &api.Member{NodeId: "r1", GrpcAddr: "c:1", RaftAddr: "c:2", SupportedVersion: clusterversion.Supported}
	p, err := Reseed(st, "c2", self, st.CeilingMs()+5000)
	if err != nil {
		t.Fatal(err)
	}
	if p.GetClusterId() != "c2" || !slices.Equal(p.GetPreviousClusterIds(), []string{"c1"}) {
		t.Errorf("cluster id %q, previous %q", p.GetClusterId(), p.GetPreviousClusterIds())
	}
	if len(p.GetMembers()) != 1 || !proto.Equal(p.GetMembers()[0], self) || len(p.GetAdmissions()) != 0 {
		t.Errorf("members %v admissions %v, want only the seeding node", p.GetMembers(), p.GetAdmissions())
	}
	if p.GetClusterVersion() != clusterversion.Supported {
		t.Errorf("cluster version %d: the old v1 member is gone, the seed supports %d", p.GetClusterVersion(), clusterversion.Supported)
	}
	// The raise ran the hooks of every version crossed, as an upgrade in
	// place would: the hold band has its default, and the raise is a
	// decision.
	if p.GetConfig().HoldBandBp == nil || p.GetConfig().GetHoldBandBp() != DefaultHoldBandBP {
		t.Errorf("hold band %v after raising a version 1 backup, want the default %d", p.GetConfig().HoldBandBp, DefaultHoldBandBP)
	}
	if ds := p.GetDecisions(); len(ds) == 0 || !strings.HasPrefix(ds[len(ds)-1].GetDetail(), "cluster version ") {
		t.Errorf("no decision records the raise: %v", ds)
	}
	if p.GetCeilingMs() != st.CeilingMs()+5000 {
		t.Errorf("ceiling %d, want the HLC start %d", p.GetCeilingMs(), st.CeilingMs()+5000)
	}
	// The raise to 4 made a group of the catalog's one group id.
	if gs := p.GetGroups(); len(gs) != 1 || gs[0].GetGroupId() != p.GetCatalog().GetRoutes()[0].GetGroupId() || p.GetNextGroupId() != gs[0].GetGroupId()+1 {
		t.Errorf("groups %v, next id %d after the raise: want one group of the catalog's group id", gs, p.GetNextGroupId())
	}
	// Everything else is the backup's.
	strip := func(q *api.StateSnapshot) *api.StateSnapshot {
		q = proto.CloneOf(q)
		q.ClusterId, q.PreviousClusterIds, q.Members, q.Admissions, q.ClusterVersion, q.CeilingMs = "", nil, nil, nil, 0, 0
		// The raise hooks' changes, checked above (the boundary marks below).
		q.Config, q.Decisions, q.NextDecisionSeq, q.Groups, q.NextGroupId = nil, nil, 0, nil, 0
		for _, r := range q.GetCatalog().GetRoutes() {
			r.OperatorStart = false
		}
		return q
	}
	if rs := p.GetCatalog().GetRoutes(); len(rs) != 2 || rs[0].GetOperatorStart() || !rs[1].GetOperatorStart() {
		t.Errorf("routes %v after the raise: want the boundary at m marked as an operator's", rs)
	}
	if !proto.Equal(strip(st.Proto()), strip(p)) {
		t.Errorf("reseed changed more than identity, members and clock")
	}
	// The seeded state restores (every invariant), and a second reseed
	// records both old ids.
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, st.Index(), p); err != nil {
		t.Fatal(err)
	}
	restored, err := ReadState(&buf)
	if err != nil {
		t.Fatalf("seeded state does not restore: %v", err)
	}
	if restored.ClusterID() != "c2" || !slices.Equal(restored.PreviousClusterIDs(), []string{"c1"}) {
		t.Fatalf("restored %q previous %q", restored.ClusterID(), restored.PreviousClusterIDs())
	}
	again, err := Reseed(restored, "c3", self, 0)
	if err != nil || !slices.Equal(again.GetPreviousClusterIds(), []string{"c1", "c2"}) || again.GetCeilingMs() != p.GetCeilingMs() {
		t.Fatalf("second reseed: %v previous %q ceiling %d", err, again.GetPreviousClusterIds(), again.GetCeilingMs())
	}
}

func TestReseedRefuses(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version2, nil, nil)
	self := &api.Member{NodeId: "r1", SupportedVersion: clusterversion.Supported}
	for _, c := range []struct {
		name string
		st   *State
		id   string
		self *api.Member
	}{
		{"not bootstrapped", newHarness(t, Options{}).state(), "c2", self},
		{"the same id", h.state(), "c1", self},
		{"no new id", h.state(), "", self},
		{"a v1 seed cannot record the old id", h.state(), "c2", &api.Member{NodeId: "r1", SupportedVersion: 1}},
	} {
		if _, err := Reseed(c.st, c.id, c.self, 0); !errors.Is(err, ErrReseed) {
			t.Errorf("%s: err %v, want ErrReseed", c.name, err)
		}
	}
}

// previous_cluster_ids is checked on restore: version 2 only, distinct,
// never the current id.
func TestPreviousClusterIDsChecked(t *testing.T) {
	for _, c := range []struct {
		name    string
		version uint32
		ids     []string
		want    string
	}{
		{"below version 2", clusterversion.Version1, []string{"c0"}, "cluster version 1"},
		{"the current id", clusterversion.Version2, []string{"c1"}, "current id"},
		{"repeated", clusterversion.Version2, []string{"c0", "c0"}, "repeated"},
		{"empty", clusterversion.Version2, []string{""}, "empty"},
	} {
		h := bootstrappedAt(t, c.version, nil, nil)
		p := h.state().Proto()
		p.PreviousClusterIds = c.ids
		_, err := stateFromProto(p, h.f.limits())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}
