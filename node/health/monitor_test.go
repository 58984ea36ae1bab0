package health

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
)

func TestDecideHealth(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	voter := func(id string) raft.Server { return raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id)} }
	nonvoter := func(id string) raft.Server { return raft.Server{Suffrage: raft.Nonvoter, ID: raft.ServerID(id)} }
	member := func(id string) *api.Member { return &api.Member{NodeId: id, SupportedVersion: 2} }
	ok := func(applied uint64, ago time.Duration) peerState {
		return peerState{lastOK: now.Add(-ago), resp: &api.ProgressResponse{RaftState: "follower", AppliedIndex: applied, CommitIndex: applied}}
	}
	leaderOK := func(commit uint64) peerState {
		return peerState{lastOK: now.Add(-100 * time.Millisecond), resp: &api.ProgressResponse{RaftState: "leader", AppliedIndex: commit, CommitIndex: commit}}
	}
	refused := peerState{lastOK: now.Add(-2 * time.Second), lastErr: errors.New("dial tcp 127.0.0.1:1: connect: connection refused"), lastErrAt: now.Add(-100 * time.Millisecond),
		resp: &api.ProgressResponse{RaftState: "follower", AppliedIndex: 90}}
	base := func() healthInputs {
		return healthInputs{self: "n1", clusterID: "c", now: now, leader: "n1", selfState: "leader", term: 3, selfApplied: 100, selfCommit: 100,
			servers: []raft.Server{voter("n1"), voter("n2"), voter("n3")}, members: []*api.Member{member("n1"), member("n2"), member("n3")},
			peers: map[string]peerState{"n2": ok(100, 200*time.Millisecond), "n3": ok(99, 300*time.Millisecond)}}
	}
	tests := []struct {
		name      string
		tweak     func(*healthInputs)
		status    api.HealthStatus
		reachable uint32
		reasons   map[string]string // node -> substring of its reason ("" = healthy)
		cluster   string            // substring of a cluster-level reason
	}{
		{name: "all reachable and caught up", status: api.HealthStatus_HEALTH_STATUS_HEALTHY, reachable: 3,
			reasons: map[string]string{"n1": "", "n2": "", "n3": ""}},
		{name: "a killed voter: degraded, quorum at risk", tweak: func(in *healthInputs) { in.peers["n3"] = refused },
			status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 2,
			reasons: map[string]string{"n3": "unreachable: dial tcp 127.0.0.1:1: connect: connection refused", "n2": ""}, cluster: "quorum at risk"},
		{name: "a paused voter goes stale without a failed probe", tweak: func(in *healthInputs) { in.peers["n3"] = ok(99, 2*time.Second) },
			status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 2, reasons: map[string]string{"n3": "no answer for 2s"}},
		{name: "two voters down: no quorum", tweak: func(in *healthInputs) { in.peers["n2"], in.peers["n3"] = refused, refused },
			status: api.HealthStatus_HEALTH_STATUS_NO_QUORUM, reachable: 1, cluster: "1 of 3 voters reachable"},
		{name: "no leader known: no quorum", tweak: func(in *healthInputs) { in.leader, in.selfState = "", "candidate" },
			status: api.HealthStatus_HEALTH_STATUS_NO_QUORUM, reachable: 3, cluster: "knows no leader"},
		{name: "a lagging member", tweak: func(in *healthInputs) { in.peers["n2"] = ok(100-maxHealthyLag-1, 100*time.Millisecond) },
			status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 3, reasons: map[string]string{"n2": "65 entries behind"}},
		{name: "raft heartbeats failing while gRPC answers", tweak: func(in *healthInputs) {
			p := ok(100, 100*time.Millisecond)
			p.hbFailing, p.hbSince = true, now.Add(-time.Second)
			in.peers["n2"] = p
		}, status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 2, reasons: map[string]string{"n2": "raft heartbeats failing"}},
		{name: "a non-voter catching up", tweak: func(in *healthInputs) { in.servers[2] = nonvoter("n3") },
			status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 2, reasons: map[string]string{"n3": "non-voter"}},
		{name: "a member record without a raft server", tweak: func(in *healthInputs) { in.servers = in.servers[:2] },
			status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 2, reasons: map[string]string{"n3": "not in the raft configuration"}},
		{name: "a raft server without a member record", tweak: func(in *healthInputs) { in.members = in.members[:2] },
			status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 3, reasons: map[string]string{"n3": "without a member record"}},
		{name: "a follower's view: lag against the leader's commit index", tweak: func(in *healthInputs) {
			in.self, in.selfState, in.selfApplied, in.selfCommit = "n2", "follower", 100, 100
			in.peers = map[string]peerState{"n1": leaderOK(300), "n3": ok(300, 100*time.Millisecond)}
		}, status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 3, reasons: map[string]string{"n2": "200 entries behind", "n1": "", "n3": ""}},
		{name: "a member that shut its raft down cannot vote", tweak: func(in *healthInputs) {
			p := ok(100, 100*time.Millisecond)
			p.resp.RaftState = "shutdown"
			in.peers["n3"] = p
		}, status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 2, reasons: map[string]string{"n3": "raft shut down"}},
		{name: "a kill -9'd leader from a follower: last seen as leader, unreachable", tweak: func(in *healthInputs) {
			in.self, in.selfState = "n2", "follower"
			dead := refused
			dead.resp = &api.ProgressResponse{RaftState: "leader", Term: 3, AppliedIndex: 100, CommitIndex: 100}
			in.peers = map[string]peerState{"n1": dead, "n3": ok(100, 100*time.Millisecond)}
		}, status: api.HealthStatus_HEALTH_STATUS_DEGRADED, reachable: 2,
			reasons: map[string]string{"n1": "last seen as leader (term 3), unreachable: dial tcp 127.0.0.1:1: connect: connection refused"}},
		{name: "a single voter is healthy, not at risk", tweak: func(in *healthInputs) {
			in.servers, in.members, in.peers = in.servers[:1], in.members[:1], nil
		}, status: api.HealthStatus_HEALTH_STATUS_HEALTHY, reachable: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			if tc.tweak != nil {
				tc.tweak(&in)
			}
			got := decideHealth(in)
			if got.GetStatus() != tc.status || got.GetVotersReachable() != tc.reachable {
				t.Fatalf("status %v with %d reachable, want %v with %d: %v", got.GetStatus(), got.GetVotersReachable(), tc.status, tc.reachable, got)
			}
			for id, want := range tc.reasons {
				var reason string
				found := false
				for _, m := range got.GetMembers() {
					if m.GetMember().GetNodeId() == id {
						reason, found = m.GetHealth().GetReason(), true
					}
				}
				if !found || (want == "") != (reason == "") || !strings.Contains(reason, want) {
					t.Errorf("%s: reason %q, want %q", id, reason, want)
				}
			}
			if tc.cluster != "" && !strings.Contains(strings.Join(got.GetReasons(), "; "), tc.cluster) {
				t.Errorf("cluster reasons %q lack %q", got.GetReasons(), tc.cluster)
			}
			if tc.cluster == "" && tc.status == api.HealthStatus_HEALTH_STATUS_HEALTHY && len(got.GetReasons()) > 0 {
				t.Errorf("healthy with reasons %q", got.GetReasons())
			}
		})
	}
}

