package main

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func groupsList() *api.ListGroupsResponse {
	return &api.ListGroupsResponse{CatalogVersion: 9, RouteCounts: []uint64{5, 0},
		Groups: []*api.ShardGroup{
			{GroupId: 1, Name: "group-1", State: api.GroupState_GROUP_STATE_ACTIVE, Capacity: 1_000_000, Identities: []string{"dn-1", "dn-2"}},
			{GroupId: 4, Name: "east", State: api.GroupState_GROUP_STATE_DRAINING, Capacity: 2_000_000},
		}}
}

func TestGroups(t *testing.T) {
	f := startCluster(t)
	f.set("ListGroups", groupsList())
	r := ctl(t, f, "groups", "list")
	want := lines(
		`GROUP  NAME     STATE     CAPACITY  ROUTES  IDENTITIES`,
		`g1     group-1  active    1000000   5       dn-1,dn-2`,
		`g4     east     draining  2000000   0       -`,
		`2 groups, catalog version 9`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("groups list: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}

	added := &api.GroupResponse{CommitHlc: splitHLC, Group: &api.ShardGroup{GroupId: 5, Name: "west", State: api.GroupState_GROUP_STATE_ACTIVE,
		Capacity: 3000, Identities: []string{"dn-w"}}}
	f.set("AddGroup", added)
	r = ctl(t, f, "groups", "add", "west", "--capacity", "3000", "--identity", "dn-w", "--request-id", "add-1")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "added group g5 west: active, capacity 3000, identities dn-w; committed at 1723456789012.3") {
		t.Fatalf("groups add: exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
	}
	if req := f.last("AddGroup").(*api.AddGroupRequest); req.GetName() != "west" || req.GetCapacity() != 3000 ||
		strings.Join(req.GetIdentities(), ",") != "dn-w" || req.GetRequestId() != "add-1" || req.GetActor() != "alice@ops1" {
		t.Fatalf("sent %v", req)
	}

	// A name is resolved through the list; only the flags given are set.
	f.set("SetGroup", added)
	r = ctl(t, f, "groups", "set", "east", "--state", "active", "--add-identity", "dn-e")
	if r.code != 0 {
		t.Fatalf("groups set: exit %d: %s", r.code, r.stderr)
	}
	if req := f.last("SetGroup").(*api.SetGroupRequest); req.GetGroupId() != 4 || req.GetState() != api.GroupState_GROUP_STATE_ACTIVE ||
		req.Name != nil || req.Capacity != nil || strings.Join(req.GetAddIdentities(), ",") != "dn-e" {
		t.Fatalf("sent %v", req)
	}
	r = ctl(t, f, "groups", "drain", "g1")
	if req := f.last("SetGroup").(*api.SetGroupRequest); r.code != 0 || req.GetGroupId() != 1 || req.GetState() != api.GroupState_GROUP_STATE_DRAINING {
		t.Fatalf("groups drain: exit %d %s, sent %v", r.code, r.stderr, req)
	}
	f.set("RemoveGroup", added)
	r = ctl(t, f, "groups", "remove", "5")
	if req := f.last("RemoveGroup").(*api.RemoveGroupRequest); r.code != 0 || req.GetGroupId() != 5 {
		t.Fatalf("groups remove: exit %d %s, sent %v", r.code, r.stderr, req)
	}
}

func TestGroupsErrors(t *testing.T) {
	f := startCluster(t)
	f.set("ListGroups", groupsList())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"groups", "set", "nowhere", "--capacity", "1"}, `GROUP "nowhere": no group has that id or name`},
		{[]string{"groups", "set", "g1", "--state", "stopped"}, `--state "stopped": want active or draining`},
		{[]string{"groups", "add"}, "NAME"},
		{[]string{"groups", "remove", "g1", "--request-id", "a b"}, "--request-id"},
	} {
		r := ctl(t, f, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: exit %d stderr %q, want usage error mentioning %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
	if n := f.calls("SetGroup") + f.calls("AddGroup") + f.calls("RemoveGroup"); n != 0 {
		t.Fatalf("usage errors sent %d requests", n)
	}
	st, err := status.New(codes.FailedPrecondition, "remove_group: shard group 1 (group-1) serves 5 routes: drain it first").
		WithDetails(&api.ErrorOutcome{Outcome: api.Outcome_OUTCOME_NOT_APPLIED})
	if err != nil {
		t.Fatal(err)
	}
	f.fail("RemoveGroup", st.Err())
	r := ctl(t, f, "groups", "remove", "group-1")
	if r.code != exitRefused || !strings.Contains(r.stderr, "groups remove group-1: FailedPrecondition") || !strings.Contains(r.stderr, "serves 5 routes: drain it first (not applied)") {
		t.Errorf("exit %d stderr %q", r.code, r.stderr)
	}
}

func TestMove(t *testing.T) {
	f := startCluster(t)
	f.set("ListGroups", groupsList())
	f.set("MoveRange", &api.MoveRangeResponse{OpId: 12, CatalogVersion: 10, CommitHlc: splitHLC,
		Route: &api.RouteDescriptor{RouteId: 7, Start: []byte("m"), GroupId: 1, State: api.RouteState_ROUTE_STATE_MIGRATING_SOURCE, TargetGroupId: 4, MoveOpId: 12}})
	r := ctl(t, f, "move", "r7", "east", "--expected-version", "9")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "move op12 of r7 begun: group 1 -> 4, migrating_source (op 12); catalog version 10, committed at 1723456789012.3") {
		t.Fatalf("move: exit %d stderr %q stdout %q", r.code, r.stderr, r.stdout)
	}
	if req := f.last("MoveRange").(*api.MoveRangeRequest); req.GetRouteId() != 7 || req.GetTargetGroupId() != 4 || req.GetExpectedVersion() != 9 {
		t.Fatalf("sent %v", req)
	}
	f.set("Status", &api.StatusResponse{LiveOps: []*api.Op{
		{OpId: 3, Kind: api.OpKind_OP_KIND_SPLIT, State: api.OpState_OP_STATE_RUNNING, NextStep: 1, SplitKeys: [][]byte{[]byte("k")}},
		{OpId: 12, Kind: api.OpKind_OP_KIND_MOVE, State: api.OpState_OP_STATE_RUNNING, NextStep: 3, TargetRouteId: 7, SourceGroupId: 1, TargetGroupId: 4,
			AckedCopied: []string{"dn-e"}, AckedFenced: []string{"dn-1"}, Watermark: 55, StepHlc: splitHLC},
	}})
	r = ctl(t, f, "moves", "list")
	rows := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if r.code != 0 || len(rows) != 3 || strings.Join(strings.Fields(rows[1]), " ") != "op12 r7 g1 g4 running 3/3 commit dn-e dn-1 - 55 1723456789012.3 (2024-08-12 09:59:49.012Z)" ||
		rows[2] != "1 live moves" {
		t.Fatalf("moves list: exit %d stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
}
