package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/hlc"
)

func (a *app) explainCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "explain ROUTE_ID",
		Short: "Say why a route was or was not split, with the numbers",
		Long: `Say why automatic splitting did or did not split a route: the detector's last
word on it (a reason such as counting, cooldown with the time left,
no_split_key, route_cap, budget_exhausted, suppressed_disabled, or planned),
the score against the threshold, the consecutive-over count, the hot-key
evidence and why single-key isolation was or was not used, followed by the
route's recent decisions and ops. From cluster version 3 a cold route's
merge with a neighbour is explained too (merge_planned, merge_delay,
merge_margin, merge_budget, merge_suppressed, with the merged estimate
and the cold columns), and a route whose start an operator placed (a
bootstrap split key or a manual split) says so: automatic merges never
remove that boundary.

The thresholds shown beside the numbers come from the current config, the
least share a split leaves on each side and the confidence levels from the
answering server; with -o json only the ExplainResponse is printed.`,
		Example: `  hotsplitctl autosplit explain 7
  hotsplitctl autosplit explain r7 -o json`,
		Args: exactArgs("ROUTE_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			routeID, err := parseID(cmd, "ROUTE_ID", "r", args[0])
			if err != nil {
				return err
			}
			cl, err := a.client(cmd)
			if err != nil {
				return err
			}
			resp, err := cl.Explain(cmd.Context(), &api.ExplainRequest{RouteId: routeID, Consistency: a.readConsistency()})
			if err != nil {
				return failed("autosplit explain "+formatRouteID(routeID), err)
			}
			if a.json() {
				return writeJSON(a.out, resp)
			}
			// The thresholds put the numbers in context; the explanation
			// stands without them, so a failure here is only noted.
			cfgResp, cfgErr := cl.GetConfig(cmd.Context(), &api.GetConfigRequest{Consistency: a.readConsistency()})
			fate := ""
			if resp.GetRoute() == nil {
				fate = routeFate(cmd.Context(), cl, routeID, a.readConsistency())
			}
			return writeExplain(a.out, routeID, resp, cfgResp.GetConfig(), cfgErr, fate)
		},
	}
}

// routeFate is the cluster's one sentence on a route that is gone ("r1
// was split into r2, r3 at …"): the answer a lookup by id gives, so that
// split, routes get and explain say the same; "" if it cannot be had.
func routeFate(ctx context.Context, cl *client.Client, routeID uint64, c api.Consistency) string {
	_, err := cl.GetRoute(ctx, &api.GetRouteRequest{RouteId: routeID, Consistency: c})
	if e, ok := errors.AsType[*client.Error](err); ok && e.Code() == codes.NotFound {
		return e.Message()
	}
	return ""
}

