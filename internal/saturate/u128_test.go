package saturate

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

func bigOf(x U128) *big.Int {
	b := new(big.Int).SetUint64(x.Hi)
	return b.Lsh(b, 64).Or(b, new(big.Int).SetUint64(x.Lo))
}

// clamp128 is x clamped to [0, 2^128-1] as a U128.
func clamp128(x *big.Int) U128 {
	if x.Sign() < 0 {
		return U128{}
	}
	if x.BitLen() > 128 {
		return maxU128
	}
	lo := new(big.Int).And(x, new(big.Int).SetUint64(math.MaxUint64)).Uint64()
	return U128{new(big.Int).Rsh(x, 64).Uint64(), lo}
}

func drawU128(t *rapid.T, name string) U128 {
	word := rapid.OneOf(rapid.Uint64(), rapid.Uint64Range(0, 1<<20), rapid.Uint64Range(math.MaxUint64-1000, math.MaxUint64), rapid.Just(uint64(0)))
	return U128{word.Draw(t, name+".hi"), word.Draw(t, name+".lo")}
}

// TestU128AgainstBigInt: every operation equals arbitrary precision,
// clamped to [0, 2^128-1] (or to a uint64 where it returns one).
func TestU128AgainstBigInt(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x, y := drawU128(t, "x"), drawU128(t, "y")
		m := rapid.OneOf(rapid.Uint64(), rapid.Uint64Range(0, 1<<16)).Draw(t, "m")
		d := rapid.OneOf(rapid.Uint64Range(1, math.MaxUint64), rapid.Uint64Range(1, 1<<16)).Draw(t, "d")
		s := rapid.UintRange(0, 140).Draw(t, "s")
		bx, by, bm, bd := bigOf(x), bigOf(y), new(big.Int).SetUint64(m), new(big.Int).SetUint64(d)
		check := func(op string, got U128, want *big.Int) {
			if w := clamp128(want); got != w {
				t.Fatalf("%s(%v, %v, m=%d, d=%d, s=%d) = %v, want %v", op, x, y, m, d, s, got, w)
			}
		}
		check("Add", x.Add(y), new(big.Int).Add(bx, by))
		check("Sub", x.Sub(y), new(big.Int).Sub(bx, by))
		check("Scale", x.Scale(m), new(big.Int).Mul(bx, bm))
		check("Mul", x.Mul(y), new(big.Int).Mul(bx, by))
		check("Div", x.Div(d), new(big.Int).Quo(bx, bd))
		check("Shr", x.Shr(s), new(big.Int).Rsh(bx, s))
		check("Mul64", Mul64(x.Lo, m), new(big.Int).Mul(new(big.Int).SetUint64(x.Lo), bm))
		if got, want := x.Cmp(y), bx.Cmp(by); got != want {
			t.Fatalf("Cmp(%v, %v) = %d, want %d", x, y, got, want)
		}
		if x.IsZero() != (bx.Sign() == 0) {
			t.Fatalf("IsZero(%v) = %v", x, x.IsZero())
		}
		limit := new(big.Int).SetUint64(math.MaxUint64)
		clamp64 := func(v *big.Int) uint64 {
			if v.Cmp(limit) > 0 {
				return math.MaxUint64
			}
			return v.Uint64()
		}
		if got, want := x.DivSat(d), clamp64(new(big.Int).Quo(bx, bd)); got != want {
			t.Fatalf("DivSat(%v, %d) = %d, want %d", x, d, got, want)
		}
		if got, want := x.Uint64(), clamp64(bx); got != want {
			t.Fatalf("Uint64(%v) = %d, want %d", x, got, want)
		}
	})
}
