package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func (a *app) moveCmd() *cobra.Command {
	var (
		expected  uint64
		requestID string
	)
	cmd := &cobra.Command{
		Use:   "move ROUTE_ID GROUP",
		Short: "Move a route to another shard group",
		Long: `Begin moving a route to another shard group (an id, 7 or g7, or a name). The
route must be active and in no live operation, the group active, and both
groups must have data-node identities: the move waits for them. The leader
then fences the route once every node of the target group has acknowledged
its copy, and commits it once every node of the source has acknowledged the
fence and every node of the target has caught up; a step that waits longer
than move_ttl_ms is aborted. 'moves list' shows where each move stands.
The cluster must run version 4.`,
		Example: `  hotsplitctl move r7 east
  hotsplitctl move 7 g3 --expected-version 12 -o json`,
		Args: exactArgs("ROUTE_ID", "GROUP"),
		RunE: func(cmd *cobra.Command, args []string) error {
			route, err := parseID(cmd, "ROUTE_ID", "r", args[0])
			if err != nil {
				return err
			}
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			req := &api.MoveRangeRequest{RouteId: route, RequestId: requestID}
			if req.ExpectedVersion, err = expectedVersion(cmd, expected); err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			if req.TargetGroupId, err = resolveGroup(cmd, cl, args[1]); err != nil {
				return err
			}
			resp, err := cl.MoveRange(cmd.Context(), req)
			if err != nil {
				return failedMutation(fmt.Sprintf("move %s %s", formatRouteID(route), args[1]), err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			_, err = fmt.Fprintf(a.out, "move %s of %s begun: %s; catalog version %d, committed at %s\n", formatOpID(resp.GetOpId()),
				formatRouteID(route), routeMoveState(resp.GetRoute()), resp.GetCatalogVersion(), formatHLC(resp.GetCommitHlc()))
			return err
		},
	}
	cmd.Flags().Uint64Var(&expected, "expected-version", 0, "apply only if the catalog is at this version")
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

func (a *app) movesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "moves",
		Short:   "List and abort the live moves between shard groups",
		Example: "  hotsplitctl moves list",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the live moves: their step, and which acknowledgements they have",
		Example: `  hotsplitctl moves list
  hotsplitctl moves list -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Status(cmd.Context(), &api.StatusRequest{Consistency: a.readConsistency()})
			if err != nil {
				return failed("moves list", err)
			}
			var moves []*api.Op
			for _, op := range resp.GetLiveOps() {
				if op.GetKind() == api.OpKind_OP_KIND_MOVE {
					moves = append(moves, op)
				}
			}
			if a.json() {
				return writeJSON(a.out, &api.StatusResponse{LiveOps: moves})
			}
			t := newTable(a.out, "OP", "ROUTE", "FROM", "TO", "STATE", "NEXT STEP", "COPIED", "FENCED", "CAUGHT UP", "WATERMARK", "STEP AT")
			for _, op := range moves {
				t.row(formatOpID(op.GetOpId()), formatRouteID(op.GetTargetRouteId()), formatGroupID(op.GetSourceGroupId()), formatGroupID(op.GetTargetGroupId()),
					enumName(op.GetState()), nextStep(op), orDash(strings.Join(op.GetAckedCopied(), ",")), orDash(strings.Join(op.GetAckedFenced(), ",")),
					orDash(strings.Join(op.GetAckedCaughtUp(), ",")), formatUint(op.GetWatermark()), formatHLC(op.GetStepHlc()))
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintf(a.out, "%d live moves\n", len(moves))
			return err
		},
	}
	abort := a.abortCmd()
	abort.Short = "Abort a live move: the route goes back to ACTIVE in its source group"
	abort.Long = `Abort a live move, before or after its fence. The route is ACTIVE in its
source group again; the source lifts its fence when it sees the abort in the
catalog, and the target discards its copy. A later move copies afresh.`
	abort.Example = "  hotsplitctl moves abort op12 --reason \"the target group is being repaired\""
	cmd.AddCommand(list, abort)
	return cmd
}

// moveStepName is what step n of a move does.
func moveStepName(n int) string {
	switch n {
	case 1:
		return "begin"
	case 2:
		return "fence"
	case 3:
		return "commit"
	}
	return "-"
}
