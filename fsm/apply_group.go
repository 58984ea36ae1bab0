package fsm

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// The shard group commands (docs/design.md#shard-groups, feature
// ShardGroups). Each checks everything before it changes anything: a
// refusal leaves the state as it was but for last_hlc.

// applyAddGroup creates a group with the next group id, ACTIVE.
func (a *applier) applyAddGroup(c *api.AddGroup) *api.CommandResult {
	if err := a.s.Require(clusterversion.ShardGroups); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "add_group: %v", err)
	}
	if len(a.s.groups) >= MaxGroups {
		return fail(api.ResultCode_RESULT_CODE_GROUP_LIMIT, "add_group: the cluster has %d shard groups, the most it may have: remove an empty one first", len(a.s.groups))
	}
	if err := validateGroupName(c.GetName()); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "add_group: name: %v", err)
	}
	capacity := c.GetCapacity()
	if capacity == 0 {
		capacity = DefaultGroupCapacity
	}
	if err := validateCapacity(capacity); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "add_group: capacity: %v", err)
	}
	g := &api.ShardGroup{GroupId: a.s.nextGroupID, Name: c.GetName(), State: api.GroupState_GROUP_STATE_ACTIVE,
		Capacity: capacity, CreatedHlc: a.nowHLC}
	if r := a.changeIdentities(g, c.GetIdentities(), nil); r != nil {
		return r
	}
	if r := a.refuseGroupConflict(g); r != nil {
		return r
	}
	a.s.groups = withGroup(a.s.groups, g)
	a.s.nextGroupID++
	a.recordGroup(g, "added", c.GetActor(), c.GetNote())
	return &api.CommandResult{Group: g}
}

// applySetGroup changes a group's name, capacity, state or identities. A
// patch that changes nothing is refused, so that every accepted SetGroup
// is a change in the decisions.
func (a *applier) applySetGroup(c *api.SetGroup) *api.CommandResult {
	if err := a.s.Require(clusterversion.ShardGroups); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group: %v", err)
	}
	cur, ok := a.s.Group(c.GetGroupId())
	if !ok {
		return fail(api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND, "set_group: no shard group %d", c.GetGroupId())
	}
	g := proto.Clone(cur).(*api.ShardGroup)
	var changed []string
	if c.Name != nil && c.GetName() != g.GetName() {
		if err := validateGroupName(c.GetName()); err != nil {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group %d: name: %v", g.GetGroupId(), err)
		}
		g.Name = c.GetName()
		changed = append(changed, "name="+g.GetName())
	}
	if c.Capacity != nil && c.GetCapacity() != g.GetCapacity() {
		if err := validateCapacity(c.GetCapacity()); err != nil {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group %d: capacity: %v", g.GetGroupId(), err)
		}
		g.Capacity = c.GetCapacity()
		changed = append(changed, fmt.Sprintf("capacity=%d", g.GetCapacity()))
	}
	switch st := c.GetState(); st {
	case api.GroupState_GROUP_STATE_UNSPECIFIED, g.GetState():
	case api.GroupState_GROUP_STATE_ACTIVE, api.GroupState_GROUP_STATE_DRAINING:
		g.State = st
		changed = append(changed, "state="+groupStateName(st))
	default:
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group %d: state: %v is not ACTIVE or DRAINING", g.GetGroupId(), st)
	}
	before := len(g.GetIdentities())
	if r := a.changeIdentities(g, c.GetAddIdentities(), c.GetRemoveIdentities()); r != nil {
		return r
	}
	if !slices.Equal(g.GetIdentities(), cur.GetIdentities()) {
		changed = append(changed, fmt.Sprintf("identities=%d->%d", before, len(g.GetIdentities())))
	}
	if len(changed) == 0 {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "set_group %d: the patch leaves the group as it is", g.GetGroupId())
	}
	if r := a.refuseGroupConflict(g); r != nil {
		return r
	}
	a.s.groups = withGroup(a.s.groups, g)
	a.recordGroup(g, "set "+strings.Join(changed, " "), c.GetActor(), c.GetNote())
	return &api.CommandResult{Group: g}
}

// applyRemoveGroup deletes a group that serves no route.
func (a *applier) applyRemoveGroup(c *api.RemoveGroup) *api.CommandResult {
	if err := a.s.Require(clusterversion.ShardGroups); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "remove_group: %v", err)
	}
	i, ok := findGroup(a.s.groups, c.GetGroupId())
	if !ok {
		return fail(api.ResultCode_RESULT_CODE_GROUP_NOT_FOUND, "remove_group: no shard group %d", c.GetGroupId())
	}
	g := a.s.groups[i]
	if n := a.s.GroupRouteCounts()[g.GetGroupId()]; n > 0 {
		return fail(api.ResultCode_RESULT_CODE_GROUP_NOT_EMPTY, "remove_group: shard group %d (%s) serves %d routes: drain it first", g.GetGroupId(), g.GetName(), n)
	}
	for _, op := range a.s.LiveOps() {
		if isMoveOp(op) && op.GetTargetGroupId() == g.GetGroupId() {
			return fail(api.ResultCode_RESULT_CODE_GROUP_NOT_EMPTY, "remove_group: shard group %d (%s) is the target of live move op %d: abort it first",
				g.GetGroupId(), g.GetName(), op.GetOpId())
		}
	}
	a.s.groups = slices.Delete(slices.Clone(a.s.groups), i, i+1)
	a.recordGroup(g, "removed", c.GetActor(), c.GetNote())
	return &api.CommandResult{Group: g}
}

