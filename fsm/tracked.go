package fsm

import (
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
)

// Conversions between the detector's tracked state and its replicated
// protobuf form. The detector's Reason and Origin share api's numbers
// (tested), so the enums convert by value. Every TrackedRoute carries an
// Explanation message (empty when the detector has none), so that
// proto -> detector -> proto is the identity on the encoded bytes. The
// merge explanation (cluster version 3) is present exactly when it has a
// reason (restore refuses one without), and the pooled evidence (cluster
// version 3) only when there is some, so a version 2 state encodes as
// before.

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
		if t.Merge.Reason != detector.ReasonUnspecified {
			out[i].MergeExplanation = explanationToProto(t.Merge)
		}
		out[i].PooledEvidence = poolToProto(t.Pool)
	}
	return out
}

// poolToProto converts a tracked entry's pooled evidence (nil when empty:
// a version 2 state encodes as a version 2 build encodes it).
func poolToProto(pool []detector.PooledKey) []*api.PooledKey {
	if len(pool) == 0 {
		return nil
	}
	out := make([]*api.PooledKey, len(pool))
	for i, p := range pool {
		out[i] = &api.PooledKey{Key: p.Key, Weight: p.Weight, Variance: p.Variance, Known: p.Known, Age: p.Age}
	}
	return out
}

func poolFromProto(ps []*api.PooledKey) []detector.PooledKey {
	if len(ps) == 0 {
		return nil
	}
	out := make([]detector.PooledKey, len(ps))
	for i, p := range ps {
		out[i] = detector.PooledKey{Key: p.GetKey(), Weight: p.GetWeight(), Variance: p.GetVariance(), Known: p.GetKnown(), Age: p.GetAge()}
	}
	return out
}

func explanationToProto(e detector.Explanation) *api.Explanation {
	return &api.Explanation{
		Reason:              api.Reason(e.Reason),
		Origin:              api.SplitOrigin(e.Origin),
		IsolationReason:     api.Reason(e.IsolationReason),
		AtMs:                e.AtMs,
		FirstAtMs:           e.FirstAtMs,
		Repeats:             e.Repeats,
		Score:               e.Score,
		ConsecutiveOver:     e.ConsecutiveOver,
		CooldownLeftMs:      e.CooldownLeftMs,
		SplitKeys:           e.SplitKeys,
		HotKey:              e.HotKey,
		HotKeyLowerPerMin:   e.HotKeyLowerPerMin,
		HotKeyUpperPerMin:   e.HotKeyUpperPerMin,
		HotKeyShareBp:       e.HotKeyShareBP,
		MedianBucket:        e.MedianBucket,
		OpId:                e.OpID,
		ProjectedRoutes:     e.ProjectedRoutes,
		LeftShareBp:         e.LeftShareBP,
		RightShareBp:        e.RightShareBP,
		BucketShareBp:       e.BucketShareBP,
		HotKeyUpperShareBp:  e.HotKeyUpperShareBP,
		SampleRate:          e.SampleRate,
		Floor:               e.Floor,
		Threshold:           e.Threshold,
		CandidateWindows:    e.CandidateWindows,
		HoldBandBp:          e.HoldBandBP,
		SamplePoints:        e.SamplePoints,
		MergePartnerRouteId: e.MergePartner,
		MergedEstimate:      e.MergedEstimate,
		MergeLimit:          e.MergeLimit,
		MergeThreshold:      e.MergeThreshold,
		ColdColumns:         e.ColdColumns,
		MergeWindows:        e.MergeWindows,
		MergeDelayLeftMs:    e.MergeDelayLeftMs,
		SplitEvidence:       api.SplitEvidence(e.Evidence),
		LeftShareLoBp:       e.LeftShareLoBP,
		LeftShareHiBp:       e.LeftShareHiBP,
		RightShareLoBp:      e.RightShareLoBP,
		RightShareHiBp:      e.RightShareHiBP,
		KnownKeys:           e.KnownKeys,
	}
}

