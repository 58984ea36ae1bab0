package main

import (
	"fmt"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func (a *app) mergeCmd() *cobra.Command {
	var (
		expected  uint64
		requestID string
	)
	cmd := &cobra.Command{
		Use:   "merge LEFT_ROUTE_ID RIGHT_ROUTE_ID",
		Short: "Merge two adjacent routes by hand",
		Long: `Merge two neighbouring routes into one new route that covers both: LEFT_ROUTE_ID
must end where RIGHT_ROUTE_ID starts (give the left one first), both must be
active and served by the same group, and neither may be the route a live split
op will split next (abort the op first). The new route gets a new id, names
both routes it replaced, and starts the split cooldown, so automatic splitting
leaves it alone for a while. The cluster must run version 3.

--expected-version makes the merge conditional: it applies only if the catalog
is still at that version (take it from 'routes list'), so a merge planned on a
catalog that has changed since fails instead of applying.`,
		Example: `  hotsplitctl merge r7 r8
  hotsplitctl merge 7 8 --expected-version 12
  hotsplitctl merge r7 r8 -o json`,
		Args: exactArgs("LEFT_ROUTE_ID", "RIGHT_ROUTE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			left, err := parseID(cmd, "LEFT_ROUTE_ID", "r", args[0])
			if err != nil {
				return err
			}
			right, err := parseID(cmd, "RIGHT_ROUTE_ID", "r", args[1])
			if err != nil {
				return err
			}
			if left == right {
				return usageErrorf(cmd, "LEFT_ROUTE_ID and RIGHT_ROUTE_ID are both %s: a route merges with its neighbour", formatRouteID(left))
			}
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			req := &api.MergeRangeRequest{LeftRouteId: left, RightRouteId: right, RequestId: requestID}
			if req.ExpectedVersion, err = expectedVersion(cmd, expected); err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.MergeRange(cmd.Context(), req)
			if err != nil {
				return failedMutation(fmt.Sprintf("merge %s %s", formatRouteID(left), formatRouteID(right)), err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			m := resp.GetMerged()
			if _, err := fmt.Fprintf(a.out, "merged %s and %s into %s %s: catalog version %d, committed at %s\n",
				formatRouteID(left), formatRouteID(right), formatRouteID(m.GetRouteId()), formatSpan(m.GetStart(), m.GetEnd()),
				resp.GetCatalogVersion(), formatHLC(resp.GetCommitHlc())); err != nil {
				return err
			}
			return routeTable(a.out, []*api.RouteDescriptor{m})
		},
	}
	cmd.Flags().Uint64Var(&expected, "expected-version", 0, "apply only if the catalog is at this version")
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}
