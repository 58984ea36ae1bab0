package saturate

import (
	"math"
	"math/bits"
)

// U128 is an unsigned 128-bit integer whose arithmetic stops at 2^128-1
// (and at 0 below) instead of wrapping. Weighted loads need it: counts are
// uint64 and weights uint32, so a weighted load takes 97 bits and a load
// per minute (×60000) 113 bits before the division that brings it back to
// 64. Callers carry products here and saturate only the final quotient.
type U128 struct{ Hi, Lo uint64 }

// maxU128 is 2^128-1.
var maxU128 = U128{math.MaxUint64, math.MaxUint64}

// Wide returns x as a U128.
func Wide(x uint64) U128 { return U128{0, x} }

// Mul64 returns the exact product a·b.
func Mul64(a, b uint64) U128 {
	hi, lo := bits.Mul64(a, b)
	return U128{hi, lo}
}

// Add returns x+y, or 2^128-1 when the sum does not fit.
func (x U128) Add(y U128) U128 {
	lo, c := bits.Add64(x.Lo, y.Lo, 0)
	hi, c := bits.Add64(x.Hi, y.Hi, c)
	if c != 0 {
		return maxU128
	}
	return U128{hi, lo}
}

// Sub returns x-y, or 0 when y > x.
func (x U128) Sub(y U128) U128 {
	lo, b := bits.Sub64(x.Lo, y.Lo, 0)
	hi, b := bits.Sub64(x.Hi, y.Hi, b)
	if b != 0 {
		return U128{}
	}
	return U128{hi, lo}
}

// Scale returns x·m, or 2^128-1 when the product does not fit.
func (x U128) Scale(m uint64) U128 {
	hh, hl := bits.Mul64(x.Hi, m)
	lh, ll := bits.Mul64(x.Lo, m)
	hi, c := bits.Add64(hl, lh, 0)
	if hh != 0 || c != 0 {
		return maxU128
	}
	return U128{hi, ll}
}

// Mul returns x·y, or 2^128-1 when the product does not fit.
func (x U128) Mul(y U128) U128 {
	switch {
	case x.IsZero() || y.IsZero():
		return U128{}
	case x.Hi != 0 && y.Hi != 0:
		return maxU128
	case x.Hi != 0:
		return x.Scale(y.Lo)
	}
	return y.Scale(x.Lo)
}

// Cmp returns -1, 0 or +1 as x is less than, equal to or greater than y.
func (x U128) Cmp(y U128) int {
	switch {
	case x.Hi != y.Hi:
		if x.Hi < y.Hi {
			return -1
		}
		return 1
	case x.Lo < y.Lo:
		return -1
	case x.Lo > y.Lo:
		return 1
	}
	return 0
}

// IsZero reports whether x is 0.
func (x U128) IsZero() bool { return x.Hi == 0 && x.Lo == 0 }

// Div returns floor(x/d); d must be positive.
func (x U128) Div(d uint64) U128 {
	hi := x.Hi / d
	lo, _ := bits.Div64(x.Hi%d, x.Lo, d)
	return U128{hi, lo}
}

// DivSat returns floor(x/d) for d > 0, or the largest uint64 when the
// quotient does not fit.
func (x U128) DivSat(d uint64) uint64 {
	if x.Hi >= d {
		return math.MaxUint64
	}
	q, _ := bits.Div64(x.Hi, x.Lo, d)
	return q
}

// Shr returns x >> s.
func (x U128) Shr(s uint) U128 {
	switch {
	case s == 0:
		return x
	case s >= 128:
		return U128{}
	case s >= 64:
		return U128{0, x.Hi >> (s - 64)}
	}
	return U128{x.Hi >> s, x.Lo>>s | x.Hi<<(64-s)}
}

// Uint64 returns x, or the largest uint64 when x does not fit.
func (x U128) Uint64() uint64 {
	if x.Hi != 0 {
		return math.MaxUint64
	}
	return x.Lo
}
