package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
)

func (a *app) groupsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "groups",
		Short: "List, add, change, drain and remove shard groups",
		Long: `Shard groups are the data plane's replica sets: each serves some routes, has a
capacity in weighted ops/min and the data-node identities (certificate common
names) that serve it, one group per identity. A cluster has at most 64. The
cluster must run version 4. GROUP is a group id (7 or g7) or a group's name.`,
		Example: "  hotsplitctl groups list",
	}
	cmd.AddCommand(a.groupsListCmd(), a.groupsAddCmd(), a.groupsSetCmd(), a.groupsDrainCmd(), a.groupsRemoveCmd())
	return cmd
}

func (a *app) groupsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "List the shard groups with their state, capacity, routes and identities",
		Example: "  hotsplitctl groups list\n  hotsplitctl groups list -o json",
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.ListGroups(cmd.Context(), &api.ListGroupsRequest{Consistency: a.readConsistency()})
			if err != nil {
				return failed("groups list", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			t := newTable(a.out, "GROUP", "NAME", "STATE", "CAPACITY", "ROUTES", "IDENTITIES")
			for i, g := range resp.GetGroups() {
				t.row(formatGroupID(g.GetGroupId()), g.GetName(), groupState(g.GetState()), strconv.FormatUint(g.GetCapacity(), 10),
					strconv.FormatUint(resp.GetRouteCounts()[i], 10), orDash(strings.Join(g.GetIdentities(), ",")))
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.out, "%d groups, catalog version %d\n", len(resp.GetGroups()), resp.GetCatalogVersion())
			return err
		},
	}
}

func (a *app) groupsAddCmd() *cobra.Command {
	var (
		capacity   uint64
		identities []string
		requestID  string
	)
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a shard group",
		Long: `Add an ACTIVE shard group under a new id. NAME is 1-64 characters of a-z, 0-9
and -, starting with a letter, and unique. --capacity is in weighted ops/min
(default 1,000,000: twenty routes at the default split threshold);
--identity names a data node that serves the group (repeat it), which must
serve no other group.`,
		Example: "  hotsplitctl groups add east --capacity 2000000 --identity dn-east-1 --identity dn-east-2",
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.AddGroup(cmd.Context(), &api.AddGroupRequest{Name: args[0], Capacity: capacity, Identities: identities, RequestId: requestID})
			if err != nil {
				return failedMutation("groups add "+args[0], err)
			}
			return a.printGroup("added", resp)
		},
	}
	cmd.Flags().Uint64Var(&capacity, "capacity", 0, "weighted ops/min the group can serve (default 1000000)")
	cmd.Flags().StringArrayVar(&identities, "identity", nil, "a data-node identity that serves the group (repeatable)")
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

