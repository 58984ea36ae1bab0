package fsm

import (
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// applyBootstrap writes the cluster id, the initial catalog, the config
// (zero fields take the defaults), the switch seeded from --autoSplit and
// the cluster version. It applies once.
func (a *applier) applyBootstrap(b *api.Bootstrap) *api.CommandResult {
	if a.s.bootstrapped {
		return fail(api.ResultCode_RESULT_CODE_ALREADY_BOOTSTRAPPED, "cluster %q already bootstrapped", a.s.clusterID)
	}
	if !clusterversion.IsSupported(b.GetClusterVersion()) {
		// Another build could accept this entry; refusing it would diverge.
		a.haltErr = fmt.Errorf("%w: bootstrap at cluster version %d, this build supports %d", ErrVersion, b.GetClusterVersion(), clusterversion.Supported)
		return nil
	}
	if b.GetClusterId() == "" {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "cluster_id: required")
	}
	version := max(1, b.GetClusterVersion())
	groupIDs, groups, r := a.bootstrapGroupsOf(b, version)
	if r != nil {
		return r
	}
	cat, err := catalog.NewInGroups(b.GetInitialSplits(), groupIDs)
	if err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "initial_splits: %v", err)
	}
	if clusterversion.OperatorBoundariesKept.EnabledAt(version) {
		// The initial split keys are the operator's: automatic merges keep
		// them.
		if cat, _, err = cat.MarkAllStarts(); err != nil {
			a.haltErr = fmt.Errorf("mark the initial split keys: %w", err)
			return nil
		}
	}
	cfg := withDefaults(b.GetConfig(), version)
	if err := ValidateConfig(cfg); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "config: %v", err)
	}
	det, err := detector.NewState(nil, 0)
	if err != nil {
		a.haltErr = fmt.Errorf("empty detector state: %w", err)
		return nil
	}
	s := a.s
	s.bootstrapped = true
	s.clusterID = b.GetClusterId()
	s.clusterVersion = version
	s.cat = cat
	s.groups = groups
	if len(groups) > 0 {
		s.nextGroupID = groups[len(groups)-1].GetGroupId() + 1
	}
	s.hist = catalog.NewHistory(a.f.historySize, cat.Version())
	s.cfg = cfg
	s.detCfg = detectorConfig(cfg)
	s.det = det
	s.sw = &api.AutoSplitSwitch{
		Enabled:      b.GetAutoSplit(),
		Actor:        "bootstrap",
		Source:       api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG,
		ChangedAtHlc: a.nowHLC,
	}
	a.f.log.Info("fsm: bootstrapped", "cluster_id", s.clusterID, "routes", cat.Len(),
		"catalog_version", cat.Version(), "auto_split", s.sw.Enabled)
	return &api.CommandResult{CatalogVersion: cat.Version(), Config: cfg, Switch: s.sw}
}

// applyAdvanceCeiling raises the timestamp fence; a lower value changes
// nothing (renewals may arrive late).
func (a *applier) applyAdvanceCeiling(c *api.AdvanceCeiling) *api.CommandResult {
	a.s.ceilingMs = max(a.s.ceilingMs, c.GetCeilingMs())
	if a.s.Has(clusterversion.StepChangeWithoutColumns) {
		// The leader renews the fence on an idle cluster too: time passes
		// here even when no column comes to promote a step change.
		if next := promoteStepByTime(a.s.cfg, a.now); next != a.s.cfg {
			a.f.log.Info("fsm: step change took effect without a column", "step_ms", next.GetStepMs(), "boundary_ms", a.s.cfg.GetNextStepAtMs())
			a.s.cfg = next
		}
	}
	return ok()
}

// applySetMember upserts a member and raises the cluster version to the
// lowest version every member supports.
func (a *applier) applySetMember(c *api.SetMember) *api.CommandResult {
	m := c.GetMember()
	switch {
	case m == nil:
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "member: required")
	case m.GetNodeId() == "":
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "member.node_id: required")
	case !clusterversion.IsVersion(m.GetSupportedVersion()):
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "member.supported_version: must be >= 1")
	}
	a.dropAdmission(m.GetNodeId())
	i, found := findMember(a.s.members, m.GetNodeId())
	ms := make([]*api.Member, 0, len(a.s.members)+1)
	ms = append(ms, a.s.members[:i]...)
	ms = append(ms, m)
	if found {
		i++
	}
	ms = append(ms, a.s.members[i:]...)
	if !a.setMembers(ms) {
		return nil
	}
	return ok()
}

