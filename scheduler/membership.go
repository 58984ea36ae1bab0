package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/internal/raftfuture"
)

// Membership errors returned by Join and Remove.
var (
	// ErrMemberExists: a join with a node id already in the cluster. A node
	// whose data dir was wiped may not rejoin under its old id: remove it
	// first, or give it a new id.
	ErrMemberExists = errors.New("node id already in use")
	// ErrForeignCluster: the joining node's data belongs to another cluster.
	ErrForeignCluster = errors.New("node belongs to another cluster")
	// ErrUnsupportedVersion: the joining node cannot apply this cluster's log.
	ErrUnsupportedVersion = errors.New("node does not support the cluster version")
	// ErrNoSuchMember: remove of (or transfer to) an unknown node id.
	ErrNoSuchMember = errors.New("no such member")
	// ErrNotVoter: a leadership transfer to a node that cannot lead.
	ErrNotVoter = errors.New("not a voter")
	// ErrTransferFailed: raft could not hand leadership over (definite:
	// this node still leads, or leads no more; retry).
	ErrTransferFailed = errors.New("leadership transfer failed")
	// ErrNotAdmitted: a node asked to join under an id no admin admitted
	// (from that raft address), in a cluster with fsm.Admission on.
	ErrNotAdmitted = errors.New("node not admitted")
	// ErrRemovedMember: a node with this cluster's data announced itself,
	// but it is neither a member nor in the raft configuration any more: it
	// was removed, and may not come back under its old id.
	ErrRemovedMember = errors.New("node was removed from this cluster")
)

// maxPromotionLag is how far (in log entries) a non-voter may trail the
// leader's commit index and still be promoted to voter.
const maxPromotionLag = 64

// Join adds a node as a non-voter and records it as a member; the leader
// promotes it to voter once it has caught up (docs/design.md#interfaces). Leader only.
// needsAdmission is set when the caller is the node itself rather than an
// admin: from cluster version 2 a new node must then have been admitted
// (Admit) from the raft address it gives.
func (s *Scheduler) Join(ctx context.Context, m *api.Member, clusterID string, needsAdmission bool) error {
	if !s.IsReady() {
		return ErrNotLeader
	}
	st := s.fsm.State()
	if clusterID != "" && clusterID != st.ClusterID() {
		return fmt.Errorf("%w: node %q has cluster id %q, this cluster is %q", ErrForeignCluster, m.NodeId, clusterID, st.ClusterID())
	}
	if !clusterversion.Reaches(m.SupportedVersion, st.ClusterVersion()) {
		return fmt.Errorf("%w: node %q supports version %d, cluster is at %d", ErrUnsupportedVersion, m.NodeId, m.SupportedVersion, st.ClusterVersion())
	}
	cfg, err := s.configuration(ctx)
	if err != nil {
		return err
	}
	existing, isMember := st.Member(m.NodeId)
	if clusterID != "" && isMember && existing.RaftAddr == m.RaftAddr && inConfiguration(cfg, m.NodeId) {
		// An intact member announcing itself after a restart: refresh its
		// record if it changed (addresses, version, start flag).
		if !proto.Equal(existing, m) {
			if err := s.setMember(ctx, m); err != nil {
				return err
			}
		}
		s.seedSwitchFromFlag(ctx, m)
		return nil
	}
	if clusterID != "" && !isMember && !inConfiguration(cfg, m.NodeId) {
		return fmt.Errorf("%w: %q holds this cluster's data but is no member; wipe its data dir and join under a new id", ErrRemovedMember, m.NodeId)
	}
	for _, srv := range cfg.Servers {
		if string(srv.ID) == m.NodeId || (string(srv.Address) == m.RaftAddr && isMember) {
			return fmt.Errorf("%w: %q (raft %s) is already in the raft configuration", ErrMemberExists, m.NodeId, srv.Address)
		}
	}
	if isMember {
		return fmt.Errorf("%w: %q is a recorded member; remove it first", ErrMemberExists, m.NodeId)
	}
	if needsAdmission && st.Has(clusterversion.Admission) {
		adm, ok := st.Admission(m.NodeId)
		if !ok || adm.GetRaftAddr() != m.RaftAddr {
			return fmt.Errorf("%w: %q from raft address %s: an admin runs `hotsplitctl cluster add %s --raft-addr %s` first", ErrNotAdmitted, m.NodeId, m.RaftAddr, m.NodeId, m.RaftAddr)
		}
	}
	if err := raftfuture.Wait(ctx, s.raft.AddNonvoter(raft.ServerID(m.NodeId), raft.ServerAddress(m.RaftAddr), 0, s.cfg.RaftTimeout)); err != nil {
		return classify(err)
	}
	if err := s.setMember(ctx, m); err != nil {
		return err
	}
	s.log.Info("node joined as non-voter", "member_id", m.NodeId, "raft_addr", m.RaftAddr, "grpc_addr", m.GrpcAddr)
	s.seedSwitchFromFlag(ctx, m)
	return nil
}