// writeExplain prints an explanation; fate is what became of a route that
// is gone ("" for a live one, or if unknown).
func writeExplain(w io.Writer, routeID uint64, r *api.ExplainResponse, cfg *api.Config, cfgErr error, fate string) error {
	t := newTable(w)
	switch {
	case r.GetRoute() != nil:
		t.row("route", routeSummary(r.GetRoute()))
	case fate != "":
		t.row("route", fate)
	default:
		t.row("route", formatRouteID(routeID)+" (no longer exists)")
	}
	t.row("verdict", verdict(r, cfg))
	if rd := r.GetRoute(); rd.GetOperatorStart() {
		t.row("start", fmt.Sprintf("pinned: an operator placed %s (a bootstrap split key or a manual split), so automatic merges never join %s "+
			"to the route before it; `hotsplitctl merge LEFT %s` can", formatKey(rd.GetStart()), formatRouteID(rd.GetRouteId()), formatRouteID(rd.GetRouteId())))
	}
	tr := r.GetTracked()
	e := tr.GetExplanation()
	if tr == nil {
		// The route is gone (or cold): the decision ring still holds the
		// numbers behind its last plan or decline.
		if d := lastExplained(r.GetDecisions()); d != nil {
			e = d.GetExplanation()
			t.row("explained", fmt.Sprintf("decision %d kept in the decision ring", d.GetSeq()))
		}
	}
	if tr != nil {
		// The explanation's numbers all come from the column it names;
		// a later column's score and counter are shown apart.
		score, counter := e.GetScore(), e.GetConsecutiveOver()
		if e == nil || (score == 0 && e.GetAtMs() == 0) {
			score, counter = tr.GetLastScore(), tr.GetConsecutiveOver()
		}
		if score != 0 {
			s := fmt.Sprintf("%d weighted ops/min", score)
			if th := thresholdOf(e, cfg); th != 0 {
				s += fmt.Sprintf(" (threshold %d)", th)
			}
			t.row("score", s)
		}
		if len(tr.GetRecentScores()) > 0 {
			t.row("smoothed", smoothed(tr)+fmt.Sprintf(" over %d columns (display only)", len(tr.GetRecentScores())))
		}
		over := fmt.Sprintf("%d columns over threshold", counter)
		if n := windowsOf(e, cfg); n != 0 {
			over += fmt.Sprintf(" (needs %d)", n)
		}
		t.row("consecutive", over)
		if e != nil && (tr.GetLastScore() != e.GetScore() || tr.GetConsecutiveOver() != e.GetConsecutiveOver()) {
			t.row("last column", fmt.Sprintf("score %d, %d columns over threshold (explained above: the column of %s)",
				tr.GetLastScore(), tr.GetConsecutiveOver(), formatWall(e.GetAtMs())))
		}
		if until := tr.GetCooldownUntilMs(); until != 0 {
			left := timeLeft(until, r.GetNowMs()) + " left"
			if until <= r.GetNowMs() {
				left = "ended"
			}
			t.row("cooldown", fmt.Sprintf("until %s (%s)", formatWall(until), left))
		}
	}
	if e != nil {
		explanationRows(t, e, r, cfg)
	}
	if m := tr.GetMergeExplanation(); m != nil && e.GetReason() != api.Reason_REASON_UNSPECIFIED {
		// (Without a split explanation the verdict is the merge's.)
		t.row("merge", mergeSummary(m))
	}
	if cfgErr != nil {
		t.row("note", "thresholds not shown: "+describeCause(cfgErr))
	}
	if r.GetRead() != nil {
		t.row("read", readInfo(r.GetRead()))
	}
	if err := t.flush(); err != nil {
		return err
	}
	section(w, "decisions", len(r.GetDecisions()))
	if err := decisionTable(w, r.GetDecisions()); err != nil {
		return err
	}
	section(w, "ops", len(r.GetOps()))
	return opTable(w, r.GetOps())
}

// explanationRows prints the numbers behind an explanation: why isolation
// was not used, the hot key, the cut of a balance split and its shares,
// the split keys, the op. r carries the detector's fixed numbers.
func explanationRows(t *table, e *api.Explanation, r *api.ExplainResponse, cfg *api.Config) {
	if e.GetIsolationReason() != api.Reason_REASON_UNSPECIFIED {
		t.row("isolation", "not used: "+isolationWhy(e, cfg))
	}
	if len(e.GetHotKey()) > 0 {
		s := fmt.Sprintf("%s: %d..%d weighted ops/min, share %s of the route",
			formatKey(e.GetHotKey()), e.GetHotKeyLowerPerMin(), e.GetHotKeyUpperPerMin(), formatBP(uint64(e.GetHotKeyShareBp())))
		if up := e.GetHotKeyUpperShareBp(); up != 0 {
			s = fmt.Sprintf("%s: %d (%s)..%d weighted ops/min, share %s..%s of the route",
				formatKey(e.GetHotKey()), e.GetHotKeyLowerPerMin(), withLevel(confidenceLevel(r, false), "lower bound"), e.GetHotKeyUpperPerMin(),
				formatBP(uint64(e.GetHotKeyShareBp())), formatBP(uint64(up)))
		}
		if share, floor := shareOf(e, cfg), floorOf(e, cfg); share != 0 || floor != 0 {
			s += fmt.Sprintf(" (isolation needs %s and %d ops/min)", formatBP(uint64(share)), floor)
		}
		if rate := e.GetSampleRate(); rate != 0 {
			s += fmt.Sprintf(", sampled 1 in %d", rate)
		}
		t.row("hot key", s)
	}
	if e.GetOrigin() == api.SplitOrigin_SPLIT_ORIGIN_SUB_BUCKET_MEDIAN {
		t.row("median", "bucket "+strconv.FormatUint(uint64(e.GetMedianBucket()), 10))
	}
	if e.GetSplitEvidence() == api.SplitEvidence_SPLIT_EVIDENCE_KEY_LOAD {
		t.row("isolated by", fmt.Sprintf("the key's own load: its lower bound %d ops/min clears the threshold %d and the floor %d, whatever its share",
			e.GetHotKeyLowerPerMin(), thresholdOf(e, cfg), floorOf(e, cfg)))
	}
	if e.GetLeftShareBp() != 0 || e.GetRightShareBp() != 0 {
		t.row("balance", balanceLine(e, r))
	}
	if len(e.GetSplitKeys()) > 0 {
		t.row("split keys", formatKeys(e.GetSplitKeys()))
	}
	if e.GetOpId() != 0 {
		t.row("op", formatOpID(e.GetOpId()))
	}
	since := ""
	if e.GetRepeats() > 0 {
		since = fmt.Sprintf(" (same reason since %s, %d repeats)", formatWall(e.GetFirstAtMs()), e.GetRepeats())
	}
	if e.GetAtMs() != 0 {
		t.row("explained", "at "+formatWall(e.GetAtMs())+since)
	}
}

