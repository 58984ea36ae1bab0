package detector

import "math/bits"

// The detector's numbers are exact integers. Counts are uint64 and weights
// uint32, so a weighted load needs 97 bits and a weighted load per minute
// (×60000) 113 bits before the division: every product is carried in 128
// bits and only the final quotient saturates to uint64. Comparisons against
// a saturated value stay correct because every threshold is itself a uint64.

// u128 is an unsigned 128-bit integer.
type u128 struct{ hi, lo uint64 }

func mul64(a, b uint64) u128 {
	hi, lo := bits.Mul64(a, b)
	return u128{hi, lo}
}

// add returns x+y. Callers keep both below 2^127 (see the bounds above), so
// the sum cannot wrap.
func (x u128) add(y u128) u128 {
	lo, c := bits.Add64(x.lo, y.lo, 0)
	hi, _ := bits.Add64(x.hi, y.hi, c)
	return u128{hi, lo}
}

// mulSmall returns x·m for x·m < 2^128 (callers bound x to 113 bits and m
// to 15, or x to 97 bits and m to 16).
func (x u128) mulSmall(m uint64) u128 {
	hi, lo := bits.Mul64(x.lo, m)
	return u128{x.hi*m + hi, lo}
}

func (x u128) isZero() bool { return x.hi == 0 && x.lo == 0 }

func (x u128) cmp(y u128) int {
	switch {
	case x.hi != y.hi:
		if x.hi < y.hi {
			return -1
		}
		return 1
	case x.lo < y.lo:
		return -1
	case x.lo > y.lo:
		return 1
	}
	return 0
}

// divSat returns floor(x/d) for d > 0, saturated at the largest uint64.
func (x u128) divSat(d uint64) uint64 {
	if x.hi >= d {
		return ^uint64(0)
	}
	q, _ := bits.Div64(x.hi, x.lo, d)
	return q
}

// weighted is writes·ww + reads·wr, the weighted operations of a row.
func weighted(reads, writes uint64, cfg Config) u128 {
	return mul64(writes, uint64(cfg.WriteWeight)).add(mul64(reads, uint64(cfg.ReadWeight)))
}

// Score is a route's per-column score (SPEC §6.1): its weighted operations
// per minute, (writes·ww + reads·wr)·60000/durMs, floored and saturating at
// the largest uint64. The product is carried in 128 bits, so only the
// quotient saturates. durMs must be positive. It is the one definition of
// the score: the detector judges hysteresis by it and the leader's column
// aggregator ranks the rows it keeps by it, so both agree on every row.
func Score(reads, writes uint64, cfg Config, durMs uint64) uint64 {
	return perMinute(weighted(reads, writes, cfg), durMs)
}

// perMinute scales a weighted count observed over durMs (> 0) to weighted
// operations per minute: x·60000/durMs, floored, saturating.
func perMinute(x u128, durMs uint64) uint64 {
	return x.mulSmall(msPerMinute).divSat(durMs)
}

const (
	msPerMinute = 60_000
	fullShareBP = 10_000
)

// shareBP is floor(part·10000/total) in basis points, capped at 10000 (a
// part above the total is inconsistent evidence; it counts as all of it).
// An empty total gives 0 for an empty part and 10000 otherwise.
func shareBP(part uint64, total u128) uint32 {
	if (u128{0, part}).cmp(total) >= 0 {
		if total.isZero() && part == 0 {
			return 0
		}
		return fullShareBP
	}
	// part < total, so the share is below 10000: the largest s with
	// total·s <= part·10000, by bisection (total·s stays below 2^111).
	num := mul64(part, fullShareBP)
	lo, hi := uint64(0), uint64(fullShareBP-1)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if total.mulSmall(mid).cmp(num) <= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return uint32(lo)
}

func addSat32(a uint32) uint32 {
	if a == ^uint32(0) {
		return a
	}
	return a + 1
}
