package main

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func membersFixture() *api.MembersResponse {
	m := func(id string, n int, suffrage string, leader bool) *api.MemberStatus {
		return &api.MemberStatus{Member: &api.Member{NodeId: id, GrpcAddr: "127.0.0.1:700" + string(rune('0'+n)),
			RaftAddr: "127.0.0.1:800" + string(rune('0'+n)), SupportedVersion: 1}, Suffrage: suffrage, Leader: leader}
	}
	ms := []*api.MemberStatus{m("n1", 1, "voter", true), m("n2", 2, "voter", false), m("n4", 4, "nonvoter", false), {Member: &api.Member{NodeId: "n5"}}}
	ms[0].Health = &api.MemberHealth{Reachable: true, Contacted: true, RaftState: "leader", AppliedIndex: 120, Version: "dev (rev 0123456789ab, go1.27.3)"}
	ms[1].Health = &api.MemberHealth{Reachable: true, Contacted: true, LastContactMs: 350, RaftState: "follower", AppliedIndex: 118, AppliedLag: 2, Version: "dev (rev 0123456789ab, go1.27.3)"}
	ms[2].Health = &api.MemberHealth{Contacted: true, LastContactMs: 4200, RaftState: "leader", Term: 3, AppliedIndex: 40, AppliedLag: 80, Version: "dev (go1.27.3)", Reason: "last seen as leader (term 3), unreachable: connection refused"}
	return &api.MembersResponse{
		Members:        ms,
		ClusterId:      "c-7f3a",
		ClusterVersion: 1,
		Read:           &api.ReadInfo{AppliedIndex: 120, ServedBy: "n2", Consistency: api.Consistency_CONSISTENCY_STALE},
	}
}

// An unreachable member's raft state is the one it was last seen in, and
// says so (n4 was the leader when it was killed); JSON keeps the raw state.
func TestClusterMembers(t *testing.T) {
	f := startCluster(t)
	f.set("Members", membersFixture())
	r := ctl(t, f, "cluster", "members", "--consistency", "stale")
	want := lines(
		`NODE  GRPC ADDR       RAFT ADDR       SUFFRAGE  LEADER  STATE                REACHABLE  LAST CONTACT  APPLIED  LAG  CLUSTER VERSION  BUILD`,
		`n1    127.0.0.1:7001  127.0.0.1:8001  voter     *       leader               yes        now           120      0    1                dev@0123456789ab`,
		`n2    127.0.0.1:7002  127.0.0.1:8002  voter             follower             yes        350ms ago     118      2    1                dev@0123456789ab`,
		`n4    127.0.0.1:7004  127.0.0.1:8004  nonvoter          last seen as leader  no         4.2s ago      40       80   1                dev`,
		`n5    -               -               -                 -                    -          never         -        -    0                -`,
		`cluster c-7f3a, cluster version 1 (stale read by n2, applied index 120)`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("members: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if c := f.last("Members").(*api.MembersRequest).GetConsistency(); c != api.Consistency_CONSISTENCY_STALE {
		t.Errorf("consistency %v, want stale", c)
	}
	r = ctl(t, f, "cluster", "members", "-o", "json")
	var got api.MembersResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.GetMembers()) != 4 {
		t.Fatalf("json %s: %v", r.stdout, err)
	}
}

