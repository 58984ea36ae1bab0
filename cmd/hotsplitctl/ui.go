package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func (a *app) uiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "ui",
		Short: "Print a one-time login URL to the key visualizer's page",
		Long: `Ask the answering node (the leader, or the first endpoint that answers) for
a one-time login URL to its key visualizer: load over key space × time, with
every split and merge. Open the URL in a browser within a minute; it works
once and opens a session of the reader role on that node only (the cookie is
named after the node), whatever role minted it. Needs the reader role.

The page is served over the node's HTTPS address (--httpAddr) with the
cluster's certificate: the browser must trust the cluster CA (docs/
operations.md, "The key visualizer"). An --insecure node needs no login: the
URL is the page itself.`,
		Example: `  hotsplitctl ui
  hotsplitctl ui -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.MintUILogin(cmd.Context(), &api.MintUILoginRequest{})
			if err != nil {
				return failed("ui login", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if _, err := fmt.Fprintln(a.out, resp.GetUrl()); err != nil {
				return err
			}
			if ms := resp.GetExpiresMs(); ms != 0 {
				_, err = fmt.Fprintf(a.errOut, "open it once, before %s, to read node %s's page\n",
					time.UnixMilli(int64(ms)).Format(time.TimeOnly), resp.GetNodeId())
			}
			return err
		},
	}
}
