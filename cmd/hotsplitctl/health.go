package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// healthError is a cluster that answered but is not healthy; its exit code
// is exitDegraded or exitNoQuorum.
type healthError struct {
	status api.HealthStatus
	why    string
}

func (e *healthError) Error() string {
	return "cluster " + strings.ReplaceAll(enumName(e.status), "_", " ") + ": " + e.why
}

func (a *app) healthCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "health",
		Short: "Check the cluster's health from the answering node: quorum, leader, every member",
		Long: `Ask one node (the first endpoint that answers) for its own view of the
cluster: which voters it reaches, who leads, and per member its raft state,
when it was last heard from, how far its applied index trails the leader's
commit index, and why it is not healthy. It needs no leader, so it is how a
lost quorum shows. Each node probes its peers every 500 ms: a killed member
is reported unreachable within about a second.

Exit codes: 0 healthy; 4 degraded (quorum holds, but a member is
unreachable, lagging or not yet a voter); 5 no quorum (fewer voters
reachable than a quorum needs, or no leader known); 3 no node answered.`,
		Example: `  hotsplitctl cluster health
  hotsplitctl cluster health --endpoints 127.0.0.1:7011 -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Health(cmd.Context(), &api.HealthRequest{})
			if err != nil {
				return failed("cluster health", err)
			}
			if a.json() {
				if err := writeJSON(a.out, resp); err != nil {
					return err
				}
			} else if err := a.healthTable(resp); err != nil {
				return err
			}
			return healthVerdict(resp)
		},
	}
}

func (a *app) healthTable(resp *api.HealthResponse) error {
	leader := orDash(resp.GetLeaderId())
	fmt.Fprintf(a.out, "cluster %s: %s (as seen by %s; leader %s, term %d, commit index %d; %d of %d voters reachable, quorum %d)\n",
		orDash(resp.GetClusterId()), strings.ReplaceAll(enumName(resp.GetStatus()), "_", " "), resp.GetServedBy(),
		leader, resp.GetTerm(), resp.GetCommitIndex(), resp.GetVotersReachable(), resp.GetVoters(), resp.GetQuorum())
	for _, r := range resp.GetReasons() {
		fmt.Fprintf(a.out, "  %s\n", forPeople(r))
	}
	t := newTable(a.out, "NODE", "SUFFRAGE", "LEADER", "STATE", "REACHABLE", "LAST CONTACT", "APPLIED", "LAG", "BUILD", "REASON")
	for _, m := range resp.GetMembers() {
		h := m.GetHealth()
		mark := ""
		if m.GetLeader() {
			mark = "*"
		}
		t.row(m.GetMember().GetNodeId(), orDash(m.GetSuffrage()), mark, memberState(h), reachable(h), lastContact(h),
			formatUint(h.GetAppliedIndex()), lagOf(h), orDash(buildOf(h.GetVersion())), orDash(forPeople(h.GetReason())))
	}
	return t.flush()
}

// healthVerdict turns a non-healthy answer into its exit code.
func healthVerdict(resp *api.HealthResponse) error {
	var why []string
	for _, r := range resp.GetReasons() {
		why = append(why, forPeople(r))
	}
	for _, m := range resp.GetMembers() {
		if r := m.GetHealth().GetReason(); r != "" {
			why = append(why, m.GetMember().GetNodeId()+": "+forPeople(r))
		}
	}
	switch resp.GetStatus() {
	case api.HealthStatus_HEALTH_STATUS_HEALTHY:
		return nil
	case api.HealthStatus_HEALTH_STATUS_DEGRADED, api.HealthStatus_HEALTH_STATUS_NO_QUORUM:
		return &healthError{status: resp.GetStatus(), why: strings.Join(why, "; ")}
	}
	return &healthError{status: api.HealthStatus_HEALTH_STATUS_NO_QUORUM, why: fmt.Sprintf("the node answered an unknown status %d", resp.GetStatus())}
}

func healthExit(err error) (int, bool) {
	var he *healthError
	if !errors.As(err, &he) {
		return 0, false
	}
	if he.status == api.HealthStatus_HEALTH_STATUS_DEGRADED {
		return exitDegraded, true
	}
	return exitNoQuorum, true
}

// memberState is a member's raft state as people should read it: the
// state it reported, or, for a member not reachable now, the state it was
// last seen in, said as such (a kill -9'd leader is not "leader"). JSON
// keeps the raw last reported raft_state.
func memberState(h *api.MemberHealth) string {
	switch s := h.GetRaftState(); {
	case s == "":
		return "-"
	case !h.GetReachable():
		return "last seen as " + s
	default:
		return s
	}
}

func reachable(h *api.MemberHealth) string {
	switch {
	case h == nil || (!h.GetContacted() && h.GetReason() == ""):
		return "-"
	case h.GetReachable():
		return "yes"
	}
	return "no"
}

func lastContact(h *api.MemberHealth) string {
	if !h.GetContacted() {
		return "never"
	}
	if h.GetLastContactMs() == 0 {
		return "now"
	}
	return formatMs(h.GetLastContactMs()) + " ago"
}

func lagOf(h *api.MemberHealth) string {
	if h.GetRaftState() == "" {
		return "-"
	}
	return fmt.Sprint(h.GetAppliedLag())
}

// buildOf shortens a build string ("dev (rev 0123456789ab, go1.27.3)") to
// its release and revision ("dev@0123456789ab").
func buildOf(v string) string {
	release, rest, _ := strings.Cut(v, " (")
	if rev, ok := strings.CutPrefix(rest, "rev "); ok {
		if i := strings.IndexAny(rev, ",)"); i >= 0 {
			rev = rev[:i]
		}
		return release + "@" + rev
	}
	return release
}
