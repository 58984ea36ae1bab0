package detector

import (
	"bytes"
	"cmp"
	"math/bits"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// The RuleEvidenceCuts cut (docs/design.md "Split decisions at cluster
// version 3"). It refines the RuleBalanceSplit cut (balance.go) in three
// ways: it weighs each kind of evidence by what it is worth, it says how
// sure it is, and it cuts between a few keys whose loads are known.
//
// Evidence items, in key order, each in the bucket of the route's layout
// it falls into:
//
//   - a known key: a top-K key inside the route whose Space-Saving error is
//     at most an eighth of its lower estimate. Its evidence weight is that
//     lower estimate; its variance the leader's sum of scaled Poisson
//     counts times the finite-population factor (rate−1)/rate — at sample
//     rate 1 every operation was counted, so the count is exact — plus its
//     Space-Saving error squared (the error counted as one more standard
//     deviation);
//   - a sampled key that is not a known key, its weight the leader's, its
//     variance its weight squared (a merged sample counted as one draw:
//     it errs wide);
//   - a loaded bucket no item fell into, as an interval no cut enters.
//
// With RulePooledEvidence the keys' weights and variances are summed over
// the route's last counted columns (pool.go); bucket loads stay this
// column's.
//
// A bucket's exact load is spread over its items in proportion to their
// weights. A cut between two buckets has exact side shares (bucket
// loads); a cut inside a bucket moves the fraction f = X_L/X of that
// bucket's evidence weight X to the left, a ratio within one sample whose
// noise partly cancels: by the delta method sd(f) = √(X_R²·V_L + X_L²·V_R)/X²,
// and the left side's share has sd(f)·B/total for the bucket's exact load
// B. Each side's interval is the point estimate ± z·sd (z = 2.326: each
// lower bound is a one-sided 99% bound).
//
// The cut chosen is the one whose smaller lower bound is largest (then the
// more balanced, then the first): it prefers exact cuts over estimated
// ones of the same balance, and it is made only when both lower bounds
// reach MinSideShareBP. A cut balanced by its point estimate whose interval
// still admits a side below that is declined cut_uncertain; none balanced
// at all, no_split_key; no evidence of where the load lies (no bucket
// counts of this route's layout, no key, no sample inside it: the leader
// capped the column's evidence) is declined no_evidence. Never a blind
// midpoint.
//
// The key: at a bucket boundary, the shortest key between the buckets
// (exact shares); between two known keys, the heavier one at the edge of
// its child — the right key itself, or the left key's successor key·0x00 —
// so that isolating it later costs one split, not two; next to one known
// key, that key at the edge; between two sampled keys, their shortest
// separator.

// knownKeyErrorDiv: a top-K key is known when its Space-Saving error is
// at most 1/knownKeyErrorDiv of its lower estimate.
const knownKeyErrorDiv = 8

// evItem is one evidence item: a key (lo), or a loaded bucket without
// items (lo nil), which a cut never enters.
type evItem struct {
	lo     []byte
	bucket int
	x, v   uint64 // evidence weight and its variance
	known  bool   // a top-K key of known load
	pooled bool   // from an earlier column (withPool's bookkeeping)
}

// evidenceSet is a row's evidence for one route, laid out.
type evidenceSet struct {
	items  []evItem
	layout catalog.Layout
	exact  bool            // buckets are the route layout's exact loads
	loads  []uint64        // per bucket (one virtual bucket when !exact)
	pre    []saturate.U128 // pre[j] = Σ loads[:j]
	total  saturate.U128
	known  uint32
	sample uint32
	// cumX[i], cumV[i]: the items' weights and variances summed over
	// items[:i].
	cumX, cumV []saturate.U128
	// first[i]: the index of the first item of items[i]'s bucket.
	first []int
}

// cut is one evaluated gap, after items[gap]: the point shares and
// intervals in basis points, and what placed it.
type cut struct {
	gap                              int
	left, right                      uint32
	leftLo, leftHi, rightLo, rightHi uint32
	evidence                         Evidence
}

// score is what cuts are ranked by: the smaller of the two lower bounds.
func (c cut) score() uint32 { return min(c.leftLo, c.rightLo) }

// balance is the smaller point share.
func (c cut) balance() uint32 { return min(c.left, c.right) }

// better reports whether c ranks above d (see the file comment).
func (c cut) better(d cut) bool {
	if c.score() != d.score() {
		return c.score() > d.score()
	}
	return c.balance() > d.balance()
}

// evidenceCut is the RuleEvidenceCuts cut of row for route r, its keys
// pooled with pool's (nil without RulePooledEvidence): it fills c with the
// plan or the decline, and the numbers either way.
func evidenceCut(cfg Config, r *catalog.RouteDescriptor, row *Row, pool []PooledKey, c *splitChoice) {
	ev := newEvidence(cfg, r, row, pool)
	c.samplePoints, c.knownKeys = ev.sample, ev.known
	if ev.sample == 0 && ev.known == 0 && !ev.exact {
		c.decline = ReasonNoEvidence
		return
	}
	if ev.total.IsZero() || len(ev.items) < 2 {
		c.decline = ReasonNoSplitKey
		return
	}
	best, balanced := cut{gap: -1}, false
	for m := 0; m+1 < len(ev.items); m++ {
		k := ev.evaluate(m)
		balanced = balanced || k.balance() >= MinSideShareBP
		if best.gap < 0 || k.better(best) {
			best = k
		}
	}
	a := &ev.items[best.gap]
	c.leftShareBP, c.rightShareBP = best.left, best.right
	c.leftLoBP, c.leftHiBP, c.rightLoBP, c.rightHiBP = best.leftLo, best.leftHi, best.rightLo, best.rightHi
	c.evidence = best.evidence
	c.medianBucket = uint32(a.bucket)
	c.bucketShareBP = shareOf(saturate.Wide(ev.loads[a.bucket]), ev.total)
	switch {
	case best.score() >= MinSideShareBP:
	case balanced:
		c.decline = ReasonCutUncertain
		return
	default:
		c.decline = ReasonNoSplitKey
		return
	}
	key := ev.key(best.gap)
	if len(key) > catalog.MaxBoundaryLen {
		c.decline = ReasonKeyTooLong
		return
	}
	c.origin, c.keys, c.delta = OriginBalance, [][]byte{bytes.Clone(key)}, 1
}

// newEvidence lays out row's evidence for route r (see the file comment),
// with the keys of pool (RulePooledEvidence, pool.go) added to the row's.
func newEvidence(cfg Config, r *catalog.RouteDescriptor, row *Row, pool []PooledKey) *evidenceSet {
	ev := &evidenceSet{}
	n := len(row.Buckets)
	ev.layout = catalog.NewLayout(r.Start, r.End, max(n, 1))
	ev.exact = n > 0 && ev.layout.K() == n
	points := withPool(columnPoints(r, row), pool, r)
	for _, p := range points {
		if p.known {
			ev.known++
		} else {
			ev.sample++
		}
	}
	if ev.exact {
		ev.loads = row.Buckets
	} else {
		// One virtual bucket: the row's exact load, else the evidence's.
		w := weighted(row.Reads, row.Writes, cfg)
		var x saturate.U128
		for _, p := range points {
			x = x.Add(saturate.Wide(p.x))
		}
		if w.IsZero() {
			w = x
		}
		if w.Hi != 0 {
			w = saturate.Wide(^uint64(0))
		}
		ev.loads = []uint64{w.Lo}
	}
	ev.pre = make([]saturate.U128, len(ev.loads)+1)
	for j, b := range ev.loads {
		ev.pre[j+1] = ev.pre[j].Add(saturate.Wide(b))
	}
	ev.total = ev.pre[len(ev.loads)]
	ev.items = make([]evItem, 0, len(points)+len(ev.loads))
	i := 0
	for j, b := range ev.loads {
		start := len(ev.items)
		for ; i < len(points); i++ {
			bj := 0
			if ev.exact {
				bj = ev.layout.Bucket(points[i].lo)
			}
			if bj != j {
				break
			}
			if b != 0 { // an item in an empty bucket is stale: it carries nothing
				points[i].bucket = j
				ev.items = append(ev.items, points[i])
			}
		}
		if b != 0 && len(ev.items) == start {
			ev.items = append(ev.items, evItem{bucket: j})
		}
	}
	ev.cumX = make([]saturate.U128, len(ev.items)+1)
	ev.cumV = make([]saturate.U128, len(ev.items)+1)
	ev.first = make([]int, len(ev.items))
	for i, it := range ev.items {
		ev.cumX[i+1] = ev.cumX[i].Add(saturate.Wide(it.x))
		ev.cumV[i+1] = ev.cumV[i].Add(saturate.Wide(it.v))
		if i > 0 && ev.items[i-1].bucket == it.bucket {
			ev.first[i] = ev.first[i-1]
		} else {
			ev.first[i] = i
		}
	}
	return ev
}

// bucketEnd is one past the last item of items[i]'s bucket.
func (ev *evidenceSet) bucketEnd(i int) int {
	b := ev.items[i].bucket
	for i < len(ev.items) && ev.items[i].bucket == b {
		i++
	}
	return i
}

// knownKeys are row's top-K keys inside r whose loads are known (see the
// file comment), none when the sketch was degraded.
func knownKeys(r *catalog.RouteDescriptor, row *Row) []evItem {
	if row.TopKDegraded {
		return nil
	}
	var out []evItem
	for _, k := range row.TopKeys {
		e := max(k.Upper, k.Lower) - k.Lower
		if k.Lower == 0 || e > k.Lower/knownKeyErrorDiv || !r.Contains(k.Key) {
			continue
		}
		v := saturate.Add(finitePopulation(k.Variance, row.SampleRate), saturate.Mul(e, e))
		out = append(out, evItem{lo: k.Key, x: k.Lower, v: v, known: true})
	}
	// One entry per key, whatever the order (the leader sends none twice):
	// the largest estimate, then the largest variance.
	slices.SortFunc(out, func(a, b evItem) int {
		if c := bytes.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		if c := cmp.Compare(b.x, a.x); c != 0 {
			return c
		}
		return cmp.Compare(b.v, a.v)
	})
	return slices.CompactFunc(out, func(a, b evItem) bool { return bytes.Equal(a.lo, b.lo) })
}

// sampledKeys are row's sampled keys inside r, duplicates summed.
func sampledKeys(r *catalog.RouteDescriptor, row *Row) []evItem {
	var out []evItem
	for _, s := range row.Samples {
		if s.Weight > 0 && r.Contains(s.Key) {
			out = append(out, evItem{lo: s.Key, x: s.Weight, v: saturate.Mul(s.Weight, s.Weight)})
		}
	}
	slices.SortStableFunc(out, func(a, b evItem) int { return bytes.Compare(a.lo, b.lo) })
	merged := out[:0]
	for _, s := range out {
		if n := len(merged); n > 0 && bytes.Equal(merged[n-1].lo, s.lo) {
			merged[n-1].x = saturate.Add(merged[n-1].x, s.x)
			merged[n-1].v = saturate.Add(merged[n-1].v, s.v)
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

func compareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// evaluate measures the cut after items[m].
func (ev *evidenceSet) evaluate(m int) cut {
	a, b := &ev.items[m], &ev.items[m+1]
	k := cut{gap: m}
	var left saturate.U128
	var half uint32
	if a.bucket != b.bucket {
		// Between buckets: exact.
		left = ev.pre[a.bucket+1]
		k.evidence = EvidenceBuckets
	} else {
		j, f, e := a.bucket, ev.first[m], ev.bucketEnd(m+1)
		xl, vl := ev.cumX[m+1].Sub(ev.cumX[f]), ev.cumV[m+1].Sub(ev.cumV[f])
		xr, vr := ev.cumX[e].Sub(ev.cumX[m+1]), ev.cumV[e].Sub(ev.cumV[m+1])
		l, r, sl, sr := scaleDown(xl, xr, vl, vr)
		left = ev.pre[j].Add(saturate.Wide(mulDivSat(ev.loads[j], l, saturate.Wide(l+r))))
		// The fraction's sd, scaled by the bucket's share of the route.
		if sd := ratioSdBP(l, r, sl, sr); sd != 0 {
			sdRoute := mulDivSat(sd, ev.loads[j], ev.total) + 1
			half = uint32(min((sdRoute*ConfidenceZMilli+999)/1000, fullShareBP))
		}
		k.evidence = EvidenceSamples
		if a.known && b.known {
			k.evidence = EvidenceTopKeys
		}
	}
	k.left = shareOf(left, ev.total)
	k.right = fullShareBP - k.left
	k.leftLo, k.leftHi = k.left-min(k.left, half), min(k.left+half, fullShareBP)
	k.rightLo, k.rightHi = fullShareBP-k.leftHi, fullShareBP-k.leftLo
	return k
}

// key is the split key of the cut after items[m] (see the file comment).
func (ev *evidenceSet) key(m int) []byte {
	a, b := &ev.items[m], &ev.items[m+1]
	if a.bucket != b.bucket {
		return catalog.ShortestBetween(ev.layout.Lower(a.bucket+1), ev.layout.Lower(b.bucket))
	}
	switch {
	case b.known && (!a.known || b.x >= a.x):
		return b.lo
	case a.known && len(a.lo) < catalog.MaxBoundaryLen:
		return append(bytes.Clone(a.lo), 0)
	}
	return catalog.ShortestSeparator(a.lo, b.lo)
}

// finitePopulation scales the variance of a count sampled one in rate by
// (rate−1)/rate: the leader's Poisson variance counts each sampled event
// as rate²·w² of variance, but a one-in-rate draw has rate·(rate−1)·w²,
// and none at rate 1, where every operation was counted.
func finitePopulation(v uint64, rate uint32) uint64 {
	if rate == 0 {
		return v // unknown rate: as the leader says
	}
	return mulDivSat(v, uint64(rate-1), saturate.Wide(uint64(rate)))
}

// scaleDown brings the two sides' evidence weights into 62 bits (so their
// sum fits in 63), and their variances by the square of the same factor:
// the ratio and its sd do not change.
func scaleDown(xl, xr, vl, vr saturate.U128) (l, r, sl, sr uint64) {
	var s uint
	for t := xl.Add(xr); t.Hi != 0 || t.Lo>>62 != 0; t = t.Shr(1) {
		s++
	}
	return xl.Shr(s).Lo, xr.Shr(s).Lo, vl.Shr(2 * s).Uint64(), vr.Shr(2 * s).Uint64()
}

// ratioSdBP is the standard deviation, in basis points rounded up, of the
// fraction l/(l+r) of two independent estimates with variances vl and vr:
// √(r²·vl + l²·vr)/(l+r)² by the delta method. l+r < 2^63.
func ratioSdBP(l, r, vl, vr uint64) uint64 {
	x := l + r
	if x == 0 {
		return fullShareBP
	}
	// 10000·r·√vl/x² and 10000·l·√vr/x², each rounded up (products below
	// 2^94·2^14 = 2^108), capped so that their squares add in 64 bits.
	term := func(w, v uint64) uint64 {
		if w == 0 || v == 0 {
			return 0
		}
		// √v to 32 significant bits: √(v·4^s) = √v·2^s, rounded up.
		sh := (64 - bits.Len64(v)) / 2
		p := saturate.Mul64(w, ceilSqrt(v<<(2*sh))) // below 2^62·2^32
		q := p.Scale(fullShareBP).Div(x).Div(x).Shr(uint(sh))
		if q.Hi != 0 || q.Lo >= 1<<31 {
			return 1 << 31
		}
		return q.Lo + 1
	}
	a, b := term(r, vl), term(l, vr)
	return ceilSqrt(a*a + b*b)
}