// A probe answer from the leader whose committed configuration lacks this
// node removes it; answers that prove nothing (a follower's, an older
// term's, a configuration still unknown, one that lists us) do not.
func TestCheckRemoved(t *testing.T) {
	const term = 4
	leaderAnswer := func(f func(*api.ProgressResponse)) *api.ProgressResponse {
		r := &api.ProgressResponse{RaftState: "leader", Term: term, ConfigurationIndex: 9, Configuration: []string{"n2", "n3"}}
		if f != nil {
			f(r)
		}
		return r
	}
	var fired []string
	h := NewMonitor("n1", termOnly(term), fsm.New(fsm.Options{}), nil, slog.New(slog.DiscardHandler), func(reason string) { fired = append(fired, reason) })
	for _, r := range []*api.ProgressResponse{
		leaderAnswer(func(r *api.ProgressResponse) { r.RaftState = "follower" }),
		leaderAnswer(func(r *api.ProgressResponse) { r.Term = term - 1 }),
		leaderAnswer(func(r *api.ProgressResponse) { r.ConfigurationIndex = 0 }),
		leaderAnswer(func(r *api.ProgressResponse) { r.Configuration = append(r.Configuration, "n1") }),
	} {
		h.checkRemoved("n2", r)
	}
	if len(fired) != 0 {
		t.Fatalf("removed on %q", fired)
	}
	h.checkRemoved("n2", leaderAnswer(nil))
	h.checkRemoved("n2", leaderAnswer(nil))
	if len(fired) != 1 || !strings.Contains(fired[0], "leader n2") {
		t.Fatalf("fired %q, want once naming the leader", fired)
	}
}