// balanceLine words the cut of a balance split, or the best cut of a
// decline: the shares on each side, their interval and the evidence that
// placed it (cluster version 3), the bucket it lies in. resp carries the
// detector's fixed numbers.
func balanceLine(e *api.Explanation, resp *api.ExplainResponse) string {
	l, r := uint64(e.GetLeftShareBp()), uint64(e.GetRightShareBp())
	s := fmt.Sprintf("%s | %s of the load on each side", formatBP(l), formatBP(r))
	ev := e.GetSplitEvidence()
	interval := ev != api.SplitEvidence_SPLIT_EVIDENCE_UNSPECIFIED && ev != api.SplitEvidence_SPLIT_EVIDENCE_KEY_LOAD
	if interval {
		if e.GetLeftShareLoBp() == e.GetLeftShareHiBp() {
			s += " (exact)"
		} else {
			s += fmt.Sprintf(", %s %s..%s | %s..%s", withLevel(confidenceLevel(resp, true), "interval"),
				formatBP(uint64(e.GetLeftShareLoBp())), formatBP(uint64(e.GetLeftShareHiBp())),
				formatBP(uint64(e.GetRightShareLoBp())), formatBP(uint64(e.GetRightShareHiBp())))
		}
	}
	if e.GetOrigin() != api.SplitOrigin_SPLIT_ORIGIN_BALANCE {
		need := ""
		switch bp := uint64(resp.GetMinSideShareBp()); {
		case bp != 0 && interval:
			need = " (each side's lower bound needs " + formatBP(bp) + ")"
		case bp != 0:
			need = " (each side needs " + formatBP(bp) + ")"
		}
		s = "best cut: " + s + need
	}
	if interval {
		s += ", placed by " + evidenceWords(ev)
	}
	s += fmt.Sprintf("; bucket %d holds %s", e.GetMedianBucket(), formatBP(uint64(e.GetBucketShareBp())))
	if n := e.GetKnownKeys(); n != 0 {
		s += fmt.Sprintf(", %d keys of known load", n)
	}
	switch n := e.GetSamplePoints(); {
	case n != 0 && interval:
		s += fmt.Sprintf(", %d sampled keys", n)
	case n != 0:
		s += fmt.Sprintf(", placed among %d sampled keys", n)
	}
	return s
}

// evidenceWords names what placed a cut.
func evidenceWords(ev api.SplitEvidence) string {
	switch ev {
	case api.SplitEvidence_SPLIT_EVIDENCE_BUCKETS:
		return "exact bucket loads"
	case api.SplitEvidence_SPLIT_EVIDENCE_TOP_KEYS:
		return "top-K counts of the keys around it"
	case api.SplitEvidence_SPLIT_EVIDENCE_SAMPLES:
		return "sampled keys inside a bucket"
	}
	return enumName(ev)
}

// The detector's fixed numbers (the least share a split leaves on each
// side, the z of its confidence bounds) come with the Explain response,
// filled by the server from its detector. A server that predates them
// sends zeros; the words then leave the number out, because one this
// build assumed could be wrong for that server.

// minSideShare is the least share a split leaves on each side, as "20%";
// "" when the response lacks it.
func minSideShare(r *api.ExplainResponse) string {
	bp := r.GetMinSideShareBp()
	if bp == 0 {
		return ""
	}
	return strconv.FormatFloat(float64(bp)/100, 'f', -1, 64) + "%"
}

