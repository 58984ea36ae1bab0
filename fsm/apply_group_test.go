package fsm

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

func addGroup(name string, capacity uint64, ids ...string) *api.Command {
	return &api.Command{MinVersion: clusterversion.ShardGroups.Version(), Body: &api.Command_AddGroup{AddGroup: &api.AddGroup{
		Name: name, Capacity: capacity, Identities: ids, Actor: "alice"}}}
}

func setGroup(g *api.SetGroup) *api.Command {
	g.Actor = "alice"
	return &api.Command{MinVersion: clusterversion.ShardGroups.Version(), Body: &api.Command_SetGroup{SetGroup: g}}
}

func removeGroup(id uint64) *api.Command {
	return &api.Command{MinVersion: clusterversion.ShardGroups.Version(), Body: &api.Command_RemoveGroup{RemoveGroup: &api.RemoveGroup{GroupId: id, Actor: "alice"}}}
}

// groupsBootstrapped is a version 4 cluster of count groups from 7 over the
// routes of splits.
func groupsBootstrapped(t *testing.T, count uint32, splits ...string) *harness {
	t.Helper()
	h := newHarness(t, Options{})
	var keys [][]byte
	for _, k := range splits {
		keys = append(keys, []byte(k))
	}
	wantCode(t, h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "c1", InitialSplits: keys, GroupId: 7, GroupCount: count, ClusterVersion: clusterversion.Version4}}}),
		api.ResultCode_RESULT_CODE_OK)
	return h
}

func routeGroups(s *State) []uint64 {
	var out []uint64
	for _, r := range s.Catalog().ToProto().GetRoutes() {
		out = append(out, r.GetGroupId())
	}
	return out
}

func TestBootstrapSpreadsRoutesOverGroups(t *testing.T) {
	for _, tc := range []struct {
		count  uint32
		splits []string
		want   []uint64
	}{
		{0, []string{"b", "c"}, []uint64{7, 7, 7}},
		{1, nil, []uint64{7}},
		{3, []string{"b", "c", "d", "e", "f"}, []uint64{7, 7, 8, 8, 9, 9}},
		{3, []string{"b", "c", "d", "e", "f", "g"}, []uint64{7, 7, 7, 8, 8, 9, 9}},
		// Fewer routes than groups: some groups start empty.
		{3, []string{"m"}, []uint64{7, 8}},
	} {
		h := groupsBootstrapped(t, tc.count, tc.splits...)
		s := h.state()
		if got := routeGroups(s); !slices.Equal(got, tc.want) {
			t.Errorf("%d groups over %v: route groups %v, want %v", tc.count, tc.splits, got, tc.want)
		}
		n := max(1, int(tc.count))
		if len(s.Groups()) != n || s.NextGroupID() != 7+uint64(n) {
			t.Errorf("%d groups: table %v next %d", tc.count, s.Groups(), s.NextGroupID())
		}
		for i, g := range s.Groups() {
			if g.GetGroupId() != 7+uint64(i) || g.GetName() != groupName(g.GetGroupId()) || g.GetCapacity() != DefaultGroupCapacity ||
				g.GetState() != api.GroupState_GROUP_STATE_ACTIVE {
				t.Errorf("group %d: %v", i, g)
			}
		}
	}
}

func TestBootstrapGroupsRefused(t *testing.T) {
	for _, tc := range []struct {
		version uint32
		count   uint32
		want    string
	}{
		{clusterversion.Version3, 2, "group_count: cluster version too low: shard_groups needs cluster version 4, the cluster runs 3"},
		{clusterversion.Version4, MaxGroups + 1, "group_count: 65 exceeds the limit of 64"},
	} {
		h := newHarness(t, Options{})
		r := h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
			ClusterId: "c1", GroupId: 1, GroupCount: tc.count, ClusterVersion: tc.version}}})
		if r.Code != api.ResultCode_RESULT_CODE_INVALID_ARGUMENT || r.Message != tc.want || h.state().Bootstrapped() {
			t.Errorf("version %d, %d groups: %v %q, want %q and no bootstrap", tc.version, tc.count, r.Code, r.Message, tc.want)
		}
	}
}

