package detector

import (
	"math/bits"

	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Lower confidence bound of a sampled, weighted count (RuleLowerBoundIsolation).
//
// A key's merged lower estimate L is a sum of scaled Poisson counts: each
// reporter sampled its operations one in rate_r, so L = Σ w_i·k_i with
// k_i the sampled events and w_i = rate·weight their scale, and its
// variance is V = Σ w_i²·k_i (the leader sums it per key). Treating L as
// one scaled Poisson count with the same mean and variance — k_eff = L²/V
// events of weight V/L — and taking the variance-stabilised lower bound
// (√k_eff − z/2)² of a Poisson mean gives
//
//	LCB = (L − (z/2)·√V)² / L        (0 when L ≤ (z/2)·√V)
//
// With z = 2.326 this is a one-sided 99% bound: for k = 10, 100 and 1000
// sampled events it is 4.0, 78.1 and 928.1 against the exact Poisson 4.1,
// 77.8 and 927.1. It is what the share and floor tests of isolation use,
// so an incidental key whose true rate is below the floor clears the test
// in well under 1% of columns whatever the sample rate (docs/design.md).

// ConfidenceZMilli is z = 2.326, in thousandths, of every confidence
// bound the detector takes: a lower bound p − z·sd is one-sided at 99%, an
// interval p ± z·sd two-sided at 98%. Explain answers carry it (and
// MinSideShareBP) for readers that cannot import this package.
const ConfidenceZMilli = 2326

// halfZMilli is z/2 in thousandths (z is even in thousandths).
const halfZMilli = ConfidenceZMilli / 2

// lowerBound returns the lower confidence bound of an estimate lower with
// the given variance. A zero variance means no sampling noise is known
// (a version 1 reporter, or sample rate 1 with no raw counts): lower as is.
func lowerBound(lower, variance uint64) uint64 {
	if variance == 0 || lower == 0 {
		return lower
	}
	// m = ceil((z/2)·√V), rounded up so that the bound errs low.
	s := ceilSqrt(variance)
	hi, lo := bits.Mul64(s, halfZMilli)
	m, r := bits.Div64(hi, lo, 1000) // hi < 1000 as s < 2^33
	if r != 0 {
		m++
	}
	if m >= lower {
		return 0
	}
	d := lower - m
	h, l := bits.Mul64(d, d)
	q, _ := bits.Div64(h, l, lower) // d < lower, so d²/lower < 2^64
	return q
}

// ceilSqrt is ⌈√x⌉.
func ceilSqrt(x uint64) uint64 {
	if x == 0 {
		return 0
	}
	// Integer Newton from above, then correct to the ceiling.
	r := uint64(1) << ((bits.Len64(x) + 1) / 2)
	for {
		n := (r + x/r) / 2
		if n >= r {
			break
		}
		r = n
	}
	// r = ⌊√x⌋ now.
	if hi, lo := bits.Mul64(r, r); hi == 0 && lo == x {
		return r
	}
	return r + 1
}

// shareLowerBound is the one-sided 99% lower bound, in basis points, of
// the share p = L/S of a key's sampled weight L (variance vl) in its row's
// sampled weight S (variance vs), L <= S. The rest of the row, R = S − L,
// is an independent sum of scaled Poisson counts with variance vs − vl, so
// by the delta method sd(p) = √(R²·vl + L²·(vs−vl)) / S²; the bound is
// p − z·sd, with √(a²+b²) taken as a+b (at most √2 too wide: it errs low).
// A key that is nearly all of its row has a tight bound however few events
// were sampled, which a bound on L against the exact load would not give.
func shareLowerBound(l, vl, s, vs uint64) uint32 {
	p := shareBP(l, saturate.Wide(s))
	if vl == 0 && vs == 0 {
		return p // no sampling noise known
	}
	vr := vs - min(vl, vs)
	a := saturate.Mul64(s-l, ceilSqrt(vl))
	b := saturate.Mul64(l, ceilSqrt(vr))
	// z·10000·(a+b)/S² (below 2^113 before the divisions), plus one for
	// the two floors, so the bound errs low.
	q := a.Add(b).Scale(ConfidenceZMilli * 10).Div(s).Div(s).Add(saturate.Wide(1))
	if q.Hi != 0 || q.Lo >= uint64(p) {
		return 0
	}
	return p - uint32(q.Lo)
}
