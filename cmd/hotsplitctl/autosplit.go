package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

func (a *app) autosplitCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "autosplit",
		Short: "Inspect and steer automatic splitting",
		Long: `Automatic splitting finds hot routes and splits them. Every decision, the
kill switch and the config live in the cluster's replicated log, so what these
commands show is the same on every member.`,
		Example: `  hotsplitctl autosplit status
  hotsplitctl autosplit disable --reason "incident 4711: hold topology"
  hotsplitctl autosplit explain r7`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(a.statusCmd(), a.switchCmd(true), a.switchCmd(false), a.explainCmd(), a.configCmd(), a.abortCmd())
	return cmd
}

func (a *app) statusCmd() *cobra.Command {
	var limit uint32
	var all bool
	var before uint64
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the switch, config, live ops, candidates, cooldowns and recent decisions",
		Long: `Show the state of automatic splitting: the switch (who set it, why, when and
from where), warnings such as members started with a differing --autoSplit
flag, the config, the last committed load column and how far behind it is,
live split operations with their next step, the top candidates with their
consecutive-over count and per-column and smoothed scores, routes in cooldown
with the time left, the most recent finished operations, and the most recent
decisions with origin and reason. The cluster keeps its last 256 decisions:
--all pages through every one of them, --before SEQ shows the page of
decisions older than SEQ.`,
		Example: `  hotsplitctl autosplit status
  hotsplitctl autosplit status --limit 50 -o json
  hotsplitctl autosplit status --all`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			req := &api.StatusRequest{Consistency: a.readConsistency(), Limit: limit, DecisionsBeforeSeq: before}
			resp, err := cl.Status(cmd.Context(), req)
			if err != nil {
				return failed("autosplit status", err)
			}
			// --all: follow the pages back to the oldest kept decision,
			// then show them oldest first as one list.
			for all && resp.GetNextDecisionsBeforeSeq() != 0 {
				req.DecisionsBeforeSeq = resp.GetNextDecisionsBeforeSeq()
				page, err := cl.Status(cmd.Context(), req)
				if err != nil {
					return failed("autosplit status", err)
				}
				resp.Recent = append(page.GetRecent(), resp.GetRecent()...)
				resp.NextDecisionsBeforeSeq = page.GetNextDecisionsBeforeSeq()
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			return writeStatus(a.out, resp)
		},
	}
	cmd.Flags().Uint32Var(&limit, "limit", 0, "how many candidates, cooldowns, finished ops and decisions per page (0: the server's default, 20)")
	cmd.Flags().BoolVar(&all, "all", false, "show every decision the cluster keeps, page by page")
	cmd.Flags().Uint64Var(&before, "before", 0, "show the page of decisions older than this seq")
	return cmd
}

