package detector

import "strconv"

var reasonNames = [...]string{
	ReasonUnspecified:       "unspecified",
	ReasonPlanned:           "planned",
	ReasonCounting:          "counting",
	ReasonCooldown:          "cooldown",
	ReasonNoSplitKey:        "no_split_key",
	ReasonRouteCap:          "route_cap",
	ReasonBudgetExhausted:   "budget_exhausted",
	ReasonNonActive:         "non_active",
	ReasonInLiveOp:          "in_live_op",
	ReasonSuppressedDisable: "suppressed_disabled",
	ReasonAbsoluteFloor:     "absolute_floor",
	ReasonTopKDegraded:      "topk_degraded",
	ReasonTopKErrorBound:    "topk_error_bound",
	ReasonAlreadyIsolated:   "already_isolated",
	ReasonKeyTooLong:        "key_too_long",
	ReasonTopKShare:         "topk_share",
	ReasonNoTopK:            "no_topk",
	ReasonHoldBand:          "hold_band",
	ReasonBelowThreshold:    "below_threshold",
	ReasonMergePlanned:      "merge_planned",
	ReasonMergeDelay:        "merge_delay",
	ReasonMergeMargin:       "merge_margin",
	ReasonMergeSuppressed:   "merge_suppressed",
	ReasonMergeBudget:       "merge_budget",
	ReasonNoEvidence:        "no_evidence",
	ReasonCutUncertain:      "cut_uncertain",
}

// String is the reason's fixed metric label and log value, e.g.
// "no_split_key".
func (r Reason) String() string {
	if r >= 0 && int(r) < len(reasonNames) && reasonNames[r] != "" {
		return reasonNames[r]
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

var originNames = [...]string{
	OriginUnspecified:              "unspecified",
	OriginManual:                   "manual",
	OriginIsolationCompound:        "isolation_compound",
	OriginIsolationSingleLowerEdge: "isolation_single_lower_edge",
	OriginIsolationSingleUpperEdge: "isolation_single_upper_edge",
	OriginSubBucketMedian:          "sub_bucket_median",
	OriginBalance:                  "balance",
}

// String is the origin's fixed metric label and log value (split_origin),
// e.g. "isolation_compound".
func (o Origin) String() string {
	if o >= 0 && int(o) < len(originNames) && originNames[o] != "" {
		return originNames[o]
	}
	return "origin(" + strconv.Itoa(int(o)) + ")"
}

var evidenceNames = [...]string{
	EvidenceUnspecified: "unspecified",
	EvidenceBuckets:     "buckets",
	EvidenceTopKeys:     "top_keys",
	EvidenceSamples:     "samples",
	EvidenceKeyLoad:     "key_load",
}

// String is the evidence kind's fixed name, e.g. "top_keys".
func (e Evidence) String() string {
	if e >= 0 && int(e) < len(evidenceNames) && evidenceNames[e] != "" {
		return evidenceNames[e]
	}
	return "evidence(" + strconv.Itoa(int(e)) + ")"
}
