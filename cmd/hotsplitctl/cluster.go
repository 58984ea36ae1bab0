package main

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
)

func (a *app) clusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Show and change cluster membership and leadership",
		Example: `  hotsplitctl cluster health
  hotsplitctl cluster members
  hotsplitctl cluster add n4 --raft-addr 10.0.0.4:7000
  hotsplitctl cluster leader
  hotsplitctl cluster transfer --to n2
  hotsplitctl cluster check`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(a.healthCmd(), a.membersCmd(), a.leaderCmd(), a.addCmd(), a.joinCmd(), a.removeCmd(), a.transferCmd(), a.checkCmd())
	return cmd
}

func (a *app) membersCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "members",
		Short: "List the members: addresses, suffrage, leader, and each one's health",
		Long: `List the members with their addresses, raft suffrage and the leader, and
each member's health as the answering node sees it (the leader, unless
--consistency stale): its own raft state, whether it is reachable, when it
was last heard from, its applied index and how far that trails the leader's
commit index, and its build. Without a quorum the leader cannot answer: use
'cluster health', which any node answers.`,
		Example: `  hotsplitctl cluster members
  hotsplitctl cluster members --consistency stale -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Members(cmd.Context(), &api.MembersRequest{Consistency: a.readConsistency()})
			if err != nil {
				return failed("cluster members", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			t := newTable(a.out, "NODE", "GRPC ADDR", "RAFT ADDR", "SUFFRAGE", "LEADER", "STATE", "REACHABLE", "LAST CONTACT", "APPLIED", "LAG", "CLUSTER VERSION", "BUILD")
			for _, m := range resp.GetMembers() {
				leader := ""
				if m.GetLeader() {
					leader = "*"
				}
				h := m.GetHealth()
				t.row(m.GetMember().GetNodeId(), orDash(m.GetMember().GetGrpcAddr()), orDash(m.GetMember().GetRaftAddr()),
					orDash(m.GetSuffrage()), leader, memberState(h), reachable(h), lastContact(h),
					formatUint(h.GetAppliedIndex()), lagOf(h), strconv.FormatUint(uint64(m.GetMember().GetSupportedVersion()), 10), orDash(buildOf(h.GetVersion())))
			}
			for _, adm := range resp.GetAdmissions() {
				t.row(adm.GetNodeId(), "-", adm.GetRaftAddr(), "admitted", "", "-", "-", "-", "-", "-", "-", "-")
			}
			if err := t.flush(); err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.out, withReadInfo(fmt.Sprintf("cluster %s, cluster version %d", orDash(resp.GetClusterId()), resp.GetClusterVersion()), resp.GetRead()))
			return err
		},
	}
}

func (a *app) leaderCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "leader",
		Short:   "Show which member the answering node believes is the leader",
		Example: `  hotsplitctl cluster leader --endpoints 127.0.0.1:7011`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Leader(cmd.Context(), &api.LeaderRequest{})
			if err != nil {
				return failed("cluster leader", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if resp.GetLeaderId() == "" {
				_, err = fmt.Fprintf(a.out, "no leader known (term %d)\n", resp.GetTerm())
				return err
			}
			note := ""
			if resp.GetLeaderUnreachable() {
				// A follower names its last leader until its election
				// timeout passes: say it is not heard from.
				note = fmt.Sprintf("; unreachable, last heard from %s ago: an election is due", formatMs(resp.GetLeaderLastContactMs()))
			}
			_, err = fmt.Fprintf(a.out, "leader %s at %s (term %d%s)\n", resp.GetLeaderId(), orDash(resp.GetLeaderGrpcAddr()), resp.GetTerm(), note)
			return err
		},
	}
}

func (a *app) addCmd() *cobra.Command {
	var raftAddr string
	cmd := &cobra.Command{
		Use:   "add NODE_ID --raft-addr HOST:PORT",
		Short: "Admit a new node, which may then join with its node certificate",
		Long: `Admit a node before it starts (etcd's member-add model; cluster version 2).
Only a node certificate whose CN is NODE_ID may then join, and only from
--raft-addr; the node joins as a non-voter and is promoted once caught up.
The admission ends when the node joins or 'cluster remove NODE_ID' runs.`,
		Example: `  hotsplitctl cluster add n4 --raft-addr 10.0.0.4:7000`,
		Args:    exactArgs("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if raftAddr == "" {
				return usageErrorf(cmd, "--raft-addr is required")
			}
			if err := client.ValidateEndpoint(raftAddr); err != nil {
				return usageErrorf(cmd, "--raft-addr %q: %v", raftAddr, err)
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Admit(cmd.Context(), &api.AdmitRequest{NodeId: args[0], RaftAddr: raftAddr})
			if err != nil {
				return failedMembership("cluster add "+args[0], err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			_, err = fmt.Fprintf(a.out, "admitted %s from %s; start it with --join and its node certificate\n", args[0], raftAddr)
			return err
		},
	}
	cmd.Flags().StringVar(&raftAddr, "raft-addr", "", "raft address the node will join from (required)")
	return cmd
}

func (a *app) joinCmd() *cobra.Command {
	var (
		req     api.JoinRequest
		version uint32
	)
	cmd := &cobra.Command{
		Use:   "join --id NODE_ID --raft-addr HOST:PORT --grpc-addr HOST:PORT",
		Short: "Add a node to the cluster (normally hotsplitd --join does this itself)",
		Long: `Add a node to the cluster. It joins as a non-voter and is promoted to voter
once it has caught up. A node id already in use is refused, and so is a node
whose data dir belongs to another cluster (--cluster-id).`,
		Example: `  hotsplitctl cluster join --id n4 --raft-addr 127.0.0.1:8004 --grpc-addr 127.0.0.1:7004`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range []struct{ flag, val string }{
				{"--id", req.NodeId}, {"--raft-addr", req.RaftAddr}, {"--grpc-addr", req.GrpcAddr},
			} {
				if f.val == "" {
					return usageErrorf(cmd, "%s is required", f.flag)
				}
			}
			for _, f := range []struct{ flag, val string }{{"--raft-addr", req.RaftAddr}, {"--grpc-addr", req.GrpcAddr}} {
				if err := client.ValidateEndpoint(f.val); err != nil {
					return usageErrorf(cmd, "%s %q: %v", f.flag, f.val, err)
				}
			}
			req.SupportedVersion = version
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Join(cmd.Context(), &req)
			if err != nil {
				return failedMembership("cluster join "+req.NodeId, err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if _, err := fmt.Fprintf(a.out, "%s joined cluster %s\n", req.NodeId, orDash(resp.GetClusterId())); err != nil {
				return err
			}
			t := newTable(a.out, "NODE", "GRPC ADDR", "RAFT ADDR", "VERSION")
			for _, m := range resp.GetMembers() {
				t.row(m.GetNodeId(), orDash(m.GetGrpcAddr()), orDash(m.GetRaftAddr()), strconv.FormatUint(uint64(m.GetSupportedVersion()), 10))
			}
			return t.flush()
		},
	}
	f := cmd.Flags()
	f.StringVar(&req.NodeId, "id", "", "node id of the joining node (required)")
	f.StringVar(&req.RaftAddr, "raft-addr", "", "raft address of the joining node (required)")
	f.StringVar(&req.GrpcAddr, "grpc-addr", "", "gRPC address of the joining node (required)")
	f.StringVar(&req.ClusterId, "cluster-id", "", "cluster id in the joining node's data dir (empty for a new node)")
	f.Uint32Var(&version, "supported-version", 1, "highest cluster version the joining node's binary supports")
	return cmd
}

func (a *app) removeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove NODE_ID",
		Short: "Remove a member from the cluster",
		Long: `Remove a member from the raft configuration and the member table. Removing
the leader first hands leadership to another voter, then removes the old
leader through the new one. The removed node logs one line and exits; its
data dir cannot rejoin (wipe it and join under a new id).`,
		Example: `  hotsplitctl cluster remove n4`,
		Args:    exactArgs("NODE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Remove(cmd.Context(), &api.RemoveRequest{NodeId: args[0]})
			if err != nil {
				return failedMembership("cluster remove "+args[0], err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if to := resp.GetLeadershipTransferredTo(); to != "" {
				_, err = fmt.Fprintf(a.out, "removed %s (it led: leadership moved to %s first)\n", args[0], to)
				return err
			}
			_, err = fmt.Fprintf(a.out, "removed %s\n", args[0])
			return err
		},
	}
}

func (a *app) transferCmd() *cobra.Command {
	var to string
	cmd := &cobra.Command{
		Use:   "transfer [--to NODE_ID]",
		Short: "Move leadership to another voter",
		Long:  "Move leadership to the voter --to, or to the most up-to-date voter raft picks.",
		Example: `  hotsplitctl cluster transfer
  hotsplitctl cluster transfer --to n2`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.TransferLeadership(cmd.Context(), &api.TransferLeadershipRequest{ToNodeId: to})
			if err != nil {
				return failedMembership("cluster transfer", err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if resp.GetLeaderId() == "" {
				_, err = fmt.Fprintln(a.out, "leadership transfer started; the new leader is not known yet (see 'hotsplitctl cluster leader')")
				return err
			}
			_, err = fmt.Fprintf(a.out, "leadership transferred to %s\n", resp.GetLeaderId())
			return err
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "node id of the new leader (default: raft picks)")
	return cmd
}

// errDiverged: the state check found a member whose state differs from
// the majority's (exit status 1, after the table).
var errDiverged = errors.New("replicas diverged")

func (a *app) checkCmd() *cobra.Command {
	var actor string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Compare every member's state hash at one log index",
		Long: `Commit a state check marker and print every member's state hash right after
it: replicas that applied the same log hold the same state, so the hashes
must agree. A member whose hash differs from the majority's (same hash
format) has diverged: it dumps its state into its data dir and stops. A
member that reached the index through a snapshot reports "skipped". Needs
cluster version 2. Exit status 1 when a member diverged.`,
		Example: `  hotsplitctl cluster check
  hotsplitctl cluster check -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.CheckState(cmd.Context(), &api.CheckStateRequest{Actor: actor})
			if err != nil {
				return failedMembership("cluster check", err)
			}
			if a.json() {
				if err := writeJSON(a.out, resp); err != nil {
					return err
				}
			} else if err := a.printCheck(resp); err != nil {
				return err
			}
			if d := resp.GetDiverged(); len(d) > 0 {
				return failed("cluster check", fmt.Errorf("%w at index %d: %s", errDiverged, resp.GetIndex(), strings.Join(d, ", ")))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&actor, "actor", "", "who asks (recorded in the marker entry)")
	return cmd
}

func (a *app) printCheck(resp *api.CheckStateResponse) error {
	t := newTable(a.out, "NODE", "INDEX", "HASH", "FORMAT", "OUTCOME", "DETAIL")
	for _, r := range resp.GetReports() {
		hash, format := "-", "-"
		if len(r.GetHash()) > 0 {
			hash, format = hex.EncodeToString(r.GetHash()), strconv.FormatUint(uint64(r.GetHashFormat()), 10)
		}
		outcome := strings.ToLower(strings.TrimPrefix(r.GetOutcome().String(), "STATE_OUTCOME_"))
		t.row(r.GetNodeId(), strconv.FormatUint(r.GetIndex(), 10), hash, format, outcome, orDash(r.GetDetail()))
	}
	if err := t.flush(); err != nil {
		return err
	}
	verdict := "every member that reported agrees"
	if d := resp.GetDiverged(); len(d) > 0 {
		verdict = "DIVERGED: " + strings.Join(d, ", ") + " (stopping; its state is dumped in its data dir)"
	}
	_, err := fmt.Fprintf(a.out, "state check at index %d: %s\n", resp.GetIndex(), verdict)
	return err
}
