package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func (a *app) routesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "routes",
		Short: "List, look up and watch the route catalog",
		Example: `  hotsplitctl routes list
  hotsplitctl routes get 'user:42'
  hotsplitctl routes watch`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(a.routesListCmd(), a.routesGetCmd(), a.routesWatchCmd())
	return cmd
}

func (a *app) routesListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List every route of one catalog version",
		Long: `List every route of one catalog version, in key order. The pages of a large
catalog are fetched until the end; if the catalog changes between pages the
listing starts over, so the result is always one version.

With -o json the output is one ListRoutesResponse holding all routes (keys are
base64, as the protobuf JSON mapping says).`,
		Example: `  hotsplitctl routes list
  hotsplitctl routes list --consistency stale -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.ListAllRoutes(cmd.Context(), a.readConsistency())
			if err != nil {
				return failed("routes list", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if err := routeTable(a.out, resp.GetRoutes()); err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.out, withReadInfo(fmt.Sprintf("catalog version %d, %d routes",
				resp.GetRead().GetCatalogVersion(), len(resp.GetRoutes())), resp.GetRead()))
			return err
		},
	}
}

func (a *app) routesGetCmd() *cobra.Command {
	var asHex bool
	var id string
	cmd := &cobra.Command{
		Use:   "get KEY | get --id ROUTE_ID",
		Short: "Show the route that holds KEY (or the route with an id)",
		Long:  "Show the route whose range [start, end) holds KEY.\n\n" + keyHelp,
		Example: `  hotsplitctl routes get 'user:42'
  hotsplitctl routes get 'user:42\x00'
  hotsplitctl routes get --hex 7573657200ff
  hotsplitctl routes get --id r7 -o json`,
		Args: rangeArgs(0, "KEY"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &api.GetRouteRequest{Consistency: a.readConsistency()}
			var what string
			switch {
			case id != "" && len(args) > 0:
				return usageErrorf(cmd, "give KEY or --id, not both")
			case id != "":
				routeID, err := parseID(cmd, "--id", "r", id)
				if err != nil {
					return err
				}
				req.RouteId = routeID
				what = "route " + formatRouteID(routeID)
			case len(args) == 1:
				key, err := parseKey(args[0], asHex)
				if err != nil {
					return usageErr(cmd, err)
				}
				req.Key = key
				what = "route of " + formatKey(key)
			default:
				return usageErrorf(cmd, "expects KEY (or --id ROUTE_ID)")
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.GetRoute(cmd.Context(), req)
			if err != nil {
				return failed("routes get "+what, err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if err := routeTable(a.out, []*api.RouteDescriptor{resp.GetRoute()}); err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.out, withReadInfo(fmt.Sprintf("catalog version %d", resp.GetRead().GetCatalogVersion()), resp.GetRead()))
			return err
		},
	}
	cmd.Flags().BoolVar(&asHex, "hex", false, "KEY is hexadecimal bytes")
	cmd.Flags().StringVar(&id, "id", "", "look the route up by id instead of by key")
	return cmd
}

func (a *app) routesWatchCmd() *cobra.Command {
	var from uint64
	cmd := &cobra.Command{
		Use:   "watch",
		Short: "Print catalog changes as they commit, until interrupted",
		Long: `Print every catalog change after --from-version as it commits, until
interrupted. Without --from-version the current catalog is printed first (a
snapshot), then the changes. The watch reconnects through the endpoints on
failure and never prints a version twice or goes back to an older one.

