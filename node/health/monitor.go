package health

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/transport"
	"github.com/hotsplit/hotsplit/version"
)

// Health thresholds.
const (
	// probeInterval is how often every member is asked for its progress.
	probeInterval = 500 * time.Millisecond
	// probeTimeout bounds one probe: a paused member counts as unreachable
	// once it has not answered for this long.
	probeTimeout = time.Second
	// staleContact: a member not heard from for this long is unreachable
	// even if no probe has failed yet (a probe in flight to a paused node).
	staleContact = 3 * probeInterval
	// maxHealthyLag is how many entries a member's applied index may trail
	// the leader's commit index and still be healthy (the promotion bound).
	maxHealthyLag = 64
)

// peerState is what the monitor knows of one peer. Guarded by
// Monitor.mu.
type peerState struct {
	lastOK     time.Time // last answered probe
	lastErr    error     // last failed probe, nil after an answer
	lastErrAt  time.Time
	inFlight   bool
	resp       *api.ProgressResponse // last answer
	hbFailing  bool                  // raft heartbeats to it fail (leader only)
	hbSince    time.Time             // when they started failing
	hbLastSeen time.Time             // raft's last contact before they failed
}

// Raft is the part of *raft.Raft the monitor reads.
type Raft interface {
	State() raft.RaftState
	CurrentTerm() uint64
	CommitIndex() uint64
	LastContact() time.Time
	LeaderWithID() (raft.ServerAddress, raft.ServerID)
	GetConfiguration() raft.ConfigurationFuture
}

// Monitor keeps this node's view of every member: each is probed
// (Cluster.Progress, node role) every probeInterval, and on the leader
// raft's heartbeat observations mark a peer whose raft port stopped
// answering. Any node answers Cluster.Health from it, leader or not, so an
// operator sees a lost quorum from the survivors. Safe for concurrent use.
type Monitor struct {
	self  string
	raft  Raft
	fsm   *fsm.FSM
	probe func(ctx context.Context, addr string) (*api.ProgressResponse, error)
	log   *slog.Logger
	now   func() time.Time
	// onRemoved is called once when the leader's committed configuration no
	// longer lists this node.
	onRemoved func(reason string)

	// recorded is the member table the node recorded in its data dir
	// before it started (nil if none); see UseRecorded.
	recorded *Recorded

	mu      sync.Mutex
	peers   map[string]*peerState
	removed bool
	// foreign remembers, per peer, the other cluster id it was last said
	// to answer for, so the line is written once per change.
	foreign map[string]string
}

// NewMonitor returns the monitor of node self: probe asks the member at a
// gRPC address for its progress, onRemoved is called once when a leader's
// committed configuration no longer lists self. Run starts it; Note feeds
// it raft's observations.
func NewMonitor(self string, r Raft, f *fsm.FSM, probe func(ctx context.Context, addr string) (*api.ProgressResponse, error), log *slog.Logger, onRemoved func(reason string)) *Monitor {
	return &Monitor{self: self, raft: r, fsm: f, probe: probe, log: log, now: time.Now, onRemoved: onRemoved, peers: map[string]*peerState{}, foreign: map[string]string{}}
}

// Recorded is the member table and cluster id a node recorded in its data
// dir while it ran, read back when it starts again.
type Recorded struct {
	ClusterID string
	// Index is the applied index the table was read at.
	Index   uint64
	Members []*api.Member
}

// UseRecorded gives the monitor the member table the node recorded before
// it started. After a restart the FSM holds only the newest snapshot's
// state until a leader commits an entry (raft applies its log only once it
// learns the commit index), so a node restarted alone, or a whole cluster
// restarted at once, would know no member to probe and no cluster id. Until
// the FSM has applied past the record, health probes and lists the
// recorded members, and says so. Call it before Run; r must be of the data
// dir's cluster.
func (h *Monitor) UseRecorded(r *Recorded) { h.recorded = r }