// Admit lets nodeID join later from raftAddr (fsm.Admission). Leader
// only. Below the version it needs it fails with fsm.ErrVersionTooLow.
func (s *Scheduler) Admit(ctx context.Context, nodeID, raftAddr, actor string) error {
	if !s.IsReady() {
		return ErrNotLeader
	}
	st := s.fsm.State()
	if err := st.Require(clusterversion.Admission); err != nil {
		return fmt.Errorf("admitting nodes: %w (a member has not been upgraded)", err)
	}
	if _, ok := st.Member(nodeID); ok {
		return fmt.Errorf("%w: %q is a member already", ErrMemberExists, nodeID)
	}
	res, err := s.proposer.Propose(ctx, &api.Command{MinVersion: clusterversion.Admission.Version(), Body: &api.Command_AdmitMember{AdmitMember: &api.AdmitMember{NodeId: nodeID, RaftAddr: raftAddr, Actor: actor}}})
	if err != nil {
		return err
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		return fmt.Errorf("admit rejected: %s", res.GetMessage())
	}
	s.log.Info("node admitted", "member_id", nodeID, "raft_addr", raftAddr, "actor", actor)
	return nil
}

func (s *Scheduler) setMember(ctx context.Context, m *api.Member) error {
	res, err := s.proposer.Propose(ctx, &api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: cloneMember(m)}}})
	if err != nil {
		return err
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		return fmt.Errorf("set member rejected: %s", res.GetMessage())
	}
	return nil
}

// seedSwitchFromFlag applies docs/design.md#ops-the-scheduler-and-the-switch to
// a member that just started with an explicit --autoSplit: its value is
// committed only while no operator has ever set the switch; otherwise the
// mismatch is a warning (here, and in every status answer while the member's
// record says so).
func (s *Scheduler) seedSwitchFromFlag(ctx context.Context, m *api.Member) {
	if m.AutoSplitFlag == api.AutoSplitFlag_AUTO_SPLIT_FLAG_UNSET {
		return
	}
	want := m.AutoSplitFlag == api.AutoSplitFlag_AUTO_SPLIT_FLAG_ON
	sw := s.fsm.State().Switch()
	if sw.GetEnabled() == want {
		return
	}
	if sw.GetSource() == api.SwitchSource_SWITCH_SOURCE_OPERATOR {
		s.log.Warn("member started with an --autoSplit value that differs from the operator-set switch; the flag is ignored",
			"member_id", m.NodeId, "flag", want, "switch", sw.GetEnabled(), "actor", sw.GetActor())
		return
	}
	res, err := s.proposer.Propose(ctx, &api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{
		Enabled: want, Actor: "flag@" + m.NodeId, Reason: "--autoSplit given at the start of " + m.NodeId, Source: api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG,
	}}})
	if err != nil {
		s.log.Warn("could not apply the --autoSplit start flag", "member_id", m.NodeId, "reason", err.Error())
		return
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		s.log.Warn("could not apply the --autoSplit start flag", "member_id", m.NodeId, "reason", res.GetMessage())
		return
	}
	s.log.Info("switch set from a member's --autoSplit start flag", "member_id", m.NodeId, "enabled", want)
}

