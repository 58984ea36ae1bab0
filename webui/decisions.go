package webui

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// DecisionsAnswer is the answer of GET /api/v1/decisions: the decisions of
// the replicated ring committed in [FromMs, ToMs], oldest first. Kept is
// the number the ring holds in all (it is bounded, so older ones are gone).
type DecisionsAnswer struct {
	Read      ReadInfo   `json:"read"`
	NowMs     uint64     `json:"now_ms"`
	FromMs    uint64     `json:"from_ms"`
	ToMs      uint64     `json:"to_ms"`
	Decisions []Decision `json:"decisions"`
	Kept      int        `json:"kept"`
}

// Decision is one entry of the decision ring.
type Decision struct {
	Seq         uint64       `json:"seq"`
	AtMs        uint64       `json:"at_ms"`
	AtHLC       string       `json:"at_hlc"`
	Kind        string       `json:"kind"`
	RouteID     uint64       `json:"route_id,omitempty"`
	OpID        uint64       `json:"op_id,omitempty"`
	Origin      string       `json:"origin,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	Score       uint64       `json:"score,omitempty"`
	SplitKeys   []string     `json:"split_keys,omitempty"`
	Actor       string       `json:"actor,omitempty"`
	Note        string       `json:"note,omitempty"`
	Detail      string       `json:"detail,omitempty"`
	AbortReason string       `json:"abort_reason,omitempty"`
	Explanation *Explanation `json:"explanation,omitempty"`
}

// Explanation is the detector's last word about a route, with the numbers
// behind it.
type Explanation struct {
	Reason             string   `json:"reason"`
	Origin             string   `json:"origin,omitempty"`
	IsolationReason    string   `json:"isolation_reason,omitempty"`
	AtMs               uint64   `json:"at_ms"`
	FirstAtMs          uint64   `json:"first_at_ms"`
	Repeats            uint32   `json:"repeats"`
	Score              uint64   `json:"score"`
	ConsecutiveOver    uint32   `json:"consecutive_over"`
	CooldownLeftMs     uint64   `json:"cooldown_left_ms"`
	SplitKeys          []string `json:"split_keys,omitempty"`
	HotKey             string   `json:"hot_key,omitempty"`
	HotKeyLowerPerMin  uint64   `json:"hot_key_lower_per_min,omitempty"`
	HotKeyUpperPerMin  uint64   `json:"hot_key_upper_per_min,omitempty"`
	HotKeyShareBP      uint32   `json:"hot_key_share_bp,omitempty"`
	HotKeyUpperShareBP uint32   `json:"hot_key_upper_share_bp,omitempty"`
	MedianBucket       uint32   `json:"median_bucket,omitempty"`
	BucketShareBP      uint32   `json:"bucket_share_bp,omitempty"`
	LeftShareBP        uint32   `json:"left_share_bp,omitempty"`
	RightShareBP       uint32   `json:"right_share_bp,omitempty"`
	OpID               uint64   `json:"op_id,omitempty"`
	ProjectedRoutes    uint64   `json:"projected_routes,omitempty"`
	SampleRate         uint32   `json:"sample_rate,omitempty"`
	SamplePoints       uint32   `json:"sample_points,omitempty"`
	Floor              uint64   `json:"floor,omitempty"`
	Threshold          uint64   `json:"threshold,omitempty"`
	CandidateWindows   uint32   `json:"candidate_windows,omitempty"`
	HoldBandBP         uint32   `json:"hold_band_bp,omitempty"`
}

// ExplainAnswer is the answer of GET /api/v1/explain: what the detector,
// the decision ring and the ops say about one route.
type ExplainAnswer struct {
	Read             ReadInfo      `json:"read"`
	NowMs            uint64        `json:"now_ms"`
	RouteID          uint64        `json:"route_id"`
	Route            *RouteInfo    `json:"route"`   // null: the route is gone
	Tracked          *TrackedRoute `json:"tracked"` // null: no detector state (cold)
	Decisions        []Decision    `json:"decisions"`
	Ops              []Op          `json:"ops"`
	LastColumnAtMs   uint64        `json:"last_column_at_ms"`
	AutoSplitEnabled bool          `json:"auto_split_enabled"`
}

// RouteInfo is a route descriptor.
type RouteInfo struct {
	RouteID       uint64 `json:"route_id"`
	Start         string `json:"start"`
	End           string `json:"end"`
	GroupID       uint64 `json:"group_id"`
	State         string `json:"state"`
	ParentRouteID uint64 `json:"parent_route_id,omitempty"`
	SplitAtMs     uint64 `json:"split_at_ms,omitempty"`
}

// TrackedRoute is the detector's state of a route.
type TrackedRoute struct {
	ConsecutiveOver uint32       `json:"consecutive_over"`
	LastScore       uint64       `json:"last_score"`
	CooldownUntilMs uint64       `json:"cooldown_until_ms"`
	CooldownLeftMs  uint64       `json:"cooldown_left_ms"`
	RecentScores    []uint64     `json:"recent_scores"`
	Explanation     *Explanation `json:"explanation,omitempty"`
}

// Op is a planned split operation.
type Op struct {
	OpID          uint64   `json:"op_id"`
	ParentRouteID uint64   `json:"parent_route_id"`
	TargetRouteID uint64   `json:"target_route_id"`
	SplitKeys     []string `json:"split_keys"`
	Origin        string   `json:"origin"`
	NextStep      uint32   `json:"next_step"`
	State         string   `json:"state"`
	AbortReason   string   `json:"abort_reason,omitempty"`
	Detail        string   `json:"detail,omitempty"`
	Score         uint64   `json:"score"`
	CreatedAtMs   uint64   `json:"created_at_ms"`
	UpdatedAtMs   uint64   `json:"updated_at_ms"`
	Actor         string   `json:"actor,omitempty"`
	Note          string   `json:"note,omitempty"`
}

func buildDecisions(s *Snapshot, p DecisionsParams) *DecisionsAnswer {
	a := &DecisionsAnswer{Read: readInfo(s.Read), NowMs: s.NowMs, FromMs: p.FromMs, ToMs: p.ToMs, Decisions: []Decision{}, Kept: len(s.Decisions)}
	if !p.HasTo {
		a.ToMs = ^uint64(0)
	}
	for _, d := range s.Decisions {
		if at := hlc.Physical(d.GetAtHlc()); at >= a.FromMs && at <= a.ToMs {
			a.Decisions = append(a.Decisions, decisionOf(d))
		}
	}
	return a
}

func decisionOf(d *api.Decision) Decision {
	out := Decision{Seq: d.GetSeq(), AtMs: hlc.Physical(d.GetAtHlc()), AtHLC: hlcString(d.GetAtHlc()),
		Kind: enumName(d.GetKind(), "DECISION_KIND_"), RouteID: d.GetRouteId(), OpID: d.GetOpId(),
		Score: d.GetScore(), SplitKeys: escapeAll(d.GetSplitKeys()), Actor: d.GetActor(), Note: d.GetNote(), Detail: d.GetDetail(),
		Explanation: explanationOf(d.GetExplanation())}
	if d.GetOrigin() != api.SplitOrigin_SPLIT_ORIGIN_UNSPECIFIED {
		out.Origin = enumName(d.GetOrigin(), "SPLIT_ORIGIN_")
	}
	if d.GetReason() != api.Reason_REASON_UNSPECIFIED {
		out.Reason = enumName(d.GetReason(), "REASON_")
	}
	if d.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_UNSPECIFIED {
		out.AbortReason = enumName(d.GetAbortReason(), "OP_ABORT_REASON_")
	}
	return out
}

func escapeAll(keys [][]byte) []string {
	if len(keys) == 0 {
		return nil
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = escape(k)
	}
	return out
}

func explanationOf(e *api.Explanation) *Explanation {
	if e == nil {
		return nil
	}
	out := &Explanation{Reason: enumName(e.GetReason(), "REASON_"), AtMs: e.GetAtMs(), FirstAtMs: e.GetFirstAtMs(),
		Repeats: e.GetRepeats(), Score: e.GetScore(), ConsecutiveOver: e.GetConsecutiveOver(), CooldownLeftMs: e.GetCooldownLeftMs(),
		SplitKeys: escapeAll(e.GetSplitKeys()), HotKeyLowerPerMin: e.GetHotKeyLowerPerMin(), HotKeyUpperPerMin: e.GetHotKeyUpperPerMin(),
		HotKeyShareBP: e.GetHotKeyShareBp(), HotKeyUpperShareBP: e.GetHotKeyUpperShareBp(), MedianBucket: e.GetMedianBucket(),
		BucketShareBP: e.GetBucketShareBp(), LeftShareBP: e.GetLeftShareBp(), RightShareBP: e.GetRightShareBp(), OpID: e.GetOpId(),
		ProjectedRoutes: e.GetProjectedRoutes(), SampleRate: e.GetSampleRate(), SamplePoints: e.GetSamplePoints(), Floor: e.GetFloor(),
		Threshold: e.GetThreshold(), CandidateWindows: e.GetCandidateWindows(), HoldBandBP: e.GetHoldBandBp()}
	if e.GetOrigin() != api.SplitOrigin_SPLIT_ORIGIN_UNSPECIFIED {
		out.Origin = enumName(e.GetOrigin(), "SPLIT_ORIGIN_")
	}
	if e.GetIsolationReason() != api.Reason_REASON_UNSPECIFIED {
		out.IsolationReason = enumName(e.GetIsolationReason(), "REASON_")
	}
	if len(e.GetHotKey()) > 0 {
		out.HotKey = escape(e.GetHotKey())
	}
	return out
}

func buildExplain(routeID uint64, r *api.ExplainResponse) *ExplainAnswer {
	a := &ExplainAnswer{Read: readInfo(r.GetRead()), NowMs: r.GetNowMs(), RouteID: routeID, Decisions: []Decision{}, Ops: []Op{},
		LastColumnAtMs: r.GetLastColumnAtMs(), AutoSplitEnabled: r.GetAutoSplitEnabled()}
	if rd := r.GetRoute(); rd != nil {
		a.Route = &RouteInfo{RouteID: rd.GetRouteId(), Start: escape(rd.GetStart()), End: escape(rd.GetEnd()), GroupID: rd.GetGroupId(),
			State: enumName(rd.GetState(), "ROUTE_STATE_"), ParentRouteID: rd.GetParentRouteId(), SplitAtMs: hlc.Physical(rd.GetSplitAtHlc())}
	}
	if t := r.GetTracked(); t != nil {
		a.Tracked = &TrackedRoute{ConsecutiveOver: t.GetConsecutiveOver(), LastScore: t.GetLastScore(), CooldownUntilMs: t.GetCooldownUntilMs(),
			RecentScores: t.GetRecentScores(), Explanation: explanationOf(t.GetExplanation())}
		if c := t.GetCooldownUntilMs(); c > r.GetNowMs() {
			a.Tracked.CooldownLeftMs = c - r.GetNowMs()
		}
		if a.Tracked.RecentScores == nil {
			a.Tracked.RecentScores = []uint64{}
		}
	}
	for _, d := range r.GetDecisions() {
		a.Decisions = append(a.Decisions, decisionOf(d))
	}
	for _, op := range r.GetOps() {
		o := Op{OpID: op.GetOpId(), ParentRouteID: op.GetParentRouteId(), TargetRouteID: op.GetTargetRouteId(),
			SplitKeys: escapeAll(op.GetSplitKeys()), Origin: enumName(op.GetOrigin(), "SPLIT_ORIGIN_"), NextStep: op.GetNextStep(),
			State: enumName(op.GetState(), "OP_STATE_"), Detail: op.GetDetail(), Score: op.GetScore(),
			CreatedAtMs: hlc.Physical(op.GetCreatedHlc()), UpdatedAtMs: hlc.Physical(op.GetUpdatedHlc()), Actor: op.GetActor(), Note: op.GetNote()}
		if op.GetAbortReason() != api.OpAbortReason_OP_ABORT_REASON_UNSPECIFIED {
			o.AbortReason = enumName(op.GetAbortReason(), "OP_ABORT_REASON_")
		}
		if o.SplitKeys == nil {
			o.SplitKeys = []string{}
		}
		a.Ops = append(a.Ops, o)
	}
	return a
}
