package fsm

import (
	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
)

// Conversions between the detector's tracked state and its replicated
// protobuf form. The detector's Reason and Origin share api's numbers
// (tested), so the enums convert by value. Every TrackedRoute carries an
// Explanation message (empty when the detector has none), so that
// proto -> detector -> proto is the identity on the encoded bytes.

func trackedToProto(ts []detector.Tracked) []*api.TrackedRoute {
	if len(ts) == 0 {
		return nil
	}
	out := make([]*api.TrackedRoute, len(ts))
	for i, t := range ts {
		out[i] = &api.TrackedRoute{
			RouteId:         t.RouteID,
			ConsecutiveOver: t.ConsecutiveOver,
			LastScore:       t.LastScore,
			CooldownUntilMs: t.CooldownUntilMs,
			RecentScores:    t.RecentScores,
			Explanation:     explanationToProto(t.Explanation),
		}
	}
	return out
}

func explanationToProto(e detector.Explanation) *api.Explanation {
	return &api.Explanation{
		Reason:             api.Reason(e.Reason),
		Origin:             api.SplitOrigin(e.Origin),
		IsolationReason:    api.Reason(e.IsolationReason),
		AtMs:               e.AtMs,
		FirstAtMs:          e.FirstAtMs,
		Repeats:            e.Repeats,
		Score:              e.Score,
		ConsecutiveOver:    e.ConsecutiveOver,
		CooldownLeftMs:     e.CooldownLeftMs,
		SplitKeys:          e.SplitKeys,
		HotKey:             e.HotKey,
		HotKeyLowerPerMin:  e.HotKeyLowerPerMin,
		HotKeyUpperPerMin:  e.HotKeyUpperPerMin,
		HotKeyShareBp:      e.HotKeyShareBP,
		MedianBucket:       e.MedianBucket,
		OpId:               e.OpID,
		ProjectedRoutes:    e.ProjectedRoutes,
		LeftShareBp:        e.LeftShareBP,
		RightShareBp:       e.RightShareBP,
		BucketShareBp:      e.BucketShareBP,
		HotKeyUpperShareBp: e.HotKeyUpperShareBP,
		SampleRate:         e.SampleRate,
		Floor:              e.Floor,
		Threshold:          e.Threshold,
		CandidateWindows:   e.CandidateWindows,
		HoldBandBp:         e.HoldBandBP,
		SamplePoints:       e.SamplePoints,
		SplitEvidence:      api.SplitEvidence(e.Evidence),
		LeftShareLoBp:      e.LeftShareLoBP,
		LeftShareHiBp:      e.LeftShareHiBP,
		RightShareLoBp:     e.RightShareLoBP,
		RightShareHiBp:     e.RightShareHiBP,
		KnownKeys:          e.KnownKeys,
	}
}

func trackedFromProto(ps []*api.TrackedRoute) []detector.Tracked {
	out := make([]detector.Tracked, len(ps))
	for i, p := range ps {
		e := p.GetExplanation()
		out[i] = detector.Tracked{
			RouteID:         p.GetRouteId(),
			ConsecutiveOver: p.GetConsecutiveOver(),
			LastScore:       p.GetLastScore(),
			CooldownUntilMs: p.GetCooldownUntilMs(),
			RecentScores:    p.GetRecentScores(),
			Explanation: detector.Explanation{
				Reason:             detector.Reason(e.GetReason()),
				Origin:             detector.Origin(e.GetOrigin()),
				IsolationReason:    detector.Reason(e.GetIsolationReason()),
				AtMs:               e.GetAtMs(),
				FirstAtMs:          e.GetFirstAtMs(),
				Repeats:            e.GetRepeats(),
				Score:              e.GetScore(),
				ConsecutiveOver:    e.GetConsecutiveOver(),
				CooldownLeftMs:     e.GetCooldownLeftMs(),
				SplitKeys:          e.GetSplitKeys(),
				HotKey:             e.GetHotKey(),
				HotKeyLowerPerMin:  e.GetHotKeyLowerPerMin(),
				HotKeyUpperPerMin:  e.GetHotKeyUpperPerMin(),
				HotKeyShareBP:      e.GetHotKeyShareBp(),
				MedianBucket:       e.GetMedianBucket(),
				OpID:               e.GetOpId(),
				ProjectedRoutes:    e.GetProjectedRoutes(),
				LeftShareBP:        e.GetLeftShareBp(),
				RightShareBP:       e.GetRightShareBp(),
				BucketShareBP:      e.GetBucketShareBp(),
				HotKeyUpperShareBP: e.GetHotKeyUpperShareBp(),
				SampleRate:         e.GetSampleRate(),
				Floor:              e.GetFloor(),
				Threshold:          e.GetThreshold(),
				CandidateWindows:   e.GetCandidateWindows(),
				HoldBandBP:         e.GetHoldBandBp(),
				SamplePoints:       e.GetSamplePoints(),
				Evidence:           detector.Evidence(e.GetSplitEvidence()),
				LeftShareLoBP:      e.GetLeftShareLoBp(),
				LeftShareHiBP:      e.GetLeftShareHiBp(),
				RightShareLoBP:     e.GetRightShareLoBp(),
				RightShareHiBP:     e.GetRightShareHiBp(),
				KnownKeys:          e.GetKnownKeys(),
			},
		}
	}
	return out
}
