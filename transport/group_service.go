package transport

import (
	"context"

	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
)

// The shard group RPCs of the Catalog service (feature ShardGroups,
// docs/design.md#shard-groups). Lengths and counts are checked here, so
// that an oversized request never becomes an entry; the rules of names,
// identities and capacities are Apply's, whose refusals map as resultError
// says (an unknown group NotFound, a name or identity another group has
// AlreadyExists, a group that still serves routes or one too many
// FailedPrecondition).

func (c *catalogServer) ListGroups(ctx context.Context, req *api.ListGroupsRequest) (*api.ListGroupsResponse, error) {
	if resp, handled, err := forwardRead(ctx, c.s, req.GetConsistency(), func(ctx context.Context, cc *grpc.ClientConn) (*api.ListGroupsResponse, error) {
		return api.NewCatalogClient(cc).ListGroups(ctx, req)
	}); handled {
		return resp, err
	}
	st, _, err := c.s.readState(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	if !st.Bootstrapped() {
		return nil, unavailable(nil, "cluster not bootstrapped yet")
	}
	if err := featureGate(st, clusterversion.ShardGroups, "groups", ""); err != nil {
		return nil, err
	}
	counts := st.GroupRouteCounts()
	resp := &api.ListGroupsResponse{Groups: st.Groups(), CatalogVersion: st.Catalog().Version()}
	for _, g := range st.Groups() {
		resp.RouteCounts = append(resp.RouteCounts, counts[g.GetGroupId()])
	}
	return resp, nil
}

func (c *catalogServer) AddGroup(ctx context.Context, req *api.AddGroupRequest) (*api.GroupResponse, error) {
	if err := checkGroupFields(req.GetName(), req.GetIdentities(), nil); err != nil {
		return nil, err
	}
	return c.changeGroup(ctx, req.GetRequestId(), req.GetActor(), "add group",
		func(ctx context.Context, cl api.CatalogClient) (*api.GroupResponse, error) {
			return cl.AddGroup(ctx, req)
		},
		func(actor, note string) *api.Command {
			return &api.Command{Body: &api.Command_AddGroup{AddGroup: &api.AddGroup{
				Name: req.GetName(), Capacity: req.GetCapacity(), Identities: req.GetIdentities(), Actor: actor, Note: note}}}
		})
}

func (c *catalogServer) SetGroup(ctx context.Context, req *api.SetGroupRequest) (*api.GroupResponse, error) {
	if err := checkGroupFields(req.GetName(), req.GetAddIdentities(), req.GetRemoveIdentities()); err != nil {
		return nil, err
	}
	return c.changeGroup(ctx, req.GetRequestId(), req.GetActor(), "set group",
		func(ctx context.Context, cl api.CatalogClient) (*api.GroupResponse, error) {
			return cl.SetGroup(ctx, req)
		},
		func(actor, note string) *api.Command {
			return &api.Command{Body: &api.Command_SetGroup{SetGroup: &api.SetGroup{
				GroupId: req.GetGroupId(), Name: req.Name, Capacity: req.Capacity, State: req.GetState(),
				AddIdentities: req.GetAddIdentities(), RemoveIdentities: req.GetRemoveIdentities(), Actor: actor, Note: note}}}
		})
}

func (c *catalogServer) RemoveGroup(ctx context.Context, req *api.RemoveGroupRequest) (*api.GroupResponse, error) {
	return c.changeGroup(ctx, req.GetRequestId(), req.GetActor(), "remove group",
		func(ctx context.Context, cl api.CatalogClient) (*api.GroupResponse, error) {
			return cl.RemoveGroup(ctx, req)
		},
		func(actor, note string) *api.Command {
			return &api.Command{Body: &api.Command_RemoveGroup{RemoveGroup: &api.RemoveGroup{
				GroupId: req.GetGroupId(), Actor: actor, Note: note}}}
		})
}

// changeGroup is the path every group mutation takes: its metadata
// checked, forwarded to the leader, refused below ShardGroups before it is
// proposed, proposed with the feature's min_version.
func (c *catalogServer) changeGroup(ctx context.Context, requestID, rawActor, what string,
	forward func(context.Context, api.CatalogClient) (*api.GroupResponse, error),
	command func(actor, note string) *api.Command,
) (*api.GroupResponse, error) {
	if err := checkMutationMeta(requestID, rawActor); err != nil {
		return nil, err
	}
	if resp, handled, err := forwardWrite(ctx, c.s, requestID, func(ctx context.Context, cc *grpc.ClientConn) (*api.GroupResponse, error) {
		return forward(ctx, api.NewCatalogClient(cc))
	}); handled {
		return resp, err
	}
	if err := featureGate(c.s.cfg.FSM.State(), clusterversion.ShardGroups, what, requestID); err != nil {
		return nil, err
	}
	actor, note := c.s.actor(ctx, rawActor)
	cmd := command(actor, note)
	cmd.MinVersion, cmd.RequestId = clusterversion.ShardGroups.Version(), requestID
	res, err := c.s.propose(ctx, cmd)
	if err != nil {
		return nil, err
	}
	return &api.GroupResponse{Group: res.GetGroup(), CommitHlc: res.GetCommitHlc()}, nil
}

// checkGroupFields bounds what a group request may carry.
func checkGroupFields(name string, add, remove []string) error {
	if len(name) > fsm.MaxGroupNameLen {
		return invalid("name: %d bytes exceeds the limit of %d", len(name), fsm.MaxGroupNameLen)
	}
	for _, ids := range []struct {
		field string
		ids   []string
	}{{"identities", add}, {"remove_identities", remove}} {
		if len(ids.ids) > fsm.MaxGroupIdentities {
			return invalid("%s: %d exceeds the limit of %d", ids.field, len(ids.ids), fsm.MaxGroupIdentities)
		}
		for i, id := range ids.ids {
			if len(id) > fsm.MaxIdentityLen {
				return invalid("%s[%d]: %d bytes exceeds the limit of %d", ids.field, i, len(id), fsm.MaxIdentityLen)
			}
		}
	}
	return nil
}