func (a *app) groupsSetCmd() *cobra.Command {
	var (
		name, state, requestID string
		capacity               uint64
		add, remove            []string
	)
	cmd := &cobra.Command{
		Use:   "set GROUP",
		Short: "Change a shard group's name, capacity, state or identities",
		Long: `Change what the flags give and keep the rest. --state is active or draining
(a draining group receives no route and sheds its routes). A change that
leaves the group as it is is refused.`,
		Example: "  hotsplitctl groups set g4 --capacity 3000000 --add-identity dn-east-3\n  hotsplitctl groups set east --state active",
		Args:    exactArgs("GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			req := &api.SetGroupRequest{AddIdentities: add, RemoveIdentities: remove, RequestId: requestID}
			if cmd.Flags().Changed("name") {
				req.Name = proto.String(name)
			}
			if cmd.Flags().Changed("capacity") {
				req.Capacity = proto.Uint64(capacity)
			}
			if cmd.Flags().Changed("state") {
				st, ok := api.GroupState_value["GROUP_STATE_"+strings.ToUpper(state)]
				if !ok || st == 0 {
					return usageErrorf(cmd, "--state %q: want active or draining", state)
				}
				req.State = api.GroupState(st)
			}
			return a.changeGroup(cmd, "groups set", args[0], "changed", func(cl *client.Client, id uint64) (*api.GroupResponse, error) {
				req.GroupId = id
				return cl.SetGroup(cmd.Context(), req)
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "the group's new name")
	cmd.Flags().Uint64Var(&capacity, "capacity", 0, "weighted ops/min the group can serve")
	cmd.Flags().StringVar(&state, "state", "", "active or draining")
	cmd.Flags().StringArrayVar(&add, "add-identity", nil, "a data-node identity to add (repeatable)")
	cmd.Flags().StringArrayVar(&remove, "remove-identity", nil, "a data-node identity to remove (repeatable)")
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

func (a *app) groupsDrainCmd() *cobra.Command {
	var requestID string
	cmd := &cobra.Command{
		Use:   "drain GROUP",
		Short: "Mark a shard group DRAINING: it receives no route and sheds its routes",
		Long: `Mark the group DRAINING ('groups set GROUP --state active' undoes it). Once
it serves no route, 'groups remove' deletes it.`,
		Example: "  hotsplitctl groups drain east",
		Args:    exactArgs("GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			return a.changeGroup(cmd, "groups drain", args[0], "draining", func(cl *client.Client, id uint64) (*api.GroupResponse, error) {
				return cl.SetGroup(cmd.Context(), &api.SetGroupRequest{GroupId: id, State: api.GroupState_GROUP_STATE_DRAINING, RequestId: requestID})
			})
		},
	}
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

func (a *app) groupsRemoveCmd() *cobra.Command {
	var requestID string
	cmd := &cobra.Command{
		Use:     "remove GROUP",
		Short:   "Remove a shard group that serves no route",
		Example: "  hotsplitctl groups remove g4",
		Args:    exactArgs("GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			return a.changeGroup(cmd, "groups remove", args[0], "removed", func(cl *client.Client, id uint64) (*api.GroupResponse, error) {
				return cl.RemoveGroup(cmd.Context(), &api.RemoveGroupRequest{GroupId: id, RequestId: requestID})
			})
		},
	}
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

// changeGroup resolves GROUP (an id, or a name through the group list),
// sends the change and prints its answer.
func (a *app) changeGroup(cmd *cobra.Command, action, group, verb string, send func(*client.Client, uint64) (*api.GroupResponse, error)) error {
	cl, err := a.client(cmd)
	if err != nil {
		return err
	}
	id, err := resolveGroup(cmd, cl, group)
	if err != nil {
		return err
	}
	resp, err := send(cl, id)
	if err != nil {
		return failedMutation(action+" "+group, err)
	}
	return a.printGroup(verb, resp)
}

// resolveGroup reads GROUP as an id (7 or g7) or, failing that, as the name
// of a listed group.
func resolveGroup(cmd *cobra.Command, cl *client.Client, group string) (uint64, error) {
	if id, err := strconv.ParseUint(strings.TrimPrefix(group, "g"), 10, 64); err == nil {
		return id, nil
	}
	resp, err := cl.ListGroups(cmd.Context(), &api.ListGroupsRequest{})
	if err != nil {
		return 0, failed("groups list (to find "+group+")", err)
	}
	for _, g := range resp.GetGroups() {
		if g.GetName() == group {
			return g.GetGroupId(), nil
		}
	}
	return 0, usageErrorf(cmd, "GROUP %q: no group has that id or name ('groups list' shows them)", group)
}

func (a *app) printGroup(verb string, resp *api.GroupResponse) error {
	if a.json() {
		return writeJSON(a.out, resp)
	}
	g := resp.GetGroup()
	_, err := fmt.Fprintf(a.out, "%s group %s %s: %s, capacity %d, identities %s; committed at %s\n", verb, formatGroupID(g.GetGroupId()), g.GetName(),
		groupState(g.GetState()), g.GetCapacity(), orDash(strings.Join(g.GetIdentities(), ",")), formatHLC(resp.GetCommitHlc()))
	return err
}

func formatGroupID(id uint64) string { return "g" + strconv.FormatUint(id, 10) }

func groupState(s api.GroupState) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "GROUP_STATE_"))
}