func TestClusterLeaderJoinRemoveTransfer(t *testing.T) {
	f := startCluster(t)
	f.set("Leader", &api.LeaderResponse{LeaderId: "n1", LeaderGrpcAddr: "127.0.0.1:7001", Term: 5})
	if r := ctl(t, f, "cluster", "leader"); r.stdout != "leader n1 at 127.0.0.1:7001 (term 5)\n" {
		t.Errorf("leader: %q", r.stdout)
	}
	f.set("Leader", &api.LeaderResponse{Term: 6})
	if r := ctl(t, f, "cluster", "leader"); r.stdout != "no leader known (term 6)\n" {
		t.Errorf("no leader: %q", r.stdout)
	}

	f.set("Join", &api.JoinResponse{ClusterId: "c-7f3a", Members: []*api.Member{
		{NodeId: "n1", GrpcAddr: "127.0.0.1:7001", RaftAddr: "127.0.0.1:8001", SupportedVersion: 1},
		{NodeId: "n4", GrpcAddr: "127.0.0.1:7004", RaftAddr: "127.0.0.1:8004", SupportedVersion: 1},
	}})
	r := ctl(t, f, "cluster", "join", "--id", "n4", "--raft-addr", "127.0.0.1:8004", "--grpc-addr", "127.0.0.1:7004")
	want := lines(
		`n4 joined cluster c-7f3a`,
		`NODE  GRPC ADDR       RAFT ADDR       VERSION`,
		`n1    127.0.0.1:7001  127.0.0.1:8001  1`,
		`n4    127.0.0.1:7004  127.0.0.1:8004  1`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("join: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	jr := f.last("Join").(*api.JoinRequest)
	if jr.GetNodeId() != "n4" || jr.GetRaftAddr() != "127.0.0.1:8004" || jr.GetGrpcAddr() != "127.0.0.1:7004" || jr.GetSupportedVersion() != 1 || jr.GetClusterId() != "" {
		t.Fatalf("join sent %v", jr)
	}
	f.fail("Join", status.Error(codes.AlreadyExists, "node id n4 is already a member"))
	r = ctl(t, f, "cluster", "join", "--id", "n4", "--raft-addr", "127.0.0.1:8004", "--grpc-addr", "127.0.0.1:7004")
	if want := "hotsplitctl: cluster join n4: AlreadyExists from " + f.addr + ": node id n4 is already a member (not applied)\n"; r.code != exitRefused || r.stderr != want {
		t.Fatalf("join conflict: exit %d stderr %q, want %q", r.code, r.stderr, want)
	}

	f.set("Admit", &api.AdmitResponse{})
	if r := ctl(t, f, "cluster", "add", "n5", "--raft-addr", "127.0.0.1:8005"); r.code != 0 || r.stdout != "admitted n5 from 127.0.0.1:8005; start it with --join and its node certificate\n" {
		t.Errorf("add: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if ar := f.last("Admit").(*api.AdmitRequest); ar.GetNodeId() != "n5" || ar.GetRaftAddr() != "127.0.0.1:8005" {
		t.Errorf("add sent %v", ar)
	}
	if r := ctl(t, f, "cluster", "add", "n5"); r.code != exitUsage || !strings.Contains(r.stderr, "--raft-addr is required") {
		t.Errorf("add without --raft-addr: exit %d %q", r.code, r.stderr)
	}

	f.set("Remove", &api.RemoveResponse{})
	if r := ctl(t, f, "cluster", "remove", "n4"); r.code != 0 || r.stdout != "removed n4\n" {
		t.Errorf("remove: exit %d %q %q", r.code, r.stdout, r.stderr)
	}
	if id := f.last("Remove").(*api.RemoveRequest).GetNodeId(); id != "n4" {
		t.Errorf("remove sent %q", id)
	}
	f.fail("Remove", status.New(codes.Unknown, "forwarding broke after sending").Err())
	r = ctl(t, f, "cluster", "remove", "n4")
	if r.code != exitUnavailable || !strings.Contains(r.stderr, "outcome unknown, it may have been applied") ||
		!strings.HasSuffix(r.stderr, "; check 'hotsplitctl cluster members' before retrying\n") {
		t.Fatalf("remove unknown: exit %d stderr %q", r.code, r.stderr)
	}

	f.set("TransferLeadership", &api.TransferLeadershipResponse{LeaderId: "n2"})
	if r := ctl(t, f, "cluster", "transfer", "--to", "n2"); r.stdout != "leadership transferred to n2\n" {
		t.Errorf("transfer: %q %q", r.stdout, r.stderr)
	}
	if to := f.last("TransferLeadership").(*api.TransferLeadershipRequest).GetToNodeId(); to != "n2" {
		t.Errorf("transfer sent %q", to)
	}
	f.set("TransferLeadership", &api.TransferLeadershipResponse{})
	if r := ctl(t, f, "cluster", "transfer"); !strings.HasPrefix(r.stdout, "leadership transfer started; the new leader is not known yet") {
		t.Errorf("transfer without a known leader: %q", r.stdout)
	}
	f.set("TransferLeadership", &api.TransferLeadershipResponse{LeaderId: "n2"})
	r = ctl(t, f, "cluster", "transfer", "-o", "json")
	if got := compactJSON(t, r.stdout); got != `{"leader_id":"n2"}` {
		t.Errorf("transfer json %s", got)
	}
}

func TestClusterCheck(t *testing.T) {
	f := startCluster(t)
	h := func(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }
	f.set("CheckState", &api.CheckStateResponse{Index: 42, Reports: []*api.StateReport{
		{NodeId: "n1", Index: 42, Hash: h(0xab), HashFormat: 1, Outcome: api.StateOutcome_STATE_OUTCOME_AGREES},
		{NodeId: "n2", Index: 42, Hash: h(0xab), HashFormat: 1, Outcome: api.StateOutcome_STATE_OUTCOME_AGREES},
		{NodeId: "n3", Index: 42, Outcome: api.StateOutcome_STATE_OUTCOME_SKIPPED, Detail: "reached the index through a snapshot"},
	}})
	r := ctl(t, f, "cluster", "check", "--actor", "alice")
	ab := strings.Repeat("ab", 32)
	want := lines(
		`NODE  INDEX  HASH`+strings.Repeat(" ", 62)+`FORMAT  OUTCOME  DETAIL`,
		`n1    42     `+ab+`  1       agrees   -`,
		`n2    42     `+ab+`  1       agrees   -`,
		`n3    42     -`+strings.Repeat(" ", 65)+`-       skipped  reached the index through a snapshot`,
		`state check at index 42: every member that reported agrees`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("check: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if a := f.last("CheckState").(*api.CheckStateRequest).GetActor(); a != "alice" {
		t.Errorf("actor %q", a)
	}

	f.set("CheckState", &api.CheckStateResponse{Index: 50, Diverged: []string{"n2"}, Reports: []*api.StateReport{
		{NodeId: "n1", Index: 50, Hash: h(1), HashFormat: 1, Outcome: api.StateOutcome_STATE_OUTCOME_AGREES},
		{NodeId: "n2", Index: 50, Hash: h(2), HashFormat: 1, Outcome: api.StateOutcome_STATE_OUTCOME_DIVERGED},
		{NodeId: "n3", Index: 50, Hash: h(1), HashFormat: 1, Outcome: api.StateOutcome_STATE_OUTCOME_AGREES},
	}})
	r = ctl(t, f, "cluster", "check")
	if r.code != 1 || !strings.Contains(r.stdout, "DIVERGED: n2") || !strings.Contains(r.stderr, "replicas diverged at index 50: n2") {
		t.Fatalf("diverged: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}

	f.fail("CheckState", status.Error(codes.FailedPrecondition, "cluster version too low: state_check needs cluster version 2, the cluster runs 1"))
	if r := ctl(t, f, "cluster", "check"); r.code != 1 || !strings.Contains(r.stderr, "needs cluster version 2") {
		t.Fatalf("v1 cluster: exit %d stderr %q", r.code, r.stderr)
	}
}