// confidenceLevel is the confidence of the detector's bounds at the
// response's z, to a tenth of a percent ("99%"): one-sided for a lower
// bound, Φ(z), two-sided for an interval, 2Φ(z) − 1; "" when the response
// lacks z.
func confidenceLevel(r *api.ExplainResponse, twoSided bool) string {
	zMilli := r.GetConfidenceZMilli()
	if zMilli == 0 {
		return ""
	}
	p := math.Erf(float64(zMilli) / 1000 / math.Sqrt2) // 2Φ(z) − 1
	if !twoSided {
		p = (1 + p) / 2
	}
	return strconv.FormatFloat(math.Round(p*1000)/10, 'f', -1, 64) + "%"
}

// withLevel is "99% lower bound", or the bare noun without a level.
func withLevel(level, noun string) string {
	if level == "" {
		return noun
	}
	return level + " " + noun
}

// lastExplained is the newest decision carrying an explanation.
func lastExplained(ds []*api.Decision) *api.Decision {
	for i := len(ds) - 1; i >= 0; i-- {
		if ds[i].GetExplanation() != nil {
			return ds[i]
		}
	}
	return nil
}

// The settings an explanation was judged by: its own (cluster version 2
// records them) or else the current config's.
func thresholdOf(e *api.Explanation, cfg *api.Config) uint64 {
	if v := e.GetThreshold(); v != 0 {
		return v
	}
	return cfg.GetThreshold()
}

func windowsOf(e *api.Explanation, cfg *api.Config) uint32 {
	if v := e.GetCandidateWindows(); v != 0 {
		return v
	}
	return cfg.GetCandidateWindows()
}

func floorOf(e *api.Explanation, cfg *api.Config) uint64 {
	if v := e.GetFloor(); v != 0 {
		return v
	}
	return cfg.GetTopKeyAbsoluteFloor()
}

func shareOf(_ *api.Explanation, cfg *api.Config) uint32 { return cfg.GetTopKeyShareBp() }

// verdict is the one-line answer to "why (not)?".
func verdict(r *api.ExplainResponse, cfg *api.Config) string {
	tr, now := r.GetTracked(), r.GetNowMs()
	e := tr.GetExplanation()
	switch {
	case r.GetRoute() == nil && e == nil:
		if d := lastExplained(r.GetDecisions()); d != nil {
			return fmt.Sprintf("the route no longer exists; its last explanation (decision %d): %s", d.GetSeq(),
				reasonVerdict(d.GetExplanation(), nil, r, cfg))
		}
		return "the route no longer exists and the detector holds no state for it (see decisions)"
	case tr == nil:
		return coldVerdict(r)
	case e == nil && tr.GetCooldownUntilMs() > now:
		return fmt.Sprintf("not split: cooldown (%s left)", timeLeft(tr.GetCooldownUntilMs(), now))
	case e == nil:
		return fmt.Sprintf("not split yet: counting (%s)", overOf(tr, cfg))
	case e.GetReason() == api.Reason_REASON_UNSPECIFIED && tr.GetMergeExplanation() != nil:
		return "cold: " + mergeSummary(tr.GetMergeExplanation())
	}
	return reasonVerdict(e, tr, r, cfg)
}

// mergeSummary words a merge explanation (cluster version 3): the pair,
// the reason, and the numbers it was judged by.
func mergeSummary(m *api.Explanation) string {
	pair := "with " + formatRouteID(m.GetMergePartnerRouteId())
	nums := fmt.Sprintf("merged estimate %d, limit %d; cold %d of %d columns", m.GetMergedEstimate(), m.GetMergeLimit(),
		m.GetColdColumns(), m.GetMergeWindows())
	var s string
	switch m.GetReason() {
	case api.Reason_REASON_MERGE_PLANNED:
		s = fmt.Sprintf("merge planned %s: %s (%s)", pair, formatOpID(m.GetOpId()), nums)
	case api.Reason_REASON_MERGE_DELAY:
		s = fmt.Sprintf("not merged %s: merge_delay (%s left since a route of the pair was created; %s)", pair, formatMs(m.GetMergeDelayLeftMs()), nums)
	case api.Reason_REASON_MERGE_MARGIN:
		s = fmt.Sprintf("not merged %s: merge_margin (the merged route would start too close to the split threshold: %s)", pair, nums)
	case api.Reason_REASON_MERGE_SUPPRESSED:
		s = fmt.Sprintf("not merged %s: merge_suppressed (automatic splitting and merging are off; %s)", pair, nums)
	case api.Reason_REASON_MERGE_BUDGET:
		s = fmt.Sprintf("not merged %s: merge_budget (colder pairs used this column's merges; %s)", pair, nums)
	default:
		s = fmt.Sprintf("%s %s (%s)", enumName(m.GetReason()), pair, nums)
	}
	if since := m.GetAtMs(); since != 0 {
		s += " at " + formatWall(since)
		if m.GetRepeats() > 0 {
			s += fmt.Sprintf(" (same since %s, %d repeats)", formatWall(m.GetFirstAtMs()), m.GetRepeats())
		}
	}
	return s
}

