package detector

import (
	"bytes"
	"math/bits"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
)

// The RuleBalanceSplit split key (SPEC §6.5, docs/design.md "Split keys"):
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
	weight u128
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
	if total.isZero() || len(items) < 2 {
		c.decline = ReasonNoSplitKey
		return
	}
	for _, it := range items {
		if it.sample {
			c.samplePoints++
		}
	}
	// best: the gap after items[best] with the largest smaller side.
	best, bestMin := -1, u128{}
	var left, bestLeft u128
	for m := 0; m+1 < len(items); m++ {
		left = left.add(items[m].weight)
		right := sub128(total, left)
		small := left
		if right.cmp(left) < 0 {
			small = right
		}
		if best < 0 || small.cmp(bestMin) > 0 {
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
func evidence(r *catalog.RouteDescriptor, row *Row) ([]balanceItem, u128) {
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
		var sw u128
		for _, s := range samples {
			sw = sw.add(u128{0, s.Weight})
		}
		items := make([]balanceItem, len(samples))
		for i, s := range samples {
			items[i] = balanceItem{lo: s.Key, weight: u128{0, s.Weight}, bucket: -1, sample: true}
		}
		return items, sw
	}
	// Each sample's bucket, and the sampled weight per bucket.
	bucketOf := make([]int, len(samples))
	sampled := make([]u128, n)
	for i, s := range samples {
		b := l.Bucket(s.Key)
		bucketOf[i] = b
		sampled[b] = sampled[b].add(u128{0, s.Weight})
	}
	var total u128
	items := make([]balanceItem, 0, len(samples)+n)
	i := 0
	for j := range n {
		bj := row.Buckets[j]
		total = total.add(u128{0, bj})
		if bj == 0 {
			for i < len(samples) && bucketOf[i] == j {
				i++ // a sample in an empty bucket: stale, it carries nothing
			}
			continue
		}
		if sampled[j].isZero() {
			items = append(items, balanceItem{lo: l.Lower(j), hiExcl: l.Lower(j + 1), weight: u128{0, bj}, bucket: j})
			continue
		}
		// Spread bj over the bucket's samples; the rounding remainder goes
		// to the last so the bucket sums exactly.
		var given u128
		for ; i < len(samples) && bucketOf[i] == j; i++ {
			w := mulDivSat(bj, samples[i].Weight, sampled[j])
			given = given.add(u128{0, w})
			items = append(items, balanceItem{lo: samples[i].Key, weight: u128{0, w}, bucket: j, sample: true})
		}
		if rest := sub128(u128{0, bj}, given); !rest.isZero() {
			items[len(items)-1].weight = items[len(items)-1].weight.add(rest)
		}
	}
	return items, total
}

// bucketLoad is row's load in bucket b (0 when b is not a bucket).
func bucketLoad(row *Row, b int) u128 {
	if b < 0 || b >= len(row.Buckets) {
		return u128{}
	}
	return u128{0, row.Buckets[b]}
}

// mulDivSat is floor(a·b/d) for b <= d (so the result is at most a).
func mulDivSat(a, b uint64, d u128) uint64 {
	if d.isZero() {
		return 0
	}
	p := mul64(a, b)
	if d.hi == 0 {
		return p.divSat(d.lo)
	}
	// d >= 2^64 > b: shift both down until d fits in 64 bits.
	for d.hi != 0 {
		p = u128{p.hi >> 1, p.lo>>1 | p.hi<<63}
		d = u128{d.hi >> 1, d.lo>>1 | d.hi<<63}
	}
	return p.divSat(d.lo)
}

// sub128 is x-y for y <= x.
func sub128(x, y u128) u128 {
	lo, b := bits.Sub64(x.lo, y.lo, 0)
	return u128{x.hi - y.hi - b, lo}
}

// shareOf is part/total in basis points, both 128-bit (part <= total).
func shareOf(part, total u128) uint32 {
	for total.hi != 0 {
		part = u128{part.hi >> 1, part.lo>>1 | part.hi<<63}
		total = u128{total.hi >> 1, total.lo>>1 | total.hi<<63}
	}
	if part.hi != 0 {
		return fullShareBP
	}
	return shareBP(part.lo, total)
}