// changeIdentities adds and removes identities of g (a clone the caller
// owns), keeping them sorted; a refusal names the identity.
func (a *applier) changeIdentities(g *api.ShardGroup, add, remove []string) *api.CommandResult {
	ids := slices.Clone(g.GetIdentities())
	for _, id := range remove {
		i, ok := slices.BinarySearch(ids, id)
		if !ok {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "shard group %d: remove identity %q: not one of the group's", g.GetGroupId(), id)
		}
		ids = slices.Delete(ids, i, i+1)
	}
	for _, id := range add {
		if err := validateIdentity(id); err != nil {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "shard group %d: identity: %v", g.GetGroupId(), err)
		}
		i, ok := slices.BinarySearch(ids, id)
		if ok {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "shard group %d: identity %q given twice or already the group's", g.GetGroupId(), id)
		}
		ids = slices.Insert(ids, i, id)
	}
	if len(ids) > MaxGroupIdentities {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "shard group %d: %d identities exceeds the limit of %d", g.GetGroupId(), len(ids), MaxGroupIdentities)
	}
	g.Identities = ids
	return nil
}

// refuseGroupConflict refuses g when another group has its name or one of
// its identities: an identity serves one group.
func (a *applier) refuseGroupConflict(g *api.ShardGroup) *api.CommandResult {
	for _, o := range a.s.groups {
		if o.GetGroupId() == g.GetGroupId() {
			continue
		}
		if o.GetName() == g.GetName() {
			return fail(api.ResultCode_RESULT_CODE_GROUP_CONFLICT, "shard group %d is already named %q", o.GetGroupId(), g.GetName())
		}
		for _, id := range g.GetIdentities() {
			if _, ok := slices.BinarySearch(o.GetIdentities(), id); ok {
				return fail(api.ResultCode_RESULT_CODE_GROUP_CONFLICT, "identity %q already serves shard group %d (%s): an identity serves one group", id, o.GetGroupId(), o.GetName())
			}
		}
	}
	return nil
}

// recordGroup writes the GROUP decision and the log line of a change.
func (a *applier) recordGroup(g *api.ShardGroup, what, actor, note string) {
	detail := fmt.Sprintf("group %d (%s) %s", g.GetGroupId(), g.GetName(), what)
	a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_GROUP, Actor: actor, Note: a.s.KeptNote(note), Detail: detail})
	a.f.log.Info("fsm: shard group changed", "group_id", g.GetGroupId(), "detail", detail, "actor", actor, "commit_hlc", a.nowHLC)
}

// groupStateName is a state's name without its enum prefix.
func groupStateName(s api.GroupState) string {
	return strings.TrimPrefix(s.String(), "GROUP_STATE_")
}

// bootstrapGroupsOf is the group of each initial route and, at a version
// with ShardGroups, the group table: group_count groups (0 means 1) from
// group_id (0 means 1), default capacity, the routes spread over them in
// key order. Below that version every route is in group_id and
// group_count must be unset.
func (a *applier) bootstrapGroupsOf(b *api.Bootstrap, version uint32) ([]uint64, []*api.ShardGroup, *api.CommandResult) {
	routes := len(b.GetInitialSplits()) + 1
	if !clusterversion.ShardGroups.EnabledAt(version) {
		if b.GetGroupCount() != 0 {
			return nil, nil, fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "group_count: %v", clusterversion.ShardGroups.CheckAt(version))
		}
		return spreadGroups(routes, b.GetGroupId(), 1), nil, nil
	}
	first, count := max(1, b.GetGroupId()), max(1, int(b.GetGroupCount()))
	if count > MaxGroups {
		return nil, nil, fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "group_count: %d exceeds the limit of %d", count, MaxGroups)
	}
	gs := make([]*api.ShardGroup, count)
	for i := range gs {
		id := first + uint64(i)
		gs[i] = &api.ShardGroup{GroupId: id, Name: groupName(id), State: api.GroupState_GROUP_STATE_ACTIVE,
			Capacity: DefaultGroupCapacity, CreatedHlc: a.nowHLC}
	}
	return spreadGroups(routes, first, count), gs, nil
}

// raiseShardGroups: every group id the catalog uses becomes an ACTIVE group
// of the default capacity with no identities, so that the table describes
// the data plane a version 3 cluster had; the next id follows the highest.
func raiseShardGroups(s *State) string {
	counts := s.GroupRouteCounts()
	ids := make([]uint64, 0, len(counts))
	for id := range counts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	gs := make([]*api.ShardGroup, 0, len(ids))
	for _, id := range ids {
		gs = append(gs, &api.ShardGroup{GroupId: id, Name: groupName(id), State: api.GroupState_GROUP_STATE_ACTIVE, Capacity: DefaultGroupCapacity})
	}
	s.groups = gs
	s.nextGroupID = 1
	if len(ids) > 0 {
		s.nextGroupID = ids[len(ids)-1] + 1
	}
	return fmt.Sprintf("groups=%d next_group_id=%d", len(gs), s.nextGroupID)
}
