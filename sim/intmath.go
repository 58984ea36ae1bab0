package sim

import "math/bits"

// mulDiv returns floor(a·b/c) without overflow; the result must fit in 64
// bits (it does whenever b <= c).
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	q, _ := bits.Div64(hi, lo, c)
	return q
}

// mulMod returns a·b mod m without overflow.
func mulMod(a, b, m uint64) uint64 {
	hi, lo := bits.Mul64(a%m, b%m)
	_, r := bits.Div64(hi, lo, m)
	return r
}

// goldenNum/goldenDen is 1/φ ≈ 0.618034 as an exact fraction: the workloads
// place hotspots at golden sections of the key space, away from the round
// positions (halves, tenths) where SplitKeys and hand-made splits put route
// boundaries, and successive shift positions as far apart as they can be.
const (
	goldenNum = 618_033_988_749
	goldenDen = 1_000_000_000_000
)

// golden returns floor(n/φ).
func golden(n uint64) uint64 { return mulDiv(n, goldenNum, goldenDen) }

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// fraction53 converts a fraction f in [0, 1] to a threshold on 53-bit draws:
// a draw r.Uint64()>>11 is below it with probability f (exactly 1 for f = 1,
// 0 for f = 0).
func fraction53(f float64) uint64 {
	return uint64(f * (1 << 53))
}