func writeStatus(w io.Writer, s *api.StatusResponse) error {
	sw := s.GetSwitch()
	t := newTable(w)
	t.row("switch", switchLine(sw))
	t.row("reason", quotedOrDash(sw.GetReason()))
	if len(s.GetWarnings()) == 0 {
		t.row("warnings", "none")
	}
	for i, warn := range s.GetWarnings() {
		label := ""
		if i == 0 {
			label = "warnings"
		}
		t.row(label, oneLine(forPeople(warn)))
	}
	t.row("routes", fmt.Sprintf("%d live", s.GetLiveRoutes()))
	if s.GetLastColumnAtMs() == 0 {
		t.row("last column", "none committed yet")
	} else {
		reporters := "none"
		if len(s.GetLastColumnReporters()) > 0 {
			reporters = strings.Join(s.GetLastColumnReporters(), ", ")
		}
		t.row("last column", fmt.Sprintf("%s, lag %s, reporters %s",
			formatWall(s.GetLastColumnAtMs()), formatMs(s.GetLastColumnLagMs()), reporters))
	}
	t.row("now", formatWall(s.GetNowMs()))
	if s.GetRead() != nil {
		t.row("read", readInfo(s.GetRead()))
	}
	if err := t.flush(); err != nil {
		return err
	}

	section(w, "config", -1)
	if err := configTable(w, s.GetConfig(), nil); err != nil {
		return err
	}

	section(w, "live ops", len(s.GetLiveOps()))
	if err := opTable(w, s.GetLiveOps()); err != nil {
		return err
	}

	splits, merges := splitCandidates(s.GetCandidates())
	section(w, "candidates", len(splits))
	if len(splits) > 0 {
		t = newTable(w, "ROUTE", "CONSECUTIVE", "SCORE", "SMOOTHED", "REASON")
		for _, c := range splits {
			t.row(formatRouteID(c.GetRouteId()),
				fmt.Sprintf("%d/%d", c.GetConsecutiveOver(), s.GetConfig().GetCandidateWindows()),
				strconv.FormatUint(c.GetLastScore(), 10), smoothed(c),
				explanationSummary(c, s.GetNowMs()))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	section(w, "merge candidates", len(merges))
	if len(merges) > 0 {
		t = newTable(w, "PAIR", "REASON", "ESTIMATE", "LIMIT", "COLD", "DELAY LEFT", "OP")
		for _, c := range merges {
			x := c.GetMergeExplanation()
			delay := "-"
			if x.GetMergeDelayLeftMs() > 0 {
				delay = formatMs(x.GetMergeDelayLeftMs())
			}
			t.row(formatRouteID(c.GetRouteId())+"+"+formatRouteID(x.GetMergePartnerRouteId()), enumName(x.GetReason()),
				strconv.FormatUint(x.GetMergedEstimate(), 10), strconv.FormatUint(x.GetMergeLimit(), 10),
				fmt.Sprintf("%d/%d", x.GetColdColumns(), x.GetMergeWindows()), delay, formatOpID(x.GetOpId()))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	section(w, "cooldowns", len(s.GetCooldowns()))
	if len(s.GetCooldowns()) > 0 {
		t = newTable(w, "ROUTE", "UNTIL", "LEFT")
		for _, c := range s.GetCooldowns() {
			t.row(formatRouteID(c.GetRouteId()), formatWall(c.GetCooldownUntilMs()), timeLeft(c.GetCooldownUntilMs(), s.GetNowMs()))
		}
		if err := t.flush(); err != nil {
			return err
		}
	}

	section(w, "finished ops", len(s.GetFinishedOps()))
	if err := opTable(w, s.GetFinishedOps()); err != nil {
		return err
	}

	title := "recent decisions"
	if kept := s.GetDecisionsKept(); kept > uint64(len(s.GetRecent())) {
		title = fmt.Sprintf("recent decisions, %d of the %d kept", len(s.GetRecent()), kept)
		if next := s.GetNextDecisionsBeforeSeq(); next != 0 {
			title += fmt.Sprintf(" (--before %d for older, --all for every one)", next)
		}
	}
	section(w, title, len(s.GetRecent()))
	return decisionTable(w, s.GetRecent())
}

// splitCandidates parts Status's candidates: routes counting towards a
// split, and (cluster version 3) the left routes of pairs explained for a
// merge, which carry a merge explanation and no count.
func splitCandidates(cs []*api.TrackedRoute) (splits, merges []*api.TrackedRoute) {
	for _, c := range cs {
		if c.GetMergeExplanation() != nil && c.GetConsecutiveOver() == 0 {
			merges = append(merges, c)
		} else {
			splits = append(splits, c)
		}
	}
	return splits, merges
}

// section starts a titled block; n < 0 omits the count, n == 0 says none.
func section(w io.Writer, title string, n int) {
	switch {
	case n < 0:
		fmt.Fprintf(w, "\n%s\n", title)
	case n == 0:
		fmt.Fprintf(w, "\n%s: none\n", title)
	default:
		fmt.Fprintf(w, "\n%s (%d)\n", title, n)
	}
}

func switchLine(sw *api.AutoSplitSwitch) string {
	state := "disabled"
	if sw.GetEnabled() {
		state = "enabled"
	}
	if sw.GetSource() == api.SwitchSource_SWITCH_SOURCE_UNSPECIFIED && sw.GetChangedAtHlc() == 0 {
		return state + " (never set)"
	}
	return fmt.Sprintf("%s, set by %s (source %s) at %s", state, actorWithNote(sw.GetActor(), sw.GetNote()),
		enumOrDash(sw.GetSource()), formatHLC(sw.GetChangedAtHlc()))
}

// actorWithNote shows the authenticated actor and, beside it, the text the
// caller declared.
func actorWithNote(actor, note string) string {
	if note == "" {
		return orDash(actor)
	}
	return fmt.Sprintf("%s (note %q)", orDash(actor), note)
}

// smoothed is the mean of the recent per-column scores: display only, it
// never decides anything. The sum is kept in 128 bits so it cannot overflow.
func smoothed(t *api.TrackedRoute) string {
	rs := t.GetRecentScores()
	if len(rs) == 0 {
		return "-"
	}
	var sum saturate.U128
	for _, s := range rs {
		sum = sum.Add(saturate.Wide(s))
	}
	// The sum is below len(rs)·2^64, so the mean always fits.
	return strconv.FormatUint(sum.DivSat(uint64(len(rs))), 10)
}

// timeLeft is until-now as a duration, or "ended" once passed.
func timeLeft(untilMs, nowMs uint64) string {
	if untilMs <= nowMs {
		return "ended"
	}
	return formatMs(untilMs - nowMs)
}

// explanationSummary is the detector's last word on a route in a few words.
func explanationSummary(t *api.TrackedRoute, nowMs uint64) string {
	e := t.GetExplanation()
	if e == nil {
		return "-"
	}
	s := enumName(e.GetReason())
	switch e.GetReason() {
	case api.Reason_REASON_PLANNED:
		s += fmt.Sprintf(" %s (%s)", formatOpID(e.GetOpId()), enumOrDash(e.GetOrigin()))
	case api.Reason_REASON_COOLDOWN:
		if t.GetCooldownUntilMs() > nowMs {
			s += " (" + timeLeft(t.GetCooldownUntilMs(), nowMs) + " left)"
		} else {
			s += " (ended)"
		}
	case api.Reason_REASON_IN_LIVE_OP:
		s += " (" + formatOpID(e.GetOpId()) + ")"
	}
	return s
}

// opTable prints ops: splits, and merges (ROUTE is the pair, ORIGIN
// merge).
func opTable(w io.Writer, ops []*api.Op) error {
	if len(ops) == 0 {
		return nil
	}
	t := newTable(w, "OP", "ROUTE", "ORIGIN", "STATE", "NEXT STEP", "SCORE", "CREATED")
	for _, op := range ops {
		state := enumName(op.GetState())
		if op.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_UNSPECIFIED {
			state += " (" + enumName(op.GetAbortReason()) + ")"
		}
		route, origin := formatRouteID(op.GetParentRouteId()), enumOrDash(op.GetOrigin())
		switch op.GetKind() {
		case api.OpKind_OP_KIND_MERGE:
			route, origin = formatRouteID(op.GetTargetRouteId())+"+"+formatRouteID(op.GetRightRouteId()), "merge"
		case api.OpKind_OP_KIND_MOVE:
			route, origin = formatRouteID(op.GetTargetRouteId()), fmt.Sprintf("move %s->%s", formatGroupID(op.GetSourceGroupId()), formatGroupID(op.GetTargetGroupId()))
		}
		t.row(formatOpID(op.GetOpId()), route, origin, state, nextStep(op), formatUint(op.GetScore()), formatHLC(op.GetCreatedHlc()))
	}
	return t.flush()
}

// nextStep says what an op does next: "2/2 split r10 at KEY", "1/1 merge
// r7+r8".
func nextStep(op *api.Op) string {
	n, total := int(op.GetNextStep()), len(op.GetSplitKeys())
	switch op.GetState() {
	case api.OpState_OP_STATE_DONE, api.OpState_OP_STATE_ABORTED:
		return "-"
	}
	switch op.GetKind() {
	case api.OpKind_OP_KIND_MERGE:
		return fmt.Sprintf("%d/1 merge %s+%s", n, formatRouteID(op.GetTargetRouteId()), formatRouteID(op.GetRightRouteId()))
	case api.OpKind_OP_KIND_MOVE:
		return fmt.Sprintf("%d/3 %s", n, moveStepName(n))
	}
	if n < 1 || n > total {
		return fmt.Sprintf("%d/%d", n, total)
	}
	return fmt.Sprintf("%d/%d split %s at %s", n, total, formatRouteID(op.GetTargetRouteId()), formatKey(op.GetSplitKeys()[n-1]))
}

// decisionTable prints entries of the recent-decisions ring.
func decisionTable(w io.Writer, ds []*api.Decision) error {
	if len(ds) == 0 {
		return nil
	}
	t := newTable(w, "SEQ", "AT", "KIND", "ROUTE", "OP", "ORIGIN", "REASON", "SCORE", "DETAIL")
	for _, d := range ds {
		var detail []string
		if len(d.GetSplitKeys()) > 0 {
			detail = append(detail, "keys "+formatKeys(d.GetSplitKeys()))
		}
		if d.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_UNSPECIFIED {
			detail = append(detail, "abort "+enumName(d.GetAbortReason()))
		}
		if d.GetActor() != "" {
			detail = append(detail, "by "+actorWithNote(d.GetActor(), d.GetNote()))
		}
		if d.GetDetail() != "" {
			detail = append(detail, oneLine(forPeople(d.GetDetail())))
		}
		t.row(strconv.FormatUint(d.GetSeq(), 10), formatHLC(d.GetAtHlc()), enumName(d.GetKind()),
			formatRouteID(d.GetRouteId()), formatOpID(d.GetOpId()), enumOrDash(d.GetOrigin()),
			enumOrDash(d.GetReason()), formatUint(d.GetScore()), orDash(strings.Join(detail, "; ")))
	}
	return t.flush()
}

func (a *app) switchCmd(enable bool) *cobra.Command {
	var reason, requestID string
	verb, past := "disable", "disabled"
	short := "Stop automatic splitting (the kill switch); live ops pause at their next step"
	example := `  hotsplitctl autosplit disable --reason "incident 4711: freeze topology"`
	if enable {
		verb, past = "enable", "enabled"
		short = "Start automatic splitting; paused ops resume unless older than op_ttl"
		example = `  hotsplitctl autosplit enable --reason "incident 4711 resolved"`
	}
	cmd := &cobra.Command{
		Use:   verb + ` --reason "..."`,
		Short: short,
		Long: short + `.

The switch is replicated: it holds on every member and across restarts, and
once an operator has set it, no member's --autoSplit flag changes it again.
Your --actor and --reason are recorded with it and shown by 'autosplit status'.`,
		Example: example,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if strings.TrimSpace(reason) == "" {
				return usageErrorf(cmd, "--reason is required: say why automatic splitting is being %s (it is recorded with your actor)", past)
			}
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.SetEnabled(cmd.Context(), &api.SetEnabledRequest{Enabled: enable, Reason: reason, RequestId: requestID})
			if err != nil {
				return failedMutation("autosplit "+verb, err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			sw := resp.GetSwitch()
			_, err = fmt.Fprintf(a.out, "automatic splitting %s\nswitch  %s\nreason  %s\n", past, switchLine(sw), quotedOrDash(sw.GetReason()))
			return err
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required; recorded and shown by 'autosplit status')")
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

func (a *app) abortCmd() *cobra.Command {
	var reason, requestID string
	cmd := &cobra.Command{
		Use:   "abort OP_ID",
		Short: "Cancel a live split operation",
		Long: `Cancel a live split operation. Steps already applied stand; if the first of
two steps has applied, its middle route starts a cooldown.`,
		Example: `  hotsplitctl autosplit abort 12 --reason "splitting this range hurts scans"
  hotsplitctl autosplit abort op12`,
		Args: exactArgs("OP_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opID, err := parseID(cmd, "OP_ID", "op", args[0])
			if err != nil {
				return err
			}
			if err := checkRequestID(cmd, requestID); err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.AbortOp(cmd.Context(), &api.AbortOpRequest{OpId: opID, Reason: reason, RequestId: requestID})
			if err != nil {
				return failedMutation("autosplit abort "+formatOpID(opID), err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			if _, err := fmt.Fprintf(a.out, "%s is %s\n", formatOpID(opID), enumName(resp.GetOp().GetState())); err != nil {
				return err
			}
			return opTable(a.out, []*api.Op{resp.GetOp()})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (recorded with the op)")
	cmd.Flags().StringVar(&requestID, "request-id", "", requestIDHelp)
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func quotedOrDash(s string) string {
	if s == "" {
		return "-"
	}
	return strconv.Quote(s)
}
