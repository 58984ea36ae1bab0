package saturate

import (
	"math"
	"math/big"
	"testing"

	"pgregory.net/rapid"
)

func TestAddMul(t *testing.T) {
	const max = math.MaxUint64
	cases := []struct {
		name     string
		a, b     uint64
		add, mul uint64
	}{
		{"zeros", 0, 0, 0, 0},
		{"small", 6, 7, 13, 42},
		{"zero times max", 0, max, max, 0},
		{"one below the edge", max - 1, 1, max, max - 1},
		{"one past the edge", max, 1, max, max},
		{"product overflows", max / 2, 3, max/2 + 3, max},
		{"sum overflows by one", 1 << 63, 1 << 63, max, max},
		{"product just fits", 1 << 32, 1<<32 - 1, 1<<32 + 1<<32 - 1, 1<<64 - 1<<32},
		{"product just overflows", 1 << 32, 1 << 32, 1 << 33, max},
	}
	for _, tc := range cases {
		if got := Add(tc.a, tc.b); got != tc.add {
			t.Errorf("%s: Add(%d, %d) = %d, want %d", tc.name, tc.a, tc.b, got, tc.add)
		}
		if got := Mul(tc.a, tc.b); got != tc.mul {
			t.Errorf("%s: Mul(%d, %d) = %d, want %d", tc.name, tc.a, tc.b, got, tc.mul)
		}
	}
}

func TestInc32(t *testing.T) {
	for _, tc := range []struct{ a, want uint32 }{
		{0, 1}, {41, 42}, {math.MaxUint32 - 1, math.MaxUint32}, {math.MaxUint32, math.MaxUint32},
	} {
		if got := Inc32(tc.a); got != tc.want {
			t.Errorf("Inc32(%d) = %d, want %d", tc.a, got, tc.want)
		}
	}
}

// TestAgainstBigInt: both operations equal arbitrary precision clamped to
// the largest uint64.
func TestAgainstBigInt(t *testing.T) {
	limit := new(big.Int).SetUint64(math.MaxUint64)
	clamp := func(x *big.Int) uint64 {
		if x.Cmp(limit) > 0 {
			return math.MaxUint64
		}
		return x.Uint64()
	}
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.OneOf(rapid.Uint64(), rapid.Uint64Range(0, 1<<33), rapid.Uint64Range(math.MaxUint64-1000, math.MaxUint64))
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		x, y := new(big.Int).SetUint64(a), new(big.Int).SetUint64(b)
		if got, want := Add(a, b), clamp(new(big.Int).Add(x, y)); got != want {
			t.Fatalf("Add(%d, %d) = %d, want %d", a, b, got, want)
		}
		if got, want := Mul(a, b), clamp(new(big.Int).Mul(x, y)); got != want {
			t.Fatalf("Mul(%d, %d) = %d, want %d", a, b, got, want)
		}
	})
}
