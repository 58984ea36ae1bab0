// Package saturate is unsigned arithmetic that stops at the largest value
// instead of wrapping: load counts and weighted loads are summed and scaled
// in many places (the detector, the leader's column merge, the keyviz
// sketch, the heat history), and an overflow must read as "very large",
// never as small. The same holds for the detector's 32-bit counters.
//
// It is pure and stdlib-only, so every package may import it, the pure ones
// included. It holds the saturating operations and nothing else.
package saturate

import (
	"math"
	"math/bits"
)

// Add returns a+b, or the largest uint64 when the sum does not fit.
func Add(a, b uint64) uint64 {
	s, carry := bits.Add64(a, b, 0)
	if carry != 0 {
		return math.MaxUint64
	}
	return s
}

// Mul returns a·b, or the largest uint64 when the product does not fit.
func Mul(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return math.MaxUint64
	}
	return lo
}

// Inc32 returns a+1, or a when a is the largest uint32: a count of
// columns or repeats stays at its top rather than wrapping to 0.
func Inc32(a uint32) uint32 {
	if a == math.MaxUint32 {
		return a
	}
	return a + 1
}