Table lines: "v9 snapshot: r1 [...)" for each route of a snapshot at version 9,
"v10 split r1 at KEY -> r2 [...) r3 [...) at HLC" for a split. With -o json,
each event is one WatchRoutesResponse object on its own line.`,
		Example: `  hotsplitctl routes watch
  hotsplitctl routes watch --from-version 42 -o json | jq .delta`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			err = cl.Watch(cmd.Context(), from, func(ev *api.WatchRoutesResponse) error {
				if a.json() {
					return writeJSONLine(a.out, ev)
				}
				return writeWatchEvent(a.out, ev)
			})
			if err == nil || (errors.Is(err, context.Canceled) && cmd.Context().Err() != nil) {
				return nil // interrupted by the operator: the normal end of a watch
			}
			return failed("routes watch", err)
		},
	}
	cmd.Flags().Uint64Var(&from, "from-version", 0, "print changes after this catalog version (0: start with the whole catalog)")
	return cmd
}

// writeWatchEvent prints one watch event as readable lines.
func writeWatchEvent(w io.Writer, ev *api.WatchRoutesResponse) error {
	if p := ev.GetSnapshotPage(); p != nil {
		for _, r := range p.GetRoutes() {
			if _, err := fmt.Fprintf(w, "v%d snapshot: %s\n", p.GetVersion(), routeSummary(r)); err != nil {
				return err
			}
		}
		return nil
	}
	d := ev.GetDelta()
	var b strings.Builder
	fmt.Fprintf(&b, "v%d ", d.GetVersion())
	switch removed, added := d.GetRemovedRouteIds(), d.GetAdded(); {
	case len(d.GetChanged()) == 1 && len(removed)+len(added) == 0:
		r := d.GetChanged()[0]
		fmt.Fprintf(&b, "move %s %s: %s", formatRouteID(r.GetRouteId()), formatSpan(r.GetStart(), r.GetEnd()), routeMoveState(r))
	case len(removed) == 1 && len(added) == 2:
		l, r := added[0], added[1]
		fmt.Fprintf(&b, "split %s at %s -> %s %s %s %s",
			formatRouteID(removed[0]), formatKey(r.GetStart()),
			formatRouteID(l.GetRouteId()), formatSpan(l.GetStart(), l.GetEnd()),
			formatRouteID(r.GetRouteId()), formatSpan(r.GetStart(), r.GetEnd()))
	case len(removed) == 2 && len(added) == 1 && added[0].GetMergedAtHlc() != 0:
		m := added[0]
		fmt.Fprintf(&b, "merge %s %s -> %s %s",
			formatRouteID(removed[0]), formatRouteID(removed[1]), formatRouteID(m.GetRouteId()), formatSpan(m.GetStart(), m.GetEnd()))
	default:
		removed := make([]string, len(d.GetRemovedRouteIds()))
		for i, id := range d.GetRemovedRouteIds() {
			removed[i] = formatRouteID(id)
		}
		added := make([]string, len(d.GetAdded()))
		for i, r := range d.GetAdded() {
			added[i] = formatRouteID(r.GetRouteId()) + " " + formatSpan(r.GetStart(), r.GetEnd())
		}
		fmt.Fprintf(&b, "change: removed %s; added %s", orNone(strings.Join(removed, " ")), orNone(strings.Join(added, " ")))
	}
	fmt.Fprintf(&b, " at %s\n", formatHLC(d.GetCommitHlc()))
	_, err := io.WriteString(w, b.String())
	return err
}

// routeMoveState says where a route stands in a move: "group 1 -> 3,
// migrating_source", or its group and state once the move ended.
func routeMoveState(r *api.RouteDescriptor) string {
	state := strings.ToLower(strings.TrimPrefix(r.GetState().String(), "ROUTE_STATE_"))
	if t := r.GetTargetGroupId(); t != 0 {
		return fmt.Sprintf("group %d -> %d, %s (op %d)", r.GetGroupId(), t, state, r.GetMoveOpId())
	}
	return fmt.Sprintf("group %d, %s", r.GetGroupId(), state)
}

// routeSummary is a route on one line: r7 ["a", "m") group 1 active.
func routeSummary(r *api.RouteDescriptor) string {
	return fmt.Sprintf("%s %s group %d %s", formatRouteID(r.GetRouteId()), formatSpan(r.GetStart(), r.GetEnd()),
		r.GetGroupId(), enumName(r.GetState()))
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