// A leader of another cluster (a member's data dir forked into a new
// cluster while this one still lists it) cannot remove this node: its
// answer is ignored, said in one line per peer and cluster, and its
// configuration is not taken as this cluster's newest; the member reads
// as answering for another cluster. An answer of an unknown cluster, or
// this node not knowing its own yet, binds nothing.
func TestOtherClusterLeaderCannotRemove(t *testing.T) {
	const term = 4
	f := fsm.New(fsm.Options{})
	data, err := fsm.EncodeCommand(&api.Command{MinVersion: clusterversion.Version2, Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c-own", GroupId: 1, ClusterVersion: clusterversion.Version2}}})
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Index: 1, Data: data})
	if f.State().ClusterID() != "c-own" {
		t.Fatal("bootstrap did not apply")
	}
	var fired []string
	logs := &strings.Builder{}
	h := NewMonitor("n1", termOnly(term), f, nil, slog.New(slog.NewTextHandler(logs, nil)), func(reason string) { fired = append(fired, reason) })
	fork := &api.ProgressResponse{RaftState: "leader", Term: term + 8, ClusterId: "c-fork", ConfigurationIndex: 1, Configuration: []string{"n3"}}
	for range 3 {
		if !h.otherCluster("n3", fork) {
			t.Fatal("an answer of another cluster was taken as this cluster's")
		}
	}
	h.peers["n3"] = &peerState{lastOK: h.now(), resp: fork}
	if i, s := h.NewestConfiguration(); i != 0 || s != nil {
		t.Fatalf("newest configuration %d %v taken from another cluster", i, s)
	}
	if len(fired) != 0 || strings.Count(logs.String(), "another cluster") != 1 || !strings.Contains(logs.String(), "c-fork") {
		t.Fatalf("fired %q; log:\n%s", fired, logs)
	}
	in := healthInputs{self: "n1", clusterID: "c-own", now: h.now(), peers: map[string]peerState{"n3": *h.peers["n3"]}}
	if mh := memberHealth(in, "n3", 0); mh.GetReachable() || !strings.Contains(mh.GetReason(), "another cluster (c-fork)") {
		t.Fatalf("member health %v", mh)
	}
	for _, unknown := range []string{"", "c-own"} {
		if h.otherCluster("n3", &api.ProgressResponse{ClusterId: unknown}) {
			t.Fatalf("cluster id %q taken as another cluster", unknown)
		}
	}
	if h2 := NewMonitor("n1", termOnly(term), fsm.New(fsm.Options{}), nil, slog.New(slog.DiscardHandler), nil); h2.otherCluster("n3", fork) {
		t.Fatal("a node that does not know its cluster refused an answer")
	}
}

// termOnly is a raft whose current term is all the test may read.
type termOnly uint64

func (termOnly) State() raft.RaftState                             { panic("not read") }
func (t termOnly) CurrentTerm() uint64                             { return uint64(t) }
func (termOnly) CommitIndex() uint64                               { panic("not read") }
func (termOnly) LastContact() time.Time                            { panic("not read") }
func (termOnly) LeaderWithID() (raft.ServerAddress, raft.ServerID) { panic("not read") }
func (termOnly) GetConfiguration() raft.ConfigurationFuture        { panic("not read") }

// The recorded member table stands in while the FSM has not applied up to
// it (empty after a restart, or an older snapshot), and only for its own
// cluster; once the FSM is past it, the FSM's table rules.
func TestRecordedMembersUntilTheLogApplies(t *testing.T) {
	rec := &Recorded{ClusterID: "c-own", Index: 5, Members: []*api.Member{{NodeId: "n1"}, {NodeId: "n2"}, {NodeId: "n3"}}}
	boot := func(f *fsm.FSM, index uint64, cluster string) {
		data, err := fsm.EncodeCommand(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: cluster, GroupId: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		f.Apply(&raft.Log{Index: index, Data: data})
	}
	for _, tc := range []struct {
		name    string
		prepare func(f *fsm.FSM)
		want    string // cluster id the view uses
		useRec  bool
	}{
		{"an empty FSM after a restart", func(*fsm.FSM) {}, "c-own", true},
		{"an FSM behind the record", func(f *fsm.FSM) { boot(f, 3, "c-own") }, "c-own", true},
		{"an FSM at the record", func(f *fsm.FSM) { boot(f, 5, "c-own") }, "c-own", false},
		{"an FSM of another cluster", func(f *fsm.FSM) { boot(f, 2, "c-new") }, "c-new", false},
	} {
		f := fsm.New(fsm.Options{})
		tc.prepare(f)
		h := NewMonitor("n1", termOnly(1), f, nil, slog.New(slog.DiscardHandler), nil)
		h.UseRecorded(rec)
		id, members, at := h.view(f.State())
		if id != tc.want || (at != 0) != tc.useRec || (len(members) == 3) != tc.useRec {
			t.Errorf("%s: view %q with %d members at %d", tc.name, id, len(members), at)
		}
	}
}
