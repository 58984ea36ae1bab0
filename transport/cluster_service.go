package transport

import (
	"context"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
)

type clusterServer struct {
	api.UnimplementedClusterServer
	s *Server
}

func checkAddr(field, addr string) error {
	if addr == "" {
		return invalid("%s: must be set (host:port)", field)
	}
	if len(addr) > maxAddrLen {
		return invalid("%s: %d bytes exceeds the limit of %d", field, len(addr), maxAddrLen)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || port == "" {
		return invalid("%s: %q is not host:port", field, addr)
	}
	return nil
}

func checkNodeID(id string) error {
	if err := api.ValidateNodeID(id); err != nil {
		return invalid("node_id: %v", err)
	}
	return nil
}

func (c *clusterServer) Join(ctx context.Context, req *api.JoinRequest) (*api.JoinResponse, error) {
	if err := checkNodeID(req.GetNodeId()); err != nil {
		return nil, err
	}
	if err := checkAddr("raft_addr", req.GetRaftAddr()); err != nil {
		return nil, err
	}
	if err := checkAddr("grpc_addr", req.GetGrpcAddr()); err != nil {
		return nil, err
	}
	if !clusterversion.IsVersion(req.GetSupportedVersion()) {
		return nil, invalid("supported_version: must be set")
	}
	if resp, handled, err := forwardWrite(ctx, c.s, "", func(ctx context.Context, cc *grpc.ClientConn) (*api.JoinResponse, error) {
		return api.NewClusterClient(cc).Join(ctx, req)
	}); handled {
		return resp, err
	}
	m := &api.Member{NodeId: req.GetNodeId(), RaftAddr: req.GetRaftAddr(), GrpcAddr: req.GetGrpcAddr(), SupportedVersion: req.GetSupportedVersion(), AutoSplitFlag: req.GetAutoSplitFlag()}
	// A node joining by itself must have been admitted; an admin's join is
	// the admission.
	p, _ := PrincipalFrom(ctx)
	needsAdmission := p == nil || !p.Has(RoleAdmin)
	if err := c.s.cfg.Sched.Join(ctx, m, req.GetClusterId(), needsAdmission); err != nil {
		return nil, membershipError(err, c.s.leaderHint())
	}
	st := c.s.cfg.FSM.State()
	return &api.JoinResponse{ClusterId: st.ClusterID(), Members: st.Members()}, nil
}

func (c *clusterServer) Remove(ctx context.Context, req *api.RemoveRequest) (*api.RemoveResponse, error) {
	if err := checkNodeID(req.GetNodeId()); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardLeadership(ctx, c.s, func(ctx context.Context, cc *grpc.ClientConn) (*api.RemoveResponse, error) {
		return api.NewClusterClient(cc).Remove(ctx, req)
	}); handled {
		return resp, err
	}
	if req.GetNodeId() == c.s.cfg.NodeID {
		return c.removeLeader(ctx, req)
	}
	if err := c.s.cfg.Sched.Remove(ctx, req.GetNodeId()); err != nil {
		return nil, membershipError(err, c.s.leaderHint())
	}
	return &api.RemoveResponse{}, nil
}

// removeLeader removes this node, the leader: it hands leadership to
// another voter first and removes itself through the new leader, so the
// removal commits under a leader that stays (a leader that removes itself
// shuts raft down before it can answer, and its client saw "not applied"
// for a removal that was applied). The answer names the new leader.
func (c *clusterServer) removeLeader(ctx context.Context, req *api.RemoveRequest) (*api.RemoveResponse, error) {
	to, err := c.s.cfg.Sched.TransferLeadership(ctx, "")
	if err != nil {
		return nil, membershipError(err, c.s.leaderHint())
	}
	hint := c.s.leaderHint()
	if hint == nil || hint.LeaderId == c.s.cfg.NodeID || hint.LeaderGrpcAddr == "" {
		return nil, unavailable(hint, "leadership moved away from %s so that it can be removed, but the new leader is not known yet; retry", c.s.cfg.NodeID)
	}
	c.s.log.Info("leadership handed over to remove this node through the new leader", "to", hint.LeaderId)
	// One more hop, to the leader just chosen: it serves the removal itself,
	// once it has established its fence (a few entries: retried briefly
	// while it answers "not ready", which is definite).
	var resp *api.RemoveResponse
	for attempt := 0; ; attempt++ {
		resp, err = forwardHop(ctx, c.s, hint, true, "", hopOptions{keepOnLeaderChange: true, timeout: leadershipForwardTimeout}, func(ctx context.Context, cc *grpc.ClientConn) (*api.RemoveResponse, error) {
			return api.NewClusterClient(cc).Remove(ctx, req)
		})
		if err == nil || status.Code(err) != codes.Unavailable || attempt >= 40 || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
		if h := c.s.leaderHint(); h != nil && h.LeaderGrpcAddr != "" && h.LeaderId != c.s.cfg.NodeID {
			hint = h
		}
	}
	if err != nil {
		return nil, err
	}
	if to == "" {
		to = hint.LeaderId
	}
	resp.LeadershipTransferredTo = to
	return resp, nil
}

func (c *clusterServer) Members(ctx context.Context, req *api.MembersRequest) (*api.MembersResponse, error) {
	if resp, handled, err := forwardRead(ctx, c.s, req.GetConsistency(), func(ctx context.Context, cc *grpc.ClientConn) (*api.MembersResponse, error) {
		return api.NewClusterClient(cc).Members(ctx, req)
	}); handled {
		return resp, err
	}
	st, info, err := c.s.readState(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	return &api.MembersResponse{Members: c.s.memberStatuses(ctx, st), ClusterId: st.ClusterID(), ClusterVersion: st.ClusterVersion(), Admissions: st.Admissions(), Read: info}, nil
}

// memberStatuses joins the replicated member table with this node's view of
// the raft configuration, sorted by node id.
func (s *Server) memberStatuses(ctx context.Context, st *fsm.State) []*api.MemberStatus {
	suffrage := map[string]string{}
	if f := s.cfg.Raft.GetConfiguration(); f.Error() == nil {
		for _, srv := range f.Configuration().Servers {
			switch srv.Suffrage {
			case raft.Voter:
				suffrage[string(srv.ID)] = "voter"
			case raft.Nonvoter, raft.Staging:
				suffrage[string(srv.ID)] = "nonvoter"
			}
		}
	}
	_, leader := s.cfg.Raft.LeaderWithID()
	health := s.memberHealth()
	var out []*api.MemberStatus
	seen := map[string]bool{}
	for _, m := range st.Members() {
		seen[m.NodeId] = true
		out = append(out, &api.MemberStatus{Member: m, Suffrage: suffrage[m.NodeId], Leader: string(leader) == m.NodeId, Health: health[m.NodeId]})
	}
	// Raft servers not (yet) in the member table, e.g. mid-join.
	for id, suf := range suffrage {
		if !seen[id] {
			out = append(out, &api.MemberStatus{Member: &api.Member{NodeId: id}, Suffrage: suf, Leader: string(leader) == id, Health: health[id]})
		}
	}
	slices.SortFunc(out, func(a, b *api.MemberStatus) int { return strings.Compare(a.Member.NodeId, b.Member.NodeId) })
	return out
}

func (c *clusterServer) Leader(ctx context.Context, _ *api.LeaderRequest) (*api.LeaderResponse, error) {
	resp := &api.LeaderResponse{Term: c.s.cfg.Raft.CurrentTerm()}
	if hint := c.s.leaderHint(); hint != nil {
		resp.LeaderId, resp.LeaderGrpcAddr = hint.LeaderId, hint.LeaderGrpcAddr
	}
	c.s.leaderContact(resp)
	return resp, nil
}

func (c *clusterServer) TransferLeadership(ctx context.Context, req *api.TransferLeadershipRequest) (*api.TransferLeadershipResponse, error) {
	if to := req.GetToNodeId(); to != "" {
		if err := checkNodeID(to); err != nil {
			return nil, err
		}
	}
	if resp, handled, err := forwardLeadership(ctx, c.s, func(ctx context.Context, cc *grpc.ClientConn) (*api.TransferLeadershipResponse, error) {
		return api.NewClusterClient(cc).TransferLeadership(ctx, req)
	}); handled {
		return resp, err
	}
	id, err := c.s.cfg.Sched.TransferLeadership(ctx, req.GetToNodeId())
	if err != nil {
		return nil, membershipError(err, c.s.leaderHint())
	}
	return &api.TransferLeadershipResponse{LeaderId: id}, nil
}

func (c *clusterServer) Admit(ctx context.Context, req *api.AdmitRequest) (*api.AdmitResponse, error) {
	if err := checkNodeID(req.GetNodeId()); err != nil {
		return nil, err
	}
	if err := checkAddr("raft_addr", req.GetRaftAddr()); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardWrite(ctx, c.s, "", func(ctx context.Context, cc *grpc.ClientConn) (*api.AdmitResponse, error) {
		return api.NewClusterClient(cc).Admit(ctx, req)
	}); handled {
		return resp, err
	}
	actor, _ := actorOf(ctx, "")
	if err := c.s.cfg.Sched.Admit(ctx, req.GetNodeId(), req.GetRaftAddr(), actor); err != nil {
		return nil, membershipError(err, c.s.leaderHint())
	}
	return &api.AdmitResponse{Admissions: c.s.cfg.FSM.State().Admissions()}, nil
}