func TestGroupCommands(t *testing.T) {
	h := groupsBootstrapped(t, 2, "m")
	r := h.run(addGroup("east", 0, "dn-3", "dn-1"))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	east := r.GetGroup()
	if east.GetGroupId() != 9 || east.GetCapacity() != DefaultGroupCapacity || !slices.Equal(east.GetIdentities(), []string{"dn-1", "dn-3"}) ||
		east.GetCreatedHlc() != h.state().LastHLC() {
		t.Fatalf("added %v", east)
	}
	r = h.run(setGroup(&api.SetGroup{GroupId: 9, Capacity: proto.Uint64(5000), State: api.GroupState_GROUP_STATE_DRAINING,
		AddIdentities: []string{"dn-2"}, RemoveIdentities: []string{"dn-1"}}))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	if g := r.GetGroup(); g.GetCapacity() != 5000 || g.GetState() != api.GroupState_GROUP_STATE_DRAINING || !slices.Equal(g.GetIdentities(), []string{"dn-2", "dn-3"}) {
		t.Fatalf("set: %v", g)
	}
	d := h.state().Decisions()[len(h.state().Decisions())-1]
	if d.GetKind() != api.DecisionKind_DECISION_KIND_GROUP || d.GetActor() != "alice" ||
		d.GetDetail() != "group 9 (east) set capacity=5000 state=DRAINING identities=2->2" {
		t.Fatalf("decision %v", d)
	}
	// The identity dn-1 left east, so another group may take it.
	wantCode(t, h.run(setGroup(&api.SetGroup{GroupId: 7, AddIdentities: []string{"dn-1"}})), api.ResultCode_RESULT_CODE_OK)
	r = h.run(removeGroup(9))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	if _, ok := h.state().Group(9); ok || h.state().NextGroupID() != 10 {
		t.Fatalf("after remove: %v next %d", h.state().Groups(), h.state().NextGroupID())
	}
	// Ids are never reused.
	wantCode(t, h.run(addGroup("west", 0)), api.ResultCode_RESULT_CODE_OK)
	if _, ok := h.state().Group(10); !ok {
		t.Fatalf("groups %v: want the new one at id 10", h.state().Groups())
	}
}

