package detector

import (
	"bytes"
	"fmt"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Pooled evidence (RulePooledEvidence, docs/design.md "Cuts on pooled
// evidence").
//
// One column's key evidence is small: each reporter keeps 32 sampled
// operations of a route a column, and at a 1 s step a route may see a
// dozen. A cut placed inside a bucket on one column's sample alone has a
// side share whose sd is about six points (three reporters' 96 samples),
// so one recorded share in ten misses the true one by more than ten
// points. A route is split only after CandidateWindows consecutive counted
// columns, and the evidence of the earlier ones says the same thing about
// where its load lies: the tracked entry keeps the key evidence items of
// the route's previous PoolColumns−1 counted columns (each key's evidence
// weight and variance, and whether its load was known from the top-K
// counts, exactly as that column's evidence had them), and a cut weighs
// every key by the sum over the pooled columns and the current one.
//
// Bucket loads stay the current column's, exact: pooled weights only place
// a cut inside a bucket, where they enter as a ratio, so a column of the
// usual load counts like the current one and the sd of a cut's share
// shrinks by about √PoolColumns. Cuts between buckets do not change.
//
// The pool runs with the counter, over one load: a column with the
// route's row that leaves its counter above 0 (hot, or in the hold band
// holding it) adds its keys and ages the older ones; any other column —
// cold, after a gap, the route not active — empties it, and so does a
// SetConfig (weights may change). A column whose score differs from the
// previous column's by more than counting noise explains (sameLoad) starts
// afresh: the load changed — a hotspot moved in or out, or it oscillates —
// and evidence of another load would place this column's cut where that
// load balances, not this one. Measured (docs/benchmarks.md): pooling
// across score changes of a few percent cost oscillate 0.8 splits a run;
// gated at one sd it costs none. Traffic burstier than Poisson fails the
// gate more often and falls back to one column's evidence. A route's
// bounds never change (splits and merges make new
// routes), but keys outside the route are ignored all the same. Bounded:
// MaxPooledKeys keys, the newest column's first.

// PoolColumns is how many counted columns a cut's evidence spans at most:
// the current one and PoolColumns−1 before it (the default CandidateWindows).
const PoolColumns = 3

// MaxPooledKeys and MaxPooledKeyBytes bound a tracked entry's pool: keys
// past either are not kept (a column row holds at most 256 top keys and
// 256 sampled keys, fsm's limits). The byte bound keeps a snapshot frame
// of tracked entries (fsm: 1024 a frame, 64 MiB at most) far below its
// limit whatever the key lengths: 16 KiB of keys and about 15 KiB of
// encoding per entry, 31 MiB a frame. Typical keys (tens of bytes) reach
// the key bound first.
const (
	MaxPooledKeys     = 512
	MaxPooledKeyBytes = 16 << 10
)

// loadChangeSd: two consecutive columns' scores differing by more than
// loadChangeSd standard deviations of the difference that counting noise
// alone gives are different loads, not to be pooled.
const loadChangeSd = 1

// sameLoad reports whether the previous column's score prev and this
// column's score (of row, over durMs) are one load: their difference is
// within loadChangeSd·sd, the sd of a difference of two columns' Poisson
// counts at this column's counts, √(2·(ww²·writes + wr²·reads)), per minute.
func sameLoad(prev, score uint64, row *Row, cfg Config, durMs uint64) bool {
	ww, wr := uint64(cfg.WriteWeight), uint64(cfg.ReadWeight)
	v := saturate.Add(saturate.Mul(ww*ww, row.Writes), saturate.Mul(wr*wr, row.Reads))
	sd := ceilSqrt(saturate.Mul(2, v))
	tol := perMinute(saturate.Wide(saturate.Mul(sd, loadChangeSd)), max(durMs, 1))
	return max(prev, score)-min(prev, score) <= tol
}

// columnPoints are row's key evidence items inside r, in key order, one per
// key: the known keys, and the sampled keys that are not known keys (a
// sampled key that is also a known key is some of the same operations: the
// known key, sorted first, carries its load).
func columnPoints(r *catalog.RouteDescriptor, row *Row) []evItem {
	points := append(knownKeys(r, row), sampledKeys(r, row)...)
	slices.SortFunc(points, func(a, b evItem) int {
		if c := bytes.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		return compareBool(b.known, a.known)
	})
	return slices.CompactFunc(points, func(a, b evItem) bool { return bytes.Equal(a.lo, b.lo) })
}

// withPool adds the pooled keys inside r to the column's points (in key
// order, one per key): a key's weights and variances are summed over the
// columns, and it is known if any column knew its load. A key whose load
// this column knows exactly (a known key of variance 0: sample rate 1, no
// Space-Saving error) is not pooled: earlier columns can only move it away
// from this column's truth. It stands for its exact load in each of the n
// pooled columns (weight ×n, variance 0), so that it weighs as much
// against the pooled keys as it does in this column.
func withPool(points []evItem, pool []PooledKey, r *catalog.RouteDescriptor) []evItem {
	var ages [PoolColumns]bool
	all := slices.Clone(points)
	for _, p := range pool {
		if p.Age+1 < PoolColumns && r.Contains(p.Key) {
			ages[p.Age] = true
			all = append(all, evItem{lo: p.Key, x: p.Weight, v: p.Variance, known: p.Known, pooled: true})
		}
	}
	n := uint64(1)
	for _, a := range ages {
		if a {
			n++
		}
	}
	if n == 1 {
		return points
	}
	// This column's item of a key sorts first (points come before pool).
	slices.SortStableFunc(all, func(a, b evItem) int { return bytes.Compare(a.lo, b.lo) })
	out := all[:0]
	for _, it := range all {
		if k := len(out); k > 0 && bytes.Equal(out[k-1].lo, it.lo) {
			m := &out[k-1]
			if !(m.known && m.v == 0 && !m.pooled) {
				m.x, m.v, m.known = saturate.Add(m.x, it.x), saturate.Add(m.v, it.v), m.known || it.known
			}
			continue
		}
		if it.known && it.v == 0 && !it.pooled {
			it.x = saturate.Mul(it.x, n)
		}
		out = append(out, it)
	}
	for i := range out {
		out[i].pooled = false
	}
	return out
}

// nextPool is the pool a counted column leaves: its own points at age 0,
// then prev's keys one column older while they are within PoolColumns−1
// columns, up to MaxPooledKeys keys. The keys are copied into one buffer:
// the state does not hold on to the column's bytes.
func nextPool(points []evItem, prev []PooledKey) []PooledKey {
	n, size := 0, 0
	for _, p := range points {
		if n == MaxPooledKeys || size+len(p.lo) > MaxPooledKeyBytes {
			break
		}
		n, size = n+1, size+len(p.lo)
	}
	keep := 0
	for _, p := range prev {
		if n+keep == MaxPooledKeys || size+len(p.Key) > MaxPooledKeyBytes || p.Age+2 >= PoolColumns {
			break // prev is in age order: the rest is older
		}
		keep, size = keep+1, size+len(p.Key)
	}
	if n+keep == 0 {
		return nil
	}
	out := make([]PooledKey, 0, n+keep)
	buf := make([]byte, 0, size)
	for _, p := range points[:n] {
		buf = append(buf, p.lo...)
		out = append(out, PooledKey{Key: buf[len(buf)-len(p.lo) : len(buf) : len(buf)], Weight: p.x, Variance: p.v, Known: p.known})
	}
	for _, p := range prev[:keep] {
		buf = append(buf, p.Key...)
		out = append(out, PooledKey{Key: buf[len(buf)-len(p.Key) : len(buf) : len(buf)], Weight: p.Weight, Variance: p.Variance,
			Known: p.Known, Age: p.Age + 1})
	}
	return out
}

// checkPool checks a restored pool against what nextPool writes: at most
// MaxPooledKeys keys of MaxPooledKeyBytes bytes in all, each aged below
// PoolColumns−1, in (age, key) order with no key twice in one age.
func checkPool(pool []PooledKey) error {
	if len(pool) > MaxPooledKeys {
		return fmt.Errorf("%d keys above %d", len(pool), MaxPooledKeys)
	}
	size := 0
	for _, p := range pool {
		size += len(p.Key)
	}
	if size > MaxPooledKeyBytes {
		return fmt.Errorf("%d key bytes above %d", size, MaxPooledKeyBytes)
	}
	for i, p := range pool {
		switch {
		case p.Age+1 >= PoolColumns:
			return fmt.Errorf("[%d]: age %d, at most %d", i, p.Age, PoolColumns-2)
		case i > 0 && (p.Age < pool[i-1].Age || (p.Age == pool[i-1].Age && bytes.Compare(pool[i-1].Key, p.Key) >= 0)):
			return fmt.Errorf("[%d]: not after [%d] in (age, key) order", i, i-1)
		}
	}
	return nil
}
