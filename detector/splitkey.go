package detector

import (
	"bytes"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// splitChoice is where (and whether) one eligible route would be split,
// with the evidence behind it (docs/design.md#split-keys).
type splitChoice struct {
	// decline is set when no split is possible: no_split_key,
	// already_isolated or key_too_long.
	decline Reason
	origin  Origin
	keys    [][]byte // step order
	delta   int
	// isolation is why single-key isolation was not used (0 when it was;
	// the decline reason when it declined the route itself).
	isolation Reason

	hotKey            []byte
	hotLowerPerMin    uint64
	hotUpperPerMin    uint64
	hotShareBP        uint32
	medianBucket      uint32
	isolationDecision bool // isolation chose or declined; the median was not tried

	// RuleBalanceSplit numbers (balance.go).
	hotUpperShareBP           uint32
	hotFloorOK                bool
	leftShareBP, rightShareBP uint32
	bucketShareBP             uint32
	sampleRate                uint32
	samplePoints              uint32

	// RuleEvidenceCuts and RuleHeavyKeyIsolation numbers (evidence.go,
	// heavykey.go).
	evidence             Evidence
	leftLoBP, leftHiBP   uint32
	rightLoBP, rightHiBP uint32
	knownKeys            uint32
}

// explainBalance copies the RuleBalanceSplit numbers into x, and under
// RuleEvidenceCuts or RuleHeavyKeyIsolation theirs.
func (c *splitChoice) explainBalance(x *Explanation, rules Rules) {
	x.LeftShareBP, x.RightShareBP = c.leftShareBP, c.rightShareBP
	x.BucketShareBP, x.HotKeyUpperShareBP = c.bucketShareBP, c.hotUpperShareBP
	x.SampleRate, x.SamplePoints = c.sampleRate, c.samplePoints
	if rules.Has(RuleEvidenceCuts) || rules.Has(RuleHeavyKeyIsolation) {
		x.Evidence = c.evidence
		x.LeftShareLoBP, x.LeftShareHiBP = c.leftLoBP, c.leftHiBP
		x.RightShareLoBP, x.RightShareHiBP = c.rightLoBP, c.rightHiBP
		x.KnownKeys = c.knownKeys
	}
}

// chooseSplit picks the split key of an eligible route from its row of
// the column (durMs long): (a) single-key isolation from the top-K, else
// (b) the sub-bucket median, else (c) decline. Never a blind midpoint.
func chooseSplit(cfg Config, r *catalog.RouteDescriptor, row *Row, durMs uint64, rules Rules) splitChoice {
	var c splitChoice
	c.isolation = isolate(cfg, r, row, durMs, &c, rules)
	if c.isolationDecision {
		return c
	}
	median(r, row, &c)
	return c
}

// isolate tries (a). It returns why isolation does not apply, so the caller
// falls through to the median (or balance); or, with c.isolationDecision
// set, 0 for a plan of one or two boundaries and the reason of a decline.
// Under RuleLowerBoundIsolation the share and floor tests use the lower
// confidence bound of the hot key's load (bound.go), and the share is
// measured within the sample when the row says how much was sampled.
func isolate(cfg Config, r *catalog.RouteDescriptor, row *Row, durMs uint64, c *splitChoice, rules Rules) Reason {
	if row.TopKDegraded {
		return ReasonTopKDegraded
	}
	// H: the entry inside the route with the largest lower bound; ties go
	// to the smaller key so that the choice does not depend on entry order.
	// The best entry overall is nearly always inside the route, so only it
	// is checked against the bounds (each check reads a key's bytes, a cache
	// miss at scale); the filtered scan runs only when it is outside.
	h := bestKey(row.TopKeys, nil)
	if h >= 0 && !r.Contains(row.TopKeys[h].Key) {
		h = bestKey(row.TopKeys, r)
	}
	if h < 0 {
		return ReasonNoTopK
	}
	hot := &row.TopKeys[h]
	upper := max(hot.Upper, hot.Lower) // an upper below the lower bound is no bound
	lower := hot.Lower
	if rules.Has(RuleLowerBoundIsolation) {
		lower = lowerBound(hot.Lower, hot.Variance)
	}
	c.hotKey = bytes.Clone(hot.Key)
	c.hotLowerPerMin = perMinute(saturate.Wide(lower), durMs)
	c.hotUpperPerMin = perMinute(saturate.Wide(upper), durMs)
	var upperShare uint32
	if s := row.SampledTotal; rules.Has(RuleLowerBoundIsolation) && s > 0 && hot.Lower <= s {
		// The share within one sample: the key's sampled weight against
		// the row's, whose noise mostly cancels (shareLowerBound).
		c.hotShareBP = shareLowerBound(hot.Lower, hot.Variance, s, row.SampledVariance)
		upperShare = shareBP(upper, saturate.Wide(s))
	} else {
		total := weighted(row.Reads, row.Writes, cfg)
		c.hotShareBP = shareBP(lower, total)
		upperShare = shareBP(upper, total)
	}
	c.hotUpperShareBP = upperShare // read only by the balance rule

	shareOK := c.hotShareBP >= cfg.TopKeyShareBP
	floorOK := c.hotLowerPerMin >= cfg.TopKeyAbsoluteFloor
	c.hotFloorOK = floorOK
	if !shareOK || !floorOK {
		switch {
		case upperShare >= cfg.TopKeyShareBP && c.hotUpperPerMin >= cfg.TopKeyAbsoluteFloor:
			return ReasonTopKErrorBound
		case !shareOK:
			return ReasonTopKShare
		default:
			return ReasonAbsoluteFloor
		}
	}
	c.isolationDecision = true
	return isolationKeys(r, hot.Key, c)
}

// isolationKeys plans the isolation of key in r: [H, H·0x00) as one or two
// boundaries, or a decline (already_isolated, key_too_long). It returns the
// decline reason, 0 for a plan.
func isolationKeys(r *catalog.RouteDescriptor, key []byte, c *splitChoice) Reason {
	// H·0x00 is the immediate successor of H: [H, H·0x00) holds H alone.
	succ := make([]byte, len(key)+1)
	copy(succ, key)
	atStart := bytes.Equal(key, r.Start)
	// H < end, so H·0x00 >= end only when end is exactly H·0x00.
	atEnd := !r.Unbounded() && bytes.Compare(succ, r.End) >= 0
	switch {
	case atStart && atEnd:
		c.decline = ReasonAlreadyIsolated
		return c.decline
	case atStart:
		c.origin, c.keys, c.delta = OriginIsolationSingleLowerEdge, [][]byte{succ}, 1
	case atEnd:
		c.origin, c.keys, c.delta = OriginIsolationSingleUpperEdge, [][]byte{c.hotKey}, 1
	default:
		c.origin, c.keys, c.delta = OriginIsolationCompound, [][]byte{c.hotKey, succ}, 2
	}
	for _, k := range c.keys {
		if len(k) > catalog.MaxBoundaryLen {
			c.decline = ReasonKeyTooLong
			c.origin, c.keys, c.delta = OriginUnspecified, nil, 0
			return c.decline
		}
	}
	return 0
}

// bestKey returns the index of the entry with the largest Lower (ties: the
// smaller key) among those inside r, or among all when r is nil; -1 if none.
func bestKey(es []KeyEstimate, r *catalog.RouteDescriptor) int {
	h := -1
	for i := range es {
		e := &es[i]
		if r != nil && !r.Contains(e.Key) {
			continue // evidence for some other route: not ours to act on
		}
		if h < 0 || e.Lower > es[h].Lower || (e.Lower == es[h].Lower && bytes.Compare(e.Key, es[h].Key) < 0) {
			h = i
		}
	}
	return h
}

// median tries (b): on the layout the reporters used, the bucket where the
// cumulative load reaches half of the total; its upper boundary, or its
// lower one when the upper is the route's end. A row whose bucket count is
// not the layout's effective k was built on another layout: no evidence.
func median(r *catalog.RouteDescriptor, row *Row, c *splitChoice) {
	n := len(row.Buckets)
	if n < 2 {
		c.decline = ReasonNoSplitKey // no buckets, or one: nothing inside to choose
		return
	}
	l := catalog.NewLayout(r.Start, r.End, n)
	if l.K() != n {
		c.decline = ReasonNoSplitKey
		return
	}
	var total saturate.U128
	for _, b := range row.Buckets {
		total = total.Add(saturate.Wide(b))
	}
	if total.IsZero() {
		c.decline = ReasonNoSplitKey
		return
	}
	var cum saturate.U128
	i := 0
	for ; i < n; i++ {
		cum = cum.Add(saturate.Wide(row.Buckets[i]))
		if cum.Scale(2).Cmp(total) >= 0 {
			break
		}
	}
	// i < n: the running sum reaches the total at the last bucket at the
	// latest. Lower(i) for 0 < i < K lies strictly inside the route.
	c.medianBucket = uint32(i)
	var key []byte
	if i+1 < n {
		key = l.Lower(i + 1)
	} else {
		key = l.Lower(i)
	}
	if len(key) > catalog.MaxBoundaryLen {
		// A long common prefix of start and end plus the 8-byte window.
		c.decline = ReasonKeyTooLong
		return
	}
	c.origin, c.keys, c.delta = OriginSubBucketMedian, [][]byte{key}, 1
}
