package main

import (
	"encoding/hex"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hotsplit/hotsplit/hlc"
)

func (a *app) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Back up the replicated state",
		Long: `Back up the replicated state. A backup seeds a new cluster with
'hotsplitd --restoreSnapshot FILE' (docs/runbook.md).`,
		Example: `  hotsplitctl snapshot save backup.hsnap`,
		Args:    groupArgs,
		RunE:    groupRun,
	}
	cmd.AddCommand(a.snapshotSaveCmd())
	return cmd
}

func (a *app) snapshotSaveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "save FILE",
		Short: "Save a consistent snapshot of the whole replicated state to FILE (admin)",
		Long: `Stream a consistent snapshot from the leader (the state as of a
linearizable read: catalog, config, switch, detector state, ops, decisions,
members) into FILE, with its raft index, the leader's term, the cluster id,
the state hash and a SHA-256 over the whole file. FILE is written next to
itself and renamed when complete. Large catalogs may need a longer
--timeout. 'hotsplitd --restoreSnapshot FILE' seeds a new cluster from it
(docs/runbook.md, "Restore from backup").`,
		Example: `  hotsplitctl snapshot save /backups/hotsplit-$(date +%F).hsnap --timeout 2m`,
		Args:    exactArgs("FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			info, err := cl.SaveBackup(cmd.Context(), args[0])
			if err != nil {
				return failed("snapshot save "+args[0], err)
			}
			if a.json() {
				return writeJSON(a.out, info.Header)
			}
			h := info.Header
			_, err = fmt.Fprintf(a.out, "saved %s: index %d, term %d, cluster %s (version %d), catalog version %d, %d routes, last HLC %s, from %s\nstate hash %s\nsha256     %s (%d bytes of state)\n",
				args[0], h.GetIndex(), h.GetTerm(), h.GetClusterId(), h.GetClusterVersion(), h.GetCatalogVersion(), h.GetRoutes(),
				hlc.Format(h.GetLastHlc()), h.GetServedBy(), hex.EncodeToString(h.GetStateHash()), hex.EncodeToString(info.Checksum[:]), info.Size)
			return err
		},
	}
}