// applyRemoveMember deletes a member; the cluster version may rise (the
// member that held it back is gone) but never falls.
func (a *applier) applyRemoveMember(c *api.RemoveMember) *api.CommandResult {
	if c.GetNodeId() == "" {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "node_id: required")
	}
	admitted := a.dropAdmission(c.GetNodeId())
	i, found := findMember(a.s.members, c.GetNodeId())
	if !found && admitted {
		return ok()
	}
	if !found {
		return fail(api.ResultCode_RESULT_CODE_MEMBER_NOT_FOUND, "member %q not found", c.GetNodeId())
	}
	ms := make([]*api.Member, 0, len(a.s.members)-1)
	ms = append(ms, a.s.members[:i]...)
	ms = append(ms, a.s.members[i+1:]...)
	if !a.setMembers(ms) {
		return nil
	}
	return ok()
}

// setMembers stores ms and raises the cluster version to their minimum
// supported version, running the raise hooks of every crossed version
// (raiseVersion). It halts (returns false) rather than run a cluster
// version this build does not support.
func (a *applier) setMembers(ms []*api.Member) bool {
	v := a.s.clusterVersion
	if len(ms) > 0 {
		lowest := ms[0].GetSupportedVersion()
		for _, m := range ms[1:] {
			lowest = min(lowest, m.GetSupportedVersion())
		}
		v = max(v, lowest)
	}
	if !clusterversion.IsSupported(v) {
		a.haltErr = fmt.Errorf("%w: every member supports cluster version %d, this build only %d", ErrVersion, v, clusterversion.Supported)
		return false
	}
	a.raiseVersion(raiseHooks(), v)
	a.s.members = ms
	return true
}

// maxAdmissions bounds the admitted-but-not-joined table.
const maxAdmissions = 64

// applyAdmitMember records that a node id may join from a raft address
// (feature Admission). Admitting an id again replaces its admission.
func (a *applier) applyAdmitMember(c *api.AdmitMember) *api.CommandResult {
	if !a.s.Has(clusterversion.Admission) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "admit_member needs cluster version %d, the cluster runs %d", clusterversion.Admission.Version(), a.s.clusterVersion)
	}
	if err := api.ValidateNodeID(c.GetNodeId()); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "node_id: %v", err)
	}
	if c.GetRaftAddr() == "" {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "raft_addr: required")
	}
	if _, member := findMember(a.s.members, c.GetNodeId()); member {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "node %q is already a member", c.GetNodeId())
	}
	i, found := findAdmission(a.s.admissions, c.GetNodeId())
	if !found && len(a.s.admissions) >= maxAdmissions {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "%d admissions are pending: let them join or remove some first", maxAdmissions)
	}
	adm := &api.Admission{NodeId: c.GetNodeId(), RaftAddr: c.GetRaftAddr(), AdmittedAtHlc: a.nowHLC, Actor: c.GetActor()}
	as := make([]*api.Admission, 0, len(a.s.admissions)+1)
	as = append(as, a.s.admissions[:i]...)
	as = append(as, adm)
	if found {
		i++
	}
	a.s.admissions = append(as, a.s.admissions[i:]...)
	a.f.log.Info("fsm: node admitted", "member_id", adm.NodeId, "raft_addr", adm.RaftAddr, "actor", adm.Actor, "commit_hlc", a.nowHLC)
	return ok()
}

// dropAdmission ends the admission of nodeID, if any: it joined or was
// removed. It reports whether there was one.
func (a *applier) dropAdmission(nodeID string) bool {
	i, found := findAdmission(a.s.admissions, nodeID)
	if !found {
		return false
	}
	as := make([]*api.Admission, 0, len(a.s.admissions)-1)
	as = append(as, a.s.admissions[:i]...)
	a.s.admissions = append(as, a.s.admissions[i+1:]...)
	return true
}

// applyCheckState accepts the cross-replica state check marker (feature
// StateCheck). It changes nothing replicated: each replica hashes its state
// at this index outside Apply (Options.OnCheckState).
func (a *applier) applyCheckState(c *api.CheckState) *api.CommandResult {
	if !a.s.Has(clusterversion.StateCheck) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "check_state needs cluster version %d, the cluster runs %d", clusterversion.StateCheck.Version(), a.s.clusterVersion)
	}
	a.checkState = true
	a.f.log.Info("fsm: state check marker", "actor", c.GetActor())
	return ok()
}