// Remove takes a node out of the raft configuration and the member table.
func (s *Scheduler) Remove(ctx context.Context, nodeID string) error {
	if !s.IsReady() {
		return ErrNotLeader
	}
	cfg, err := s.configuration(ctx)
	if err != nil {
		return err
	}
	_, isMember := s.fsm.State().Member(nodeID)
	_, admitted := s.fsm.State().Admission(nodeID)
	isMember = isMember || admitted
	inRaft := false
	for _, srv := range cfg.Servers {
		inRaft = inRaft || string(srv.ID) == nodeID
	}
	if !inRaft && !isMember {
		return fmt.Errorf("%w: %q", ErrNoSuchMember, nodeID)
	}
	if inRaft {
		if err := raftfuture.Wait(ctx, s.raft.RemoveServer(raft.ServerID(nodeID), 0, s.cfg.RaftTimeout)); err != nil {
			return classify(err)
		}
	}
	if isMember {
		res, err := s.proposer.Propose(ctx, &api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: nodeID}}})
		if err != nil {
			return err
		}
		if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
			return fmt.Errorf("remove member rejected: %s", res.GetMessage())
		}
	}
	s.log.Info("node removed", "member_id", nodeID)
	return nil
}

func inConfiguration(cfg raft.Configuration, id string) bool {
	for _, srv := range cfg.Servers {
		if string(srv.ID) == id {
			return true
		}
	}
	return false
}

func (s *Scheduler) configuration(ctx context.Context) (raft.Configuration, error) {
	f := s.raft.GetConfiguration()
	if err := raftfuture.Wait(ctx, f); err != nil {
		return raft.Configuration{}, fmt.Errorf("read raft configuration: %w", err)
	}
	return f.Configuration(), nil
}

// promoteCaughtUp promotes every non-voter that is a recorded member and
// whose applied index is within maxPromotionLag of the commit index.
func (s *Scheduler) promoteCaughtUp(ctx context.Context) {
	if s.cfg.PeerProgress == nil {
		return
	}
	cfg, err := s.configuration(ctx)
	if err != nil {
		return
	}
	st := s.fsm.State()
	for _, srv := range cfg.Servers {
		if srv.Suffrage != raft.Nonvoter {
			continue
		}
		m, ok := st.Member(string(srv.ID))
		if !ok {
			continue
		}
		applied, err := s.cfg.PeerProgress(ctx, m)
		if err != nil {
			continue
		}
		if commit := s.raft.CommitIndex(); applied+maxPromotionLag < commit {
			continue
		}
		if err := raftfuture.Wait(ctx, s.raft.AddVoter(srv.ID, srv.Address, 0, s.cfg.RaftTimeout)); err != nil {
			s.log.Warn("promotion to voter failed", "member_id", m.NodeId, "reason", err.Error())
			continue
		}
		s.log.Info("node promoted to voter", "member_id", m.NodeId, "applied_index", applied)
	}
}

// TransferLeadership hands leadership to toID, or to the most up-to-date
// voter when toID is empty, and returns the new leader's id once this node
// has learnt it (it may stay empty if that takes longer than two seconds).
func (s *Scheduler) TransferLeadership(ctx context.Context, toID string) (string, error) {
	if !s.IsReady() {
		return "", ErrNotLeader
	}
	var f raft.Future
	if toID == "" {
		f = s.raft.LeadershipTransfer()
	} else {
		cfg, err := s.configuration(ctx)
		if err != nil {
			return "", err
		}
		var target *raft.Server
		for i, srv := range cfg.Servers {
			if string(srv.ID) == toID {
				target = &cfg.Servers[i]
			}
		}
		switch {
		case target == nil:
			return "", fmt.Errorf("%w: %q is not in the raft configuration", ErrNoSuchMember, toID)
		case target.Suffrage != raft.Voter:
			return "", fmt.Errorf("%w: %q", ErrNotVoter, toID)
		case toID == s.cfg.Self.NodeId:
			return toID, nil
		}
		f = s.raft.LeadershipTransferToServer(target.ID, target.Address)
	}
	if err := raftfuture.Wait(ctx, f); err != nil {
		return "", fmt.Errorf("%w: %w", ErrTransferFailed, err)
	}
	// Raft returns once the target won; this node learns the new leader's
	// id with its next heartbeat.
	deadline := time.NewTimer(2 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, id := s.raft.LeaderWithID(); id != "" && string(id) != s.cfg.Self.NodeId {
			return string(id), nil
		}
		select {
		case <-ctx.Done():
			return "", nil
		case <-deadline.C:
			return "", nil
		case <-tick.C:
		}
	}
}
