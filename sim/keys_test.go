package sim

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"

	"github.com/hotsplit/hotsplit/catalog"
)

func mustKeys(t testing.TB, n uint64) KeySpace {
	t.Helper()
	k, err := NewKeySpace(n)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestKeyFormat(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		i    uint64
		want string
	}{
		{DefaultKeySpace, 0, "user:00000000"},
		{DefaultKeySpace, 42, "user:00000042"},
		{DefaultKeySpace, 999_999, "user:00999999"},
		{100_000_000, 99_999_999, "user:99999999"},
		{100_000_001, 100_000_000, "user:100000000"},
		{100_000_001, 7, "user:000000007"},
		{MaxKeySpace, MaxKeySpace - 1, "user:999999999999"},
		{2, 1, "user:00000001"},
	} {
		k := mustKeys(t, tc.n)
		if got := string(k.Key(tc.i)); got != tc.want {
			t.Errorf("n=%d: Key(%d) = %q, want %q", tc.n, tc.i, got, tc.want)
		}
		if got := string(k.AppendKey([]byte("x"), tc.i)); got != "x"+tc.want {
			t.Errorf("n=%d: AppendKey(x, %d) = %q", tc.n, tc.i, got)
		}
		if i, ok := k.Index([]byte(tc.want)); !ok || i != tc.i {
			t.Errorf("n=%d: Index(%q) = %d, %v", tc.n, tc.want, i, ok)
		}
	}
}

func TestKeyIndexRejects(t *testing.T) {
	k := mustKeys(t, DefaultKeySpace)
	for _, key := range []string{"", "user:", "user:0000004", "user:000000042", "usr:00000042", "user:0000004a",
		"user:01000000", "user:99999999", "user:-0000001", "user:00000042\x00"} {
		if i, ok := k.Index([]byte(key)); ok {
			t.Errorf("Index(%q) = %d, true; want false", key, i)
		}
	}
}

// TestKeyOrderProperty: byte order of keys is index order, keys round-trip
// through Index, and End is above every key.
func TestKeyOrderProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.Uint64Range(MinKeySpace, MaxKeySpace).Draw(t, "n")
		k, err := NewKeySpace(n)
		if err != nil {
			t.Fatal(err)
		}
		i := rapid.Uint64Range(0, n-1).Draw(t, "i")
		j := rapid.Uint64Range(0, n-1).Draw(t, "j")
		ki, kj := k.Key(i), k.Key(j)
		if c := bytes.Compare(ki, kj); (c < 0) != (i < j) || (c == 0) != (i == j) {
			t.Fatalf("Key(%d)=%q vs Key(%d)=%q compare %d", i, ki, j, kj, c)
		}
		if got, ok := k.Index(ki); !ok || got != i {
			t.Fatalf("Index(Key(%d)) = %d, %v", i, got, ok)
		}
		end := k.End()
		if bytes.Compare(k.Key(n-1), end) >= 0 || bytes.Compare(k.Key(0), end) >= 0 {
			t.Fatalf("End %q not above the keys", end)
		}
		if _, ok := k.Index(end); ok {
			t.Fatalf("End %q parses as a key", end)
		}
	})
}

// layoutUse counts the buckets a route's keys fall in and the largest
// bucket's share of its keys, over every 7th key (enough to see the shape,
// and quick under -race).
func layoutUse(t *testing.T, k KeySpace, start, end []byte) (used int, maxShare float64) {
	t.Helper()
	l := catalog.NewLayout(start, end, 16)
	lo, _ := k.Index(start)
	hi, ok := k.Index(end)
	if !ok {
		hi = k.Len()
	}
	count := make([]int, l.K())
	var key []byte
	seen := 0
	for i := lo; i < hi; i += 7 {
		key = k.AppendKey(key[:0], i)
		count[l.Bucket(key)]++
		seen++
	}
	top := 0
	for _, c := range count {
		if c > 0 {
			used++
		}
		top = max(top, c)
	}
	return used, float64(top) / float64(seen)
}

// TestSplitKeysLayout: SplitKeys bounds every key-holding route, and the
// bucket layout of such routes sorts keys by their first differing digit
// (KeySpace's doc comment says how well).
func TestSplitKeysLayout(t *testing.T) {
	for _, tc := range []struct {
		n                uint64
		parts, minUsed   int
		maxShare         float64
		wantFirst, wantE string
	}{
		{DefaultKeySpace, 1, 10, 0.11, "user:00000000", "user:00:"},
		{DefaultKeySpace, 2, 5, 0.21, "user:00000000", "user:00:"},
		{3_000_000, 1, 3, 0.34, "user:00000000", "user:03"},
		{100_000_000, 1, 10, 0.11, "user:00000000", "user::"},
	} {
		k := mustKeys(t, tc.n)
		b := k.SplitKeys(tc.parts)
		if len(b) != tc.parts+1 || string(b[0]) != tc.wantFirst || string(b[len(b)-1]) != tc.wantE {
			t.Fatalf("n=%d SplitKeys(%d) = %q", tc.n, tc.parts, b)
		}
		for j := 0; j+1 < len(b); j++ {
			if bytes.Compare(b[j], b[j+1]) >= 0 {
				t.Fatalf("n=%d SplitKeys(%d) not increasing: %q", tc.n, tc.parts, b)
			}
			if tc.n > 10_000_000 {
				continue // too many keys to walk
			}
			used, share := layoutUse(t, k, b[j], b[j+1])
			t.Logf("n=%d route [%s, %s): %d buckets used, largest %.2f", tc.n, b[j], b[j+1], used, share)
			if used < tc.minUsed || share > tc.maxShare {
				t.Errorf("n=%d route [%s, %s): %d buckets used (want >= %d), largest share %.2f (want <= %.2f)",
					tc.n, b[j], b[j+1], used, tc.minUsed, share, tc.maxShare)
			}
		}
	}
	// Clamping.
	k := mustKeys(t, 3)
	if b := k.SplitKeys(10); len(b) != 4 {
		t.Errorf("SplitKeys(10) of 3 keys = %q, want 4 boundaries", b)
	}
	if b := k.SplitKeys(0); len(b) != 2 {
		t.Errorf("SplitKeys(0) = %q, want 2 boundaries", b)
	}
}