func trackedFromProto(ps []*api.TrackedRoute) []detector.Tracked {
	out := make([]detector.Tracked, len(ps))
	for i, p := range ps {
		out[i] = detector.Tracked{
			RouteID:         p.GetRouteId(),
			ConsecutiveOver: p.GetConsecutiveOver(),
			LastScore:       p.GetLastScore(),
			CooldownUntilMs: p.GetCooldownUntilMs(),
			RecentScores:    p.GetRecentScores(),
			Explanation:     explanationFromProto(p.GetExplanation()),
			Merge:           explanationFromProto(p.GetMergeExplanation()),
			Pool:            poolFromProto(p.GetPooledEvidence()),
		}
	}
	return out
}

func explanationFromProto(e *api.Explanation) detector.Explanation {
	return detector.Explanation{
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
		MergePartner:       e.GetMergePartnerRouteId(),
		MergedEstimate:     e.GetMergedEstimate(),
		MergeLimit:         e.GetMergeLimit(),
		MergeThreshold:     e.GetMergeThreshold(),
		ColdColumns:        e.GetColdColumns(),
		MergeWindows:       e.GetMergeWindows(),
		MergeDelayLeftMs:   e.GetMergeDelayLeftMs(),
		Evidence:           detector.Evidence(e.GetSplitEvidence()),
		LeftShareLoBP:      e.GetLeftShareLoBp(),
		LeftShareHiBP:      e.GetLeftShareHiBp(),
		RightShareLoBP:     e.GetRightShareLoBp(),
		RightShareHiBP:     e.GetRightShareHiBp(),
		KnownKeys:          e.GetKnownKeys(),
	}
}

// coldToProto is the detector's cold state in its replicated form (nil
// when there is none, as at version 2).
func coldToProto(c detector.Cold) *api.ColdState {
	if c.RunColumns == 0 && len(c.Entries) == 0 && len(c.ScanCursor) == 0 {
		return nil
	}
	p := &api.ColdState{RunColumns: c.RunColumns, RecentStarts: c.RecentStarts, ScanCursor: c.ScanCursor}
	n := len(c.Entries)
	p.RouteIdDeltas, p.WarmColumns, p.Peaks = make([]uint64, n), make([]uint64, n), make([]uint64, n)
	p.PreviousPeaks, p.PeakEpochs = make([]uint64, n), make([]uint64, n)
	var prev uint64
	for i, e := range c.Entries {
		p.RouteIdDeltas[i] = e.RouteID - prev
		prev = e.RouteID
		p.WarmColumns[i], p.Peaks[i], p.PreviousPeaks[i], p.PeakEpochs[i] = e.WarmColumn, e.Peak, e.PreviousPeak, e.PeakEpoch
	}
	return p
}

// coldFromProto decodes a replicated cold state; detector.State.WithCold
// checks the rest.
func coldFromProto(p *api.ColdState) (detector.Cold, error) {
	c := detector.Cold{RunColumns: p.GetRunColumns(), RecentStarts: p.GetRecentStarts(), ScanCursor: p.GetScanCursor()}
	n := len(p.GetRouteIdDeltas())
	for _, l := range [][]uint64{p.GetWarmColumns(), p.GetPeaks(), p.GetPreviousPeaks(), p.GetPeakEpochs()} {
		if len(l) != n {
			return detector.Cold{}, fmt.Errorf("cold: %d route ids but a list of %d", n, len(l))
		}
	}
	var id uint64
	for i, d := range p.GetRouteIdDeltas() {
		if id+d < id {
			return detector.Cold{}, fmt.Errorf("cold: route_id_deltas[%d] overflows", i)
		}
		id += d
		c.Entries = append(c.Entries, detector.ColdEntry{RouteID: id, WarmColumn: p.WarmColumns[i], Peak: p.Peaks[i],
			PreviousPeak: p.PreviousPeaks[i], PeakEpoch: p.PeakEpochs[i]})
	}
	return c, nil
}
