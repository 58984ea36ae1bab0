package main

import (
	"fmt"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func (a *app) splitCmd() *cobra.Command {
	var (
		asHex     bool
		expected  uint64
		requestID string
	)
	cmd := &cobra.Command{
		Use:   "split ROUTE_ID KEY",
		Short: "Split a route at KEY by hand",
		Long: `Split route ROUTE_ID into [start, KEY) and [KEY, end). KEY must lie strictly
inside the route and the route must be active. Both children start a cooldown
during which automatic splitting leaves them alone.

--expected-version makes the split conditional: it applies only if the catalog
is still at that version (take it from 'routes list'), so a split planned on a
catalog that has changed since fails instead of applying.

` + keyHelp,
		Example: `  hotsplitctl split 7 'user:42'
  hotsplitctl split r7 'user:42\x00' --expected-version 12
  hotsplitctl split 7 --hex 757365723a3432`,
		Args: exactArgs("ROUTE_ID", "KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			routeID, err := parseID(cmd, "ROUTE_ID", "r", args[0])
			if err != nil {
				return err
			}
			key, err := parseKey(args[1], asHex)
			if err != nil {
				return usageErr(cmd, err)
			}
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			req := &api.SplitRangeRequest{RouteId: routeID, SplitKey: key, RequestId: requestID}
			if req.ExpectedVersion, err = expectedVersion(cmd, expected); err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.SplitRange(cmd.Context(), req)
			if err != nil {
				return failedMutation(fmt.Sprintf("split %s at %s", formatRouteID(routeID), formatKey(key)), err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if _, err := fmt.Fprintf(a.out, "split %s at %s: catalog version %d, committed at %s\n",
				formatRouteID(routeID), formatKey(key), resp.GetCatalogVersion(), formatHLC(resp.GetCommitHlc())); err != nil {
				return err
			}
			return routeTable(a.out, []*api.RouteDescriptor{resp.GetLeft(), resp.GetRight()})
		},
	}
	cmd.Flags().BoolVar(&asHex, "hex", false, "KEY is hexadecimal bytes")
	cmd.Flags().Uint64Var(&expected, "expected-version", 0, "apply only if the catalog is at this version")
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}
