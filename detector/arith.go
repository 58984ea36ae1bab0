package detector

import "github.com/hotsplit/hotsplit/internal/saturate"

// The detector's numbers are exact integers. Counts are uint64 and weights
// uint32, so a weighted load needs 97 bits and a weighted load per minute
// (×60000) 113 bits before the division: every product is carried in 128
// bits (saturate.U128, whose bound no caller reaches) and only the final
// quotient saturates to uint64. Comparisons against a saturated value stay
// correct because every threshold is itself a uint64.

// weighted is writes·ww + reads·wr, the weighted operations of a row.
func weighted(reads, writes uint64, cfg Config) saturate.U128 {
	return saturate.Mul64(writes, uint64(cfg.WriteWeight)).Add(saturate.Mul64(reads, uint64(cfg.ReadWeight)))
}

// Score is a route's per-column score (docs/design.md#scoring): its weighted operations
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
func perMinute(x saturate.U128, durMs uint64) uint64 {
	return x.Scale(msPerMinute).DivSat(durMs)
}

const (
	msPerMinute = 60_000
	fullShareBP = 10_000
)

// shareBP is floor(part·10000/total) in basis points, capped at 10000 (a
// part above the total is inconsistent evidence; it counts as all of it).
// An empty total gives 0 for an empty part and 10000 otherwise.
func shareBP(part uint64, total saturate.U128) uint32 {
	if (saturate.Wide(part)).Cmp(total) >= 0 {
		if total.IsZero() && part == 0 {
			return 0
		}
		return fullShareBP
	}
	// part < total, so the share is below 10000: the largest s with
	// total·s <= part·10000, by bisection (total·s stays below 2^111).
	num := saturate.Mul64(part, fullShareBP)
	lo, hi := uint64(0), uint64(fullShareBP-1)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if total.Scale(mid).Cmp(num) <= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return uint32(lo)
}