// coldVerdict explains a live route the detector holds no state for: no
// column to judge it by yet, or below the threshold.
func coldVerdict(r *api.ExplainResponse) string {
	last := r.GetLastColumnAtMs()
	// A route is created by a split or a merge (the other HLC is 0).
	born := hlc.Physical(max(r.GetRoute().GetSplitAtHlc(), r.GetRoute().GetMergedAtHlc()))
	var s string
	switch {
	case last == 0:
		s = "nothing to judge yet: no load column has been committed"
	case born != 0 && born >= last:
		s = fmt.Sprintf("nothing to judge yet: no load column has been committed since the route was created at %s", formatWall(born))
	default:
		s = "not split: cold (the detector holds no state for this route: its score is below the threshold and it is not in cooldown)"
	}
	if last != 0 && !r.GetAutoSplitEnabled() {
		s += "; automatic splitting is off"
	}
	return s
}

// reasonVerdict words an explanation's reason; tr (the route's current
// state, nil for a gone route) gives the cooldown left.
func reasonVerdict(e *api.Explanation, tr *api.TrackedRoute, r *api.ExplainResponse, cfg *api.Config) string {
	now := r.GetNowMs()
	reason := enumName(e.GetReason())
	switch e.GetReason() {
	case api.Reason_REASON_PLANNED:
		return fmt.Sprintf("split planned: %s, origin %s, at %s", formatOpID(e.GetOpId()), enumOrDash(e.GetOrigin()), formatKeys(e.GetSplitKeys()))
	case api.Reason_REASON_COUNTING:
		return fmt.Sprintf("not split yet: counting (%d of %d consecutive columns over threshold)", e.GetConsecutiveOver(), windowsOf(e, cfg))
	case api.Reason_REASON_HOLD_BAND:
		return fmt.Sprintf("not split yet: hold_band (score %d is below the threshold %d but within the hold band from %s of it: the count holds at %d of %d)",
			e.GetScore(), thresholdOf(e, cfg), formatBP(uint64(e.GetHoldBandBp())), e.GetConsecutiveOver(), windowsOf(e, cfg))
	case api.Reason_REASON_BELOW_THRESHOLD:
		return fmt.Sprintf("not split: below_threshold since %s (score %d, threshold %d: the count went back to 0)",
			formatWall(e.GetAtMs()), e.GetScore(), thresholdOf(e, cfg))
	case api.Reason_REASON_COOLDOWN:
		left := formatMs(e.GetCooldownLeftMs())
		if until := tr.GetCooldownUntilMs(); until > now {
			left = timeLeft(until, now)
		} else if tr != nil && until != 0 {
			return "not split: cooldown (ended; the next hot column decides)"
		}
		return fmt.Sprintf("not split: cooldown (%s left)", left)
	case api.Reason_REASON_NO_SPLIT_KEY:
		if l, rt := e.GetLeftShareBp(), e.GetRightShareBp(); l != 0 || rt != 0 {
			return fmt.Sprintf("not split: no_split_key (no cut puts %s of the load on each side by the evidence: the best leaves %s | %s; hotsplit never splits at a blind midpoint)",
				cmp.Or(minSideShare(r), "enough"), formatBP(uint64(l)), formatBP(uint64(rt)))
		}
		return "not split: no_split_key (no hot key to isolate and no usable sub-bucket median; hotsplit never splits at a blind midpoint)"
	case api.Reason_REASON_CUT_UNCERTAIN:
		return fmt.Sprintf("not split: cut_uncertain (the best cut leaves %s | %s by the estimate, but its interval admits a side below %s: %s..%s | %s..%s; a column with more evidence decides)",
			formatBP(uint64(e.GetLeftShareBp())), formatBP(uint64(e.GetRightShareBp())), cmp.Or(minSideShare(r), "what a split needs"),
			formatBP(uint64(e.GetLeftShareLoBp())), formatBP(uint64(e.GetLeftShareHiBp())),
			formatBP(uint64(e.GetRightShareLoBp())), formatBP(uint64(e.GetRightShareHiBp())))
	case api.Reason_REASON_NO_EVIDENCE:
		return "not split: no_evidence (the column carried no bucket counts, top keys or samples for this route, so nothing says where its load lies; the leader sends evidence only for the hottest rows; hotsplit never splits at a blind midpoint)"
	case api.Reason_REASON_ALREADY_ISOLATED:
		return "not split: already_isolated (the route holds one key; it cannot be split further)"
	case api.Reason_REASON_ROUTE_CAP:
		s := fmt.Sprintf("not split: route_cap (the plan would make %d routes", e.GetProjectedRoutes())
		if cfg != nil {
			s += fmt.Sprintf("; max_auto_routes is %d", cfg.GetMaxAutoRoutes())
		}
		return s + ")"
	case api.Reason_REASON_BUDGET_EXHAUSTED:
		s := "not split: budget_exhausted (higher-scoring routes used this column's split budget"
		if cfg != nil {
			s += fmt.Sprintf("; max_splits_per_cycle is %d", cfg.GetMaxSplitsPerCycle())
		}
		return s + ")"
	case api.Reason_REASON_NON_ACTIVE:
		return fmt.Sprintf("not split: non_active (the route is %s)", enumName(r.GetRoute().GetState()))
	case api.Reason_REASON_IN_LIVE_OP:
		return fmt.Sprintf("not split: in_live_op (the route belongs to %s)", formatOpID(e.GetOpId()))
	case api.Reason_REASON_SUPPRESSED_DISABLED:
		return fmt.Sprintf("not split: suppressed_disabled (automatic splitting is off; it would have split with origin %s at %s)",
			enumOrDash(e.GetOrigin()), formatKeys(e.GetSplitKeys()))
	}
	return "not split: " + reason
}