// Every refusal names what was wrong and changes nothing but last_hlc.
func TestGroupCommandRefusals(t *testing.T) {
	long := strings.Repeat("a", MaxGroupNameLen+1)
	many := make([]string, MaxGroupIdentities+1)
	for i := range many {
		many[i] = "dn-" + string(rune('a'+i/26)) + string(rune('a'+i%26))
	}
	for _, tc := range []struct {
		name string
		cmd  *api.Command
		code api.ResultCode
		msg  string
	}{
		{"name empty", addGroup("", 0), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "add_group: name: must be set"},
		{"name too long", addGroup(long, 0), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "exceeds the limit of 64"},
		{"name upper case", addGroup("East", 0), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, `"East" must start with a lower-case letter`},
		{"name like an id", addGroup("g12", 0), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, `"g12" reads as a group id`},
		{"name bad byte", addGroup("e_st", 0), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, `byte 1 ('_')`},
		{"name taken", addGroup("group-7", 0), api.ResultCode_RESULT_CODE_GROUP_CONFLICT, `shard group 7 is already named "group-7"`},
		{"capacity too large", addGroup("east", MaxGroupCapacity+1), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "capacity: 281474976710657 not in [1, 281474976710656]"},
		{"identity with slash", addGroup("east", 0, "dn/1"), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, `identity: "dn/1": byte 2 ('/')`},
		{"identity twice", addGroup("east", 0, "dn-1", "dn-1"), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, `identity "dn-1" given twice`},
		{"identity of another group", addGroup("east", 0, "dn-7"), api.ResultCode_RESULT_CODE_GROUP_CONFLICT, `identity "dn-7" already serves shard group 7 (group-7)`},
		{"too many identities", addGroup("east", 0, many...), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "33 identities exceeds the limit of 32"},
		{"set unknown group", setGroup(&api.SetGroup{GroupId: 99, Capacity: proto.Uint64(1)}), api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND, "set_group: no shard group 99"},
		{"set nothing", setGroup(&api.SetGroup{GroupId: 8, Name: proto.String("group-8"), State: api.GroupState_GROUP_STATE_ACTIVE}), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group 8: the patch leaves the group as it is"},
		{"set bad state", setGroup(&api.SetGroup{GroupId: 8, State: api.GroupState(9)}), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group 8: state: 9 is not ACTIVE or DRAINING"},
		{"set zero capacity", setGroup(&api.SetGroup{GroupId: 8, Capacity: proto.Uint64(0)}), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group 8: capacity: 0 not in"},
		{"set name taken", setGroup(&api.SetGroup{GroupId: 8, Name: proto.String("group-7")}), api.ResultCode_RESULT_CODE_GROUP_CONFLICT, `shard group 7 is already named "group-7"`},
		{"remove an identity it lacks", setGroup(&api.SetGroup{GroupId: 8, RemoveIdentities: []string{"dn-7"}}), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, `remove identity "dn-7": not one of the group's`},
		{"take another group's identity", setGroup(&api.SetGroup{GroupId: 8, AddIdentities: []string{"dn-7"}}), api.ResultCode_RESULT_CODE_GROUP_CONFLICT, `identity "dn-7" already serves shard group 7`},
		{"remove unknown group", removeGroup(99), api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND, "remove_group: no shard group 99"},
		{"remove a group with routes", removeGroup(7), api.ResultCode_RESULT_CODE_GROUP_NOT_EMPTY, "remove_group: shard group 7 (group-7) serves 1 routes: drain it first"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := groupsBootstrapped(t, 2, "m")
			wantCode(t, h.run(setGroup(&api.SetGroup{GroupId: 7, AddIdentities: []string{"dn-7"}})), api.ResultCode_RESULT_CODE_OK)
			before := h.state()
			r := h.run(tc.cmd)
			if r.Code != tc.code || !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("%v %q, want %v containing %q", r.Code, r.Message, tc.code, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
}

func TestGroupLimit(t *testing.T) {
	h := groupsBootstrapped(t, MaxGroups-1)
	wantCode(t, h.run(addGroup("last", 0)), api.ResultCode_RESULT_CODE_OK)
	before := h.state()
	r := h.run(addGroup("one-too-many", 0))
	if r.Code != api.ResultCode_RESULT_CODE_GROUP_LIMIT || !strings.Contains(r.Message, "64 shard groups") {
		t.Fatalf("%v %q", r.Code, r.Message)
	}
	assertUnchanged(t, before, h.state())
}

// Below version 4 the group commands are refused with the feature table's
// error, by the min_version check when the leader stamps it and by Apply's
// own gate when it does not.
func TestGroupCommandsRefusedBelowVersion4(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, nil, nil)
	for _, c := range []*api.Command{addGroup("east", 0), setGroup(&api.SetGroup{GroupId: 7, Capacity: proto.Uint64(1)}), removeGroup(7)} {
		before := h.state()
		if r := h.run(c); r.Code != api.ResultCode_RESULT_CODE_INVALID_ARGUMENT || !strings.Contains(r.Message, "min_version 4 above cluster version 3") {
			t.Errorf("%v: %v %q", commandKind(c), r.Code, r.Message)
		}
		assertUnchanged(t, before, h.state())
		c.MinVersion, c.Hlc = 0, 0
		before = h.state()
		if r := h.run(c); r.Code != api.ResultCode_RESULT_CODE_INVALID_ARGUMENT || !strings.Contains(r.Message, "shard_groups needs cluster version 4, the cluster runs 3") {
			t.Errorf("%v without min_version: %v %q", commandKind(c), r.Code, r.Message)
		}
		assertUnchanged(t, before, h.state())
	}
	if len(h.state().Groups()) != 0 || h.state().NextGroupID() != 0 {
		t.Fatalf("groups at version 3: %v", h.state().Groups())
	}
}

// The raise to version 4 makes a group of the catalog's group id, once,
// and records it in the raise's decision; a split child keeps its parent's
// group.
func TestRaiseToVersion4MakesTheCatalogsGroup(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, nil)
	wantCode(t, h.run(split(1, "f")), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(member("n1", clusterversion.Version4)), api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	if s.ClusterVersion() != clusterversion.Version4 {
		t.Fatalf("version %d", s.ClusterVersion())
	}
	gs := s.Groups()
	if len(gs) != 1 || gs[0].GetGroupId() != 7 || gs[0].GetName() != "group-7" || gs[0].GetCapacity() != DefaultGroupCapacity ||
		gs[0].GetCreatedHlc() != 0 || s.NextGroupID() != 8 {
		t.Fatalf("groups %v next %d", gs, s.NextGroupID())
	}
	d := s.Decisions()[len(s.Decisions())-1]
	if d.GetDetail() != "cluster version 4: groups=1 next_group_id=8 move_ttl_ms=600000 cross_group=false placement_windows=3 move_cooldown_ms=1800000 max_moves_per_cycle=1 move_margin_bp=1000" {
		t.Fatalf("raise decision %q", d.GetDetail())
	}
	wantCode(t, h.run(addGroup("east", 0)), api.ResultCode_RESULT_CODE_OK)
	if _, ok := h.state().Group(8); !ok {
		t.Fatalf("groups %v", h.state().Groups())
	}
}

// Groups ride in snapshots and the state hash, and restore refuses a table
// that no command sequence could have left.
func TestGroupsSnapshotAndRestoreChecks(t *testing.T) {
	h := groupsBootstrapped(t, 2, "m")
	wantCode(t, h.run(addGroup("east", 5000, "dn-1")), api.ResultCode_RESULT_CODE_OK)
	st := h.state()
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, st); err != nil {
		t.Fatal(err)
	}
	g := newHarness(t, Options{})
	if err := g.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if g.state().Hash() != st.Hash() || !proto.Equal(g.state().Proto(), st.Proto()) {
		t.Fatal("groups did not survive a snapshot")
	}
	changed := proto.Clone(st.Proto()).(*api.StateSnapshot)
	changed.Groups[2].Capacity++
	if hashOf(changed) == st.Hash() {
		t.Fatal("the state hash does not cover the groups")
	}
	for _, tc := range []struct {
		name string
		edit func(p *api.StateSnapshot)
		want string
	}{
		{"unsorted", func(p *api.StateSnapshot) { p.Groups[0], p.Groups[1] = p.Groups[1], p.Groups[0] }, "groups[1]: id 7 not above 8"},
		{"id at next", func(p *api.StateSnapshot) { p.NextGroupId = 9 }, "groups[2]: id 9 not below next_group_id 9"},
		{"no state", func(p *api.StateSnapshot) { p.Groups[1].State = 0 }, "groups[1]: state GROUP_STATE_UNSPECIFIED"},
		{"name repeated", func(p *api.StateSnapshot) { p.Groups[1].Name = "group-7" }, `groups[1]: name "group-7" repeated`},
		{"identity in two groups", func(p *api.StateSnapshot) { p.Groups[0].Identities = []string{"dn-1"} }, `groups[2]: identity "dn-1" unsorted or repeated`},
		{"zero capacity", func(p *api.StateSnapshot) { p.Groups[0].Capacity = 0 }, "groups[0]: capacity: 0 not in"},
		{"route without group", func(p *api.StateSnapshot) { p.Groups = p.Groups[1:] }, "route 1 is in group 7, which the table does not have"},
		{"groups below version 4", func(p *api.StateSnapshot) { p.ClusterVersion = clusterversion.Version3 }, "groups: 3 groups and next_group_id 10 at cluster version 3"},
	} {
		p := proto.Clone(st.Proto()).(*api.StateSnapshot)
		tc.edit(p)
		if _, err := stateFromProto(p, g.f.limits()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