// view is the cluster id and member table health works from: the FSM's,
// or the recorded ones while the FSM has not applied up to them (then
// recordedAt is the record's index, else 0).
func (h *Monitor) view(st *fsm.State) (clusterID string, members []*api.Member, recordedAt uint64) {
	r := h.recorded
	if r == nil || (st.Bootstrapped() && (st.ClusterID() != r.ClusterID || st.Index() >= r.Index)) {
		return st.ClusterID(), st.Members(), 0
	}
	return r.ClusterID, r.Members, r.Index
}

// Run probes every member until ctx ends.
func (h *Monitor) Run(ctx context.Context) {
	t := time.NewTicker(probeInterval)
	defer t.Stop()
	for {
		if h.raft.State() == raft.Shutdown && ctx.Err() == nil && h.onRemoved != nil {
			// Raft shuts down by itself only when a leader commits its own
			// removal (ShutdownOnRemove).
			h.fireRemoved("raft shut down: this node's removal from the configuration committed")
			return
		}
		h.probeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// probeAll starts one probe per member that has none in flight.
func (h *Monitor) probeAll(ctx context.Context) {
	_, members, _ := h.view(h.fsm.State())
	for _, m := range members {
		if m.GetNodeId() == h.self || m.GetGrpcAddr() == "" {
			continue
		}
		id, addr := m.GetNodeId(), m.GetGrpcAddr()
		h.mu.Lock()
		p := h.peer(id)
		busy := p.inFlight
		p.inFlight = true
		h.mu.Unlock()
		if busy {
			continue
		}
		go h.probeOne(ctx, id, addr)
	}
}

func (h *Monitor) peer(id string) *peerState {
	p := h.peers[id]
	if p == nil {
		p = &peerState{}
		h.peers[id] = p
	}
	return p
}

func (h *Monitor) probeOne(ctx context.Context, id, addr string) {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	resp, err := h.probe(pctx, addr)
	cancel()
	now := h.now()
	h.mu.Lock()
	p := h.peer(id)
	p.inFlight = false
	if err != nil {
		p.lastErr, p.lastErrAt = err, now
	} else {
		p.lastOK, p.lastErr, p.resp = now, nil, resp
	}
	h.mu.Unlock()
	if err == nil && !h.otherCluster(id, resp) {
		h.checkRemoved(id, resp)
	}
}

// otherCluster reports whether a member answered for another cluster than
// this node's, and says so in one line per peer and cluster id. Such an
// answer proves nothing here: its leadership, its configuration (the raft
// port's admission reads NewestConfiguration) and its verdict that this
// node was removed are ignored. It happens when a member's data dir was
// turned into a new cluster (--forceNewCluster, --restoreSnapshot) while
// this cluster still lists it. Ids conflict only when both are known.
func (h *Monitor) otherCluster(from string, resp *api.ProgressResponse) bool {
	own, _, _ := h.view(h.fsm.State())
	theirs := resp.GetClusterId()
	if foreignCluster(own, theirs) == "" {
		h.mu.Lock()
		delete(h.foreign, from)
		h.mu.Unlock()
		return false
	}
	h.mu.Lock()
	said := h.foreign[from] == theirs
	h.foreign[from] = theirs
	h.mu.Unlock()
	if !said {
		h.log.Warn("member answers for another cluster: its leadership, configuration and removal verdicts are ignored (was its data dir recovered into a new cluster?)",
			"peer_id", from, "peer_cluster_id", theirs, "cluster_id", own, "peer_raft_state", resp.GetRaftState(), "peer_term", resp.GetTerm())
	}
	return true
}

// foreignCluster returns the peer's cluster id when it names another
// cluster than own, "" when they agree or either is unknown.
func foreignCluster(own, theirs string) string {
	if own == "" || theirs == "" || own == theirs {
		return ""
	}
	return theirs
}

// checkRemoved stops this node once a leader at least as new as this
// node's term has committed a configuration without it: raft stops
// replicating to a removed follower as soon as the removal is appended, so
// the follower may never learn of it by itself and would campaign (or sit)
// forever. A node that is joining is not probed by anyone's member list
// until the leader has added it, and never probes before it has a member
// table, so it cannot mistake an old configuration for its removal.
func (h *Monitor) checkRemoved(from string, resp *api.ProgressResponse) {
	if resp.GetRaftState() != transport.RaftStateName(raft.Leader) || resp.GetTerm() < h.raft.CurrentTerm() ||
		resp.GetConfigurationIndex() == 0 || slices.Contains(resp.GetConfiguration(), h.self) {
		return
	}
	h.fireRemoved(fmt.Sprintf("the committed configuration of leader %s (term %d, index %d) no longer lists %s", from, resp.GetTerm(), resp.GetConfigurationIndex(), h.self))
}

// NewestConfiguration is the newest committed raft configuration any
// member reported in its last answer: its index and server ids (0, nil if
// none). Members answer over node-to-node mutual TLS, each proving the
// identity this node's member table expects at its address.
func (h *Monitor) NewestConfiguration() (uint64, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var index uint64
	var servers []string
	own, _, _ := h.view(h.fsm.State())
	for _, p := range h.peers {
		if foreignCluster(own, p.resp.GetClusterId()) != "" {
			continue
		}
		if i := p.resp.GetConfigurationIndex(); i > index {
			index, servers = i, p.resp.GetConfiguration()
		}
	}
	return index, servers
}

// fireRemoved calls onRemoved once.
func (h *Monitor) fireRemoved(reason string) {
	h.mu.Lock()
	already := h.removed
	h.removed = true
	h.mu.Unlock()
	if !already && h.onRemoved != nil {
		h.onRemoved(reason)
	}
}

// Note takes one raft observation: on the leader, heartbeat failures mark
// a peer whose raft port stopped answering even if its gRPC port still
// does.
func (h *Monitor) Note(o raft.Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch d := o.Data.(type) {
	case raft.FailedHeartbeatObservation:
		p := h.peer(string(d.PeerID))
		if !p.hbFailing {
			p.hbFailing, p.hbSince, p.hbLastSeen = true, h.now(), d.LastContact
		}
	case raft.ResumedHeartbeatObservation:
		h.peer(string(d.PeerID)).hbFailing = false
	case raft.LeaderObservation:
		// A new leader heartbeats afresh: forget the old one's observations.
		for _, p := range h.peers {
			p.hbFailing = false
		}
	case raft.PeerObservation:
		if d.Removed {
			delete(h.peers, string(d.Peer.ID))
		}
	}
}

// Report is this node's view of the cluster now (transport.HealthSource).
func (h *Monitor) Report() *api.HealthResponse {
	st := h.fsm.State()
	clusterID, members, recordedAt := h.view(st)
	in := healthInputs{self: h.self, clusterID: clusterID, now: h.now(), recordedAt: recordedAt}
	if f := h.raft.GetConfiguration(); f.Error() == nil {
		in.servers = f.Configuration().Servers
	}
	_, leader := h.raft.LeaderWithID()
	in.leader = string(leader)
	in.selfState = transport.RaftStateName(h.raft.State())
	in.term = h.raft.CurrentTerm()
	in.selfApplied = st.Index()
	in.selfCommit = h.raft.CommitIndex()
	in.selfLeaderContact = h.raft.LastContact()
	in.members = members
	h.mu.Lock()
	in.peers = make(map[string]peerState, len(h.peers))
	for id, p := range h.peers {
		in.peers[id] = *p
	}
	h.mu.Unlock()
	return decideHealth(in)
}

// LastContact returns how long ago this node heard from each peer it has
// ever heard from (for the per-peer metric).
func (h *Monitor) LastContact() map[string]time.Duration {
	now := h.now()
	out := map[string]time.Duration{}
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, p := range h.peers {
		if !p.lastOK.IsZero() {
			out[id] = now.Sub(p.lastOK)
		}
	}
	if _, leader := h.raft.LeaderWithID(); leader != "" && string(leader) != h.self {
		if lc := h.raft.LastContact(); !lc.IsZero() {
			if d, ok := out[string(leader)]; !ok || now.Sub(lc) < d {
				out[string(leader)] = now.Sub(lc)
			}
		}
	}
	return out
}

// healthInputs is everything decideHealth looks at: plain values, so the
// rules are table-tested without a cluster.
type healthInputs struct {
	self, clusterID   string
	now               time.Time
	servers           []raft.Server
	members           []*api.Member
	leader            string
	selfState         string
	term              uint64
	selfApplied       uint64
	selfCommit        uint64
	selfLeaderContact time.Time // raft's last contact with the leader (followers)
	peers             map[string]peerState
	// recordedAt is the index of the recorded member table in use (0: the
	// FSM's).
	recordedAt uint64
}

// decideHealth builds the health report: per member whether it is
// reachable, how far it trails, and why it is not healthy; then quorum and
// the overall status (no quorum when fewer voters are reachable than a
// quorum needs or no leader is known; degraded when any member is
// unhealthy).
func decideHealth(in healthInputs) *api.HealthResponse {
	resp := &api.HealthResponse{LeaderId: in.leader, Term: in.term, ServedBy: in.self, ClusterId: in.clusterID}
	// The leader's commit index: our own when we lead, else the leader's
	// last answer, else our own (a lower bound).
	commit := in.selfCommit
	if in.leader != "" && in.leader != in.self {
		if p, ok := in.peers[in.leader]; ok && p.resp != nil {
			commit = max(commit, p.resp.GetCommitIndex())
		}
	}
	resp.CommitIndex = commit

	suffrage := map[string]raft.ServerSuffrage{}
	for _, s := range in.servers {
		suffrage[string(s.ID)] = s.Suffrage
	}
	records := map[string]*api.Member{}
	ids := []string{}
	for _, m := range in.members {
		records[m.GetNodeId()] = m
		ids = append(ids, m.GetNodeId())
	}
	for id := range suffrage {
		if records[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)

	for _, id := range ids {
		ms := &api.MemberStatus{Member: records[id], Leader: id == in.leader}
		if ms.Member == nil {
			ms.Member = &api.Member{NodeId: id}
		}
		suf, inRaft := suffrage[id]
		switch {
		case !inRaft:
		case suf == raft.Voter:
			ms.Suffrage = "voter"
		default:
			ms.Suffrage = "nonvoter"
		}
		h := memberHealth(in, id, commit)
		var why []string
		if h.Reason != "" {
			why = append(why, h.Reason)
		}
		switch {
		case !inRaft:
			why = append(why, "not in the raft configuration")
		case records[id] == nil:
			why = append(why, "in the raft configuration without a member record (mid-join?)")
		case ms.Suffrage == "nonvoter":
			why = append(why, "non-voter: catching up before promotion")
		}
		h.Reason = strings.Join(why, "; ")
		ms.Health = h
		resp.Members = append(resp.Members, ms)
		if ms.Suffrage == "voter" {
			resp.Voters++
			if h.Reachable {
				resp.VotersReachable++
			}
		}
	}
	resp.Quorum = resp.Voters/2 + 1
	degraded := false
	for _, ms := range resp.Members {
		if ms.Health.Reason != "" {
			degraded = true
		}
	}
	switch {
	case resp.Voters == 0:
		resp.Status = api.HealthStatus_HEALTH_STATUS_NO_QUORUM
		resp.Reasons = append(resp.Reasons, fmt.Sprintf("%s knows no raft configuration (raft state %s)", in.self, in.selfState))
	case resp.VotersReachable < resp.Quorum:
		resp.Status = api.HealthStatus_HEALTH_STATUS_NO_QUORUM
		resp.Reasons = append(resp.Reasons, fmt.Sprintf("%d of %d voters reachable from %s; a quorum needs %d", resp.VotersReachable, resp.Voters, in.self, resp.Quorum))
	case in.leader == "":
		resp.Status = api.HealthStatus_HEALTH_STATUS_NO_QUORUM
		resp.Reasons = append(resp.Reasons, fmt.Sprintf("%s knows no leader (raft state %s, term %d)", in.self, in.selfState, in.term))
	case degraded:
		resp.Status = api.HealthStatus_HEALTH_STATUS_DEGRADED
	default:
		resp.Status = api.HealthStatus_HEALTH_STATUS_HEALTHY
	}
	if in.recordedAt > 0 {
		resp.Reasons = append(resp.Reasons, fmt.Sprintf("%s has not applied its log since it started (applied index %d; no leader has committed an entry to it yet): members as it recorded them at index %d",
			in.self, in.selfApplied, in.recordedAt))
	}
	if resp.Status != api.HealthStatus_HEALTH_STATUS_NO_QUORUM && resp.Voters > 1 && resp.VotersReachable == resp.Quorum {
		resp.Reasons = append(resp.Reasons, fmt.Sprintf("quorum at risk: %d of %d voters reachable, one more failure loses the quorum", resp.VotersReachable, resp.Voters))
	}
	return resp
}

// memberHealth is one member's health from the answering node's point of
// view; Reason holds only reachability and lag.
func memberHealth(in healthInputs, id string, commit uint64) *api.MemberHealth {
	if id == in.self {
		h := &api.MemberHealth{Reachable: true, Contacted: true, RaftState: in.selfState, Term: in.term, AppliedIndex: in.selfApplied, Version: version.String()}
		h.AppliedLag = lag(commit, in.selfApplied)
		if h.AppliedLag > maxHealthyLag {
			h.Reason = fmt.Sprintf("applied index %d entries behind the leader's commit index", h.AppliedLag)
		}
		return h
	}
	h := &api.MemberHealth{}
	p, ok := in.peers[id]
	if !ok {
		h.Reason = "not probed yet"
		return h
	}
	if !p.lastOK.IsZero() {
		h.Contacted = true
		since := in.now.Sub(p.lastOK)
		// A follower hears from its leader through raft more often than it
		// probes it.
		if id == in.leader && !in.selfLeaderContact.IsZero() && in.now.Sub(in.selfLeaderContact) < since {
			since = in.now.Sub(in.selfLeaderContact)
		}
		h.LastContactMs = uint64(max(since, 0) / time.Millisecond)
	}
	if r := p.resp; r != nil {
		h.RaftState, h.Term, h.AppliedIndex, h.Version = r.GetRaftState(), r.GetTerm(), r.GetAppliedIndex(), r.GetVersion()
		h.AppliedLag = lag(commit, r.GetAppliedIndex())
	}
	// Why it is unreachable, if it is: its raft state and term are then
	// the ones it last reported, and the reason says so (a kill -9'd
	// leader is not "leader" any more).
	unreachable := ""
	switch {
	case p.lastErr != nil && !p.lastErrAt.Before(p.lastOK):
		unreachable = probeError(p.lastErr)
	case foreignCluster(in.clusterID, p.resp.GetClusterId()) != "":
		h.Reason = fmt.Sprintf("answers for another cluster (%s): its data dir was recovered into a new cluster; it cannot vote here", p.resp.GetClusterId())
	case p.lastOK.IsZero():
		h.Reason = "no answer yet"
	case in.now.Sub(p.lastOK) > staleContact:
		unreachable = fmt.Sprintf("no answer for %v", in.now.Sub(p.lastOK).Round(time.Millisecond))
	case p.hbFailing:
		unreachable = fmt.Sprintf("raft heartbeats failing since %s", p.hbSince.UTC().Format("15:04:05.000Z"))
	case h.RaftState == transport.RaftStateName(raft.Shutdown):
		h.Reason = "raft shut down: it cannot vote"
	}
	if unreachable != "" {
		h.Reason = "unreachable: " + unreachable
		if h.RaftState != "" {
			h.Reason = fmt.Sprintf("last seen as %s (term %d), unreachable: %s", h.RaftState, h.Term, unreachable)
		}
	}
	h.Reachable = h.Reason == ""
	if h.Reachable && h.AppliedLag > maxHealthyLag {
		h.Reason = fmt.Sprintf("applied index %d entries behind the leader's commit index", h.AppliedLag)
	}
	return h
}

func lag(commit, applied uint64) uint64 {
	if applied >= commit {
		return 0
	}
	return commit - applied
}

// probeError says in a few words why a probe failed: the dial error
// ("dial tcp …: connection refused") or the status message.
func probeError(err error) string {
	msg := status.Convert(err).Message()
	if i := strings.LastIndex(msg, "dial tcp "); i >= 0 {
		msg = strings.TrimRight(msg[i:], `"`)
	}
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