func overOf(tr *api.TrackedRoute, cfg *api.Config) string {
	if cfg == nil {
		return fmt.Sprintf("%d consecutive columns over threshold", tr.GetConsecutiveOver())
	}
	return fmt.Sprintf("%d of %d consecutive columns over threshold", tr.GetConsecutiveOver(), cfg.GetCandidateWindows())
}

// isolationWhy says why single-key isolation was not used, with numbers.
func isolationWhy(e *api.Explanation, cfg *api.Config) string {
	r := e.GetIsolationReason()
	name := enumName(r)
	switch r {
	case api.Reason_REASON_TOPK_SHARE:
		s := fmt.Sprintf("%s (the hot key carries %s of the route's load", name, formatBP(uint64(e.GetHotKeyShareBp())))
		if cfg != nil {
			s += fmt.Sprintf(", isolation needs %s", formatBP(uint64(cfg.GetTopKeyShareBp())))
		}
		return s + ")"
	case api.Reason_REASON_ABSOLUTE_FLOOR:
		s := fmt.Sprintf("%s (the hot key's lower bound is %d ops/min", name, e.GetHotKeyLowerPerMin())
		if cfg != nil {
			s += fmt.Sprintf(", isolation needs %d", cfg.GetTopKeyAbsoluteFloor())
		}
		return s + ")"
	case api.Reason_REASON_TOPK_ERROR_BOUND:
		return fmt.Sprintf("%s (the upper estimate %d ops/min passes, the lower bound %d does not)", name, e.GetHotKeyUpperPerMin(), e.GetHotKeyLowerPerMin())
	case api.Reason_REASON_TOPK_DEGRADED:
		return name + " (a reporter's top-K sketch was degraded, so the evidence is not trusted)"
	case api.Reason_REASON_ALREADY_ISOLATED:
		return name + " (the route already holds only one key)"
	case api.Reason_REASON_KEY_TOO_LONG:
		return name + " (the hot key is too long to isolate as [H, H\\x00))"
	case api.Reason_REASON_NO_TOPK:
		return name + " (no top-K evidence reached the detector)"
	}
	return name
}
