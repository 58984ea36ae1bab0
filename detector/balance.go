package detector

import (
	"bytes"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// The RuleBalanceSplit split key (docs/design.md#split-keys, docs/design.md "Split keys"):
//
//  1. A route [H, H·0x00) holds one key: already_isolated by its shape,
//     whatever the evidence says.
//  2. Single-key isolation as in version 1 (with RuleLowerBoundIsolation
//     the share and floor tests use the lower confidence bound of the hot
//     key's load, bound.go, the share measured within the sample).
//  3. With RuleHeavyKeyIsolation, the heaviest key when its own load
//     clears the threshold at confidence (heavykey.go).
//  4. Otherwise the best-balanced cut of the evidence (below; with
//     RuleEvidenceCuts, evidence.go's). Never a blind midpoint: without
//     evidence on both sides, no_split_key.
//  5. If no cut is balanced enough because one key dominates — it clears
//     the floor at confidence and its upper estimate clears the share —
//     that key is isolated after all.
//
// The balance cut. The evidence is a list of items in key order, each with
// a weight (weighted operations of the column): every sampled key, with its
// bucket's exact load spread over the bucket's samples in proportion to
// their sampled weight; and every loaded bucket no sample fell into, as one
// interval [Lower(j), Lower(j+1)) that no cut may enter. Without bucket
// evidence the samples share the row's total. The cut goes into the gap
// between two consecutive items where the smaller side is largest; it must
// leave at least MinSideShareBP of the load on each side, else the route is
// declined (no_split_key). The key is the shortest key in the gap, so
// boundaries are short and readable.
//
// Looking inside a dominant bucket is what the samples are for: when all
// the load of a wide route sits in one sub-bucket (keys sharing a long
// prefix), bucket boundaries can only cut at that bucket's edges; the
// sampled keys place the cut among the real keys in one column.

// sampleKeysMin is how many sampled keys a cut among samples needs on
// the row at least: fewer say too little about where the load lies.
const sampleKeysMin = 4

// balanceItem is one item of the evidence, in key order. A sampled key is
// [key, key] (exclusive hi unset); a bucket without samples is
// [lo, hiExcl).
type balanceItem struct {
	lo     []byte
	hiExcl []byte // nil for a sampled key
	weight saturate.U128
	bucket int
	sample bool
}

// chooseBalancedSplit is chooseSplit under RuleBalanceSplit; pool is the
// route's pooled evidence (RulePooledEvidence; nil without it).
func chooseBalancedSplit(cfg Config, r *catalog.RouteDescriptor, row *Row, pool []PooledKey, durMs uint64, rules Rules) splitChoice {
	var c splitChoice
	c.sampleRate = row.SampleRate
	if catalog.IsSingleKey(r.Start, r.End) {
		c.decline, c.isolation, c.isolationDecision = ReasonAlreadyIsolated, ReasonAlreadyIsolated, true
		return c
	}
	c.isolation = isolate(cfg, r, row, durMs, &c, rules)
	if c.isolationDecision {
		return c
	}
	if rules.Has(RuleHeavyKeyIsolation) && heavyKey(cfg, r, row, durMs, &c) {
		return c
	}
	if rules.Has(RuleEvidenceCuts) {
		evidenceCut(cfg, r, row, pool, &c)
	} else {
		balance(r, row, cfg, &c)
	}
	if (c.decline == ReasonNoSplitKey || c.decline == ReasonCutUncertain) &&
		c.hotKey != nil && c.hotFloorOK && c.hotUpperShareBP >= cfg.TopKeyShareBP {
		// One key dominates: no cut leaves MinSideShareBP of the load on
		// each side, the key clears the floor at confidence and its upper
		// estimate clears the share. Its lower bound missed the share only
		// through sampling noise on a share that leaves the rest too thin
		// to balance: isolate it rather than wait for a lucky column.
		c.decline, c.isolationDecision = ReasonUnspecified, true
		c.evidence = EvidenceUnspecified // the shares stay: the best cut there was
		c.isolation = isolationKeys(r, c.hotKey, &c)
	}
	return c
}

// balance tries the best-balanced cut (step 3 above) and fills c with the
// plan or the decline, and the numbers either way.
func balance(r *catalog.RouteDescriptor, row *Row, cfg Config, c *splitChoice) {
	items, total := evidence(r, row)
	if total.IsZero() || len(items) < 2 {
		c.decline = ReasonNoSplitKey
		return
	}
	for _, it := range items {
		if it.sample {
			c.samplePoints++
		}
	}
	// best: the gap after items[best] with the largest smaller side.
	best, bestMin := -1, saturate.U128{}
	var left, bestLeft saturate.U128
	for m := 0; m+1 < len(items); m++ {
		left = left.Add(items[m].weight)
		right := total.Sub(left)
		small := left
		if right.Cmp(left) < 0 {
			small = right
		}
		if best < 0 || small.Cmp(bestMin) > 0 {
			best, bestMin, bestLeft = m, small, left
		}
	}
	c.leftShareBP = shareOf(bestLeft, total)
	c.rightShareBP = fullShareBP - c.leftShareBP
	it := items[best]
	c.medianBucket = uint32(max(it.bucket, 0))
	c.bucketShareBP = shareOf(bucketLoad(row, it.bucket), total)
	if c.leftShareBP < MinSideShareBP || c.rightShareBP < MinSideShareBP ||
		(c.samplePoints > 0 && c.samplePoints < sampleKeysMin && bothSamples(items, best)) {
		c.decline = ReasonNoSplitKey
		return
	}
	next := items[best+1]
	var key []byte
	if it.sample {
		key = catalog.ShortestSeparator(it.lo, next.lo)
	} else {
		key = catalog.ShortestBetween(it.hiExcl, next.lo)
	}
	if len(key) > catalog.MaxBoundaryLen {
		c.decline = ReasonKeyTooLong
		return
	}
	c.origin, c.keys, c.delta = OriginBalance, [][]byte{bytes.Clone(key)}, 1
}

// bothSamples reports whether the cut after items[m] falls between two
// sampled keys (it then rests on the sample alone).
func bothSamples(items []balanceItem, m int) bool {
	return items[m].sample && items[m+1].sample
}

// evidence builds the item list of row for route r (see the file comment)
// and the total it is measured against.
func evidence(r *catalog.RouteDescriptor, row *Row) ([]balanceItem, saturate.U128) {
	samples := make([]WeightedKey, 0, len(row.Samples))
	for _, s := range row.Samples {
		if s.Weight > 0 && r.Contains(s.Key) {
			samples = append(samples, s)
		}
	}
	slices.SortFunc(samples, func(a, b WeightedKey) int { return bytes.Compare(a.Key, b.Key) })
	samples = slices.CompactFunc(samples, func(a, b WeightedKey) bool { return bytes.Equal(a.Key, b.Key) })

	n := len(row.Buckets)
	l := catalog.NewLayout(r.Start, r.End, max(n, 1))
	if n == 0 || l.K() != n {
		// No bucket evidence: the samples share the row's total.
		var sw saturate.U128
		for _, s := range samples {
			sw = sw.Add(saturate.Wide(s.Weight))
		}
		items := make([]balanceItem, len(samples))
		for i, s := range samples {
			items[i] = balanceItem{lo: s.Key, weight: saturate.Wide(s.Weight), bucket: -1, sample: true}
		}
		return items, sw
	}
	// Each sample's bucket, and the sampled weight per bucket.
	bucketOf := make([]int, len(samples))
	sampled := make([]saturate.U128, n)
	for i, s := range samples {
		b := l.Bucket(s.Key)
		bucketOf[i] = b
		sampled[b] = sampled[b].Add(saturate.Wide(s.Weight))
	}
	var total saturate.U128
	items := make([]balanceItem, 0, len(samples)+n)
	i := 0
	for j := range n {
		bj := row.Buckets[j]
		total = total.Add(saturate.Wide(bj))
		if bj == 0 {
			for i < len(samples) && bucketOf[i] == j {
				i++ // a sample in an empty bucket: stale, it carries nothing
			}
			continue
		}
		if sampled[j].IsZero() {
			items = append(items, balanceItem{lo: l.Lower(j), hiExcl: l.Lower(j + 1), weight: saturate.Wide(bj), bucket: j})
			continue
		}
		// Spread bj over the bucket's samples; the rounding remainder goes
		// to the last so the bucket sums exactly.
		var given saturate.U128
		for ; i < len(samples) && bucketOf[i] == j; i++ {
			w := mulDivSat(bj, samples[i].Weight, sampled[j])
			given = given.Add(saturate.Wide(w))
			items = append(items, balanceItem{lo: samples[i].Key, weight: saturate.Wide(w), bucket: j, sample: true})
		}
		if rest := saturate.Wide(bj).Sub(given); !rest.IsZero() {
			items[len(items)-1].weight = items[len(items)-1].weight.Add(rest)
		}
	}
	return items, total
}

// bucketLoad is row's load in bucket b (0 when b is not a bucket).
func bucketLoad(row *Row, b int) saturate.U128 {
	if b < 0 || b >= len(row.Buckets) {
		return saturate.U128{}
	}
	return saturate.Wide(row.Buckets[b])
}

// mulDivSat is floor(a·b/d) for b <= d (so the result is at most a).
func mulDivSat(a, b uint64, d saturate.U128) uint64 {
	if d.IsZero() {
		return 0
	}
	p := saturate.Mul64(a, b)
	if d.Hi == 0 {
		return p.DivSat(d.Lo)
	}
	// d >= 2^64 > b: shift both down until d fits in 64 bits.
	for d.Hi != 0 {
		p, d = p.Shr(1), d.Shr(1)
	}
	return p.DivSat(d.Lo)
}

// shareOf is part/total in basis points, both 128-bit (part <= total).
func shareOf(part, total saturate.U128) uint32 {
	for total.Hi != 0 {
		part, total = part.Shr(1), total.Shr(1)
	}
	if part.Hi != 0 {
		return fullShareBP
	}
	return shareBP(part.Lo, total)
}
