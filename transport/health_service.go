package transport

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/version"
)

// HealthSource is this node's view of its peers (the node's health
// monitor): Cluster.Health answers it, Members attaches each member's part,
// Leader says whether the leader is still heard from, and Status warns
// about unreachable voters and quorum at risk.
type HealthSource interface {
	Report() *api.HealthResponse
}

// Health answers from this node's own view, without a leader: it is how an
// operator sees from the survivors that a quorum is lost.
func (c *clusterServer) Health(_ context.Context, _ *api.HealthRequest) (*api.HealthResponse, error) {
	if c.s.cfg.Health == nil {
		return nil, statusUnimplemented("health: this node runs no health monitor")
	}
	return c.s.cfg.Health.Report(), nil
}

// Progress answers a peer's health probe with this node's own raft state,
// applied index, build and configuration.
func (c *clusterServer) Progress(_ context.Context, _ *api.ProgressRequest) (*api.ProgressResponse, error) {
	r := c.s.cfg.Raft
	st := c.s.cfg.FSM.State()
	resp := &api.ProgressResponse{
		NodeId: c.s.cfg.NodeID, RaftState: RaftStateName(r.State()), Term: r.CurrentTerm(),
		AppliedIndex: st.Index(), CommitIndex: r.CommitIndex(),
		Version: version.String(), SupportedVersion: clusterversion.Supported, ClusterId: st.ClusterID(),
	}
	if _, id := r.LeaderWithID(); id != "" {
		resp.LeaderId = string(id)
	}
	if c := c.s.cfg.CommittedConfiguration; c != nil {
		resp.ConfigurationIndex, resp.Configuration = c()
	} else if f := r.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			resp.Configuration = append(resp.Configuration, string(s.ID))
		}
	}
	return resp, nil
}

// RaftStateName is how a raft state is shown and sent: leader, follower,
// candidate, shutdown.
func RaftStateName(s raft.RaftState) string { return strings.ToLower(s.String()) }

// Version answers with this node's build and versions.
func (c *clusterServer) Version(_ context.Context, _ *api.VersionRequest) (*api.VersionResponse, error) {
	st := c.s.cfg.FSM.State()
	return &api.VersionResponse{NodeId: c.s.cfg.NodeID, Version: version.String(), GoVersion: runtime.Version(),
		SupportedClusterVersion: clusterversion.Supported, ClusterVersion: st.ClusterVersion(), ClusterId: st.ClusterID()}, nil
}

// memberHealth returns the health of every member this node knows of, by
// node id; nil without a health monitor.
func (s *Server) memberHealth() map[string]*api.MemberHealth {
	if s.cfg.Health == nil {
		return nil
	}
	out := map[string]*api.MemberHealth{}
	for _, m := range s.cfg.Health.Report().GetMembers() {
		out[m.GetMember().GetNodeId()] = m.GetHealth()
	}
	return out
}

// routesNearCapPercent: live routes at or above this share of
// max_auto_routes are a status warning (the detector stops splitting at the
// cap).
const routesNearCapPercent = 90

// operationWarnings are the operational lines of `autosplit status`:
// unreachable voters, a quorum one failure from being lost, load columns
// lagging more than two steps, and a catalog near max_auto_routes.
func (s *Server) operationWarnings(st *fsm.State, nowMs uint64) []string {
	var w []string
	if s.cfg.Health != nil {
		rep := s.cfg.Health.Report()
		for _, m := range rep.GetMembers() {
			if m.GetSuffrage() == "voter" && !m.GetHealth().GetReachable() {
				w = append(w, fmt.Sprintf("voter %s unreachable from %s: %s", m.GetMember().GetNodeId(), rep.GetServedBy(), m.GetHealth().GetReason()))
			}
		}
		if v, r := rep.GetVoters(), rep.GetVotersReachable(); v > 1 && r <= rep.GetQuorum() {
			w = append(w, fmt.Sprintf("quorum at risk: %d of %d voters reachable, a quorum needs %d", r, v, rep.GetQuorum()))
		}
	}
	cfg := st.Config()
	if at, step := st.LastColumnAtMs(), cfg.GetStepMs(); at > 0 && step > 0 && nowMs > at && nowMs-at > 2*step {
		w = append(w, fmt.Sprintf("load columns lag: the last one committed %v ago, over two steps of %v (are the reporters reaching the leader?)",
			time.Duration(nowMs-at)*time.Millisecond, time.Duration(step)*time.Millisecond))
	}
	if limit := uint64(cfg.GetMaxAutoRoutes()); limit > 0 {
		if live := uint64(st.Catalog().Len()); live*100 >= limit*routesNearCapPercent {
			w = append(w, fmt.Sprintf("%d live routes, %d%% of max_auto_routes %d: automatic splits stop at the cap until merges free routes (see the merge candidates below; raise the cap with 'autosplit config set max_auto_routes=N')",
				live, live*100/limit, limit))
		}
	}
	return w
}

// leaderContact fills a Leader answer's contact fields from this node's
// health view: a follower keeps naming a dead leader until its election
// timeout passes, so say how long it has not been heard from.
func (s *Server) leaderContact(resp *api.LeaderResponse) {
	if resp.GetLeaderId() == "" || resp.GetLeaderId() == s.cfg.NodeID || s.cfg.Health == nil {
		return
	}
	if s.cfg.Raft.State() == raft.Leader {
		return
	}
	for _, m := range s.cfg.Health.Report().GetMembers() {
		if m.GetMember().GetNodeId() == resp.GetLeaderId() {
			h := m.GetHealth()
			resp.LeaderLastContactMs = h.GetLastContactMs()
			resp.LeaderUnreachable = !h.GetReachable()
		}
	}
}
