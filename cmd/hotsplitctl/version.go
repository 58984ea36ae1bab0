package main

import (
	"fmt"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/version"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print this client's version and the answering node's",
		Long: `Print this client's build, then the build and cluster versions of the node
that answers (the first endpoint that does). 'cluster members' shows every
member's build. Exit code 3 when no node answers (the client version is
printed first anyway).`,
		Example: `  hotsplitctl version
  hotsplitctl version -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !a.json() {
				fmt.Fprintf(a.out, "client  hotsplitctl %s\n", version.String())
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Version(cmd.Context(), &api.VersionRequest{})
			if err != nil {
				return failed("version of the answering node", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			_, err = fmt.Fprintf(a.out, "server  hotsplitd %s on %s (supports cluster version %d; cluster %s runs %d)\n",
				resp.GetVersion(), resp.GetNodeId(), resp.GetSupportedClusterVersion(), orDash(resp.GetClusterId()), resp.GetClusterVersion())
			return err
		},
	}
}

func (a *app) completionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Print a shell completion script",
		Long: `Print the completion script of a shell to stdout. Load it for the current
shell, or install it where the shell looks for completions:

  source <(hotsplitctl completion bash)
  hotsplitctl completion zsh > "${fpath[1]}/_hotsplitctl"
  hotsplitctl completion fish > ~/.config/fish/completions/hotsplitctl.fish`,
		Example:   `  source <(hotsplitctl completion bash)`,
		Args:      exactArgs("bash|zsh|fish"),
		ValidArgs: []string{"bash", "zsh", "fish"},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(a.out, true)
			case "zsh":
				return root.GenZshCompletion(a.out)
			case "fish":
				return root.GenFishCompletion(a.out, true)
			}
			return usageErrorf(cmd, "shell %q: want bash, zsh or fish", args[0])
		},
	}
}
