package catalog

import (
	"bytes"
	"testing"

	"pgregory.net/rapid"
)

func TestShortestSeparator(t *testing.T) {
	cases := []struct{ a, b, want string }{
		{"user:0050", "user:0050/x\x88\x80", "user:0050/"},
		{"user:0049:z", "user:0061", "user:006"},
		{"a", "b", "b"},
		{"", "b", "b"},
		{"", "\x00", "\x00"},
		{"k", "k\x00", "k\x00"},
		{"tenant:0042:order:0499", "tenant:0042:order:0500", "tenant:0042:order:05"},
	}
	for _, tc := range cases {
		if got := ShortestSeparator([]byte(tc.a), []byte(tc.b)); string(got) != tc.want {
			t.Errorf("ShortestSeparator(%q, %q) = %q, want %q", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestShortestBetween(t *testing.T) {
	cases := []struct{ lo, hi, want string }{
		{"a@", "a\xa5x", "a\xa5"},
		{"user:005", "user:0050/z", "user:005"},
		{"k", "k", "k"},
		{"", "anything", ""},
		{"b", "a", "a"}, // lo > hi: hi
	}
	for _, tc := range cases {
		if got := ShortestBetween([]byte(tc.lo), []byte(tc.hi)); string(got) != tc.want {
			t.Errorf("ShortestBetween(%q, %q) = %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

func TestIsSingleKey(t *testing.T) {
	cases := []struct {
		start, end string
		want       bool
	}{
		{"k", "k\x00", true},
		{"", "\x00", true},
		{"k", "k\x00\x00", false},
		{"k", "l", false},
		{"k", "", false}, // +inf
		{"k", "k\x01", false},
	}
	for _, tc := range cases {
		if got := IsSingleKey([]byte(tc.start), []byte(tc.end)); got != tc.want {
			t.Errorf("IsSingleKey(%q, %q) = %v", tc.start, tc.end, got)
		}
	}
}

// The separators are shortest: nothing shorter lies in their interval,
// and what they return does.
func TestSeparatorsAreShortest(t *testing.T) {
	key := rapid.SliceOfN(rapid.SampledFrom([]byte{0x00, 0x01, 'a', 'b', 0xff}), 0, 6)
	rapid.Check(t, func(t *rapid.T) {
		a, b := key.Draw(t, "a"), key.Draw(t, "b")
		if bytes.Compare(a, b) > 0 {
			a, b = b, a
		}
		// Closed interval [a, b].
		s := ShortestBetween(a, b)
		if bytes.Compare(s, a) < 0 || bytes.Compare(s, b) > 0 {
			t.Fatalf("ShortestBetween(%q, %q) = %q outside", a, b, s)
		}
		if shorterIn(len(s), func(k []byte) bool { return bytes.Compare(k, a) >= 0 && bytes.Compare(k, b) <= 0 }) {
			t.Fatalf("ShortestBetween(%q, %q) = %q is not shortest", a, b, s)
		}
		if bytes.Equal(a, b) {
			return
		}
		// Half-open (a, b].
		s = ShortestSeparator(a, b)
		if bytes.Compare(s, a) <= 0 || bytes.Compare(s, b) > 0 {
			t.Fatalf("ShortestSeparator(%q, %q) = %q outside (a, b]", a, b, s)
		}
		if shorterIn(len(s), func(k []byte) bool { return bytes.Compare(k, a) > 0 && bytes.Compare(k, b) <= 0 }) {
			t.Fatalf("ShortestSeparator(%q, %q) = %q is not shortest", a, b, s)
		}
	})
}

// shorterIn reports whether some key shorter than n satisfies in, searching
// every byte value exhaustively (for n up to 3; longer results are not
// searched, the short cases cover the logic).
func shorterIn(n int, in func([]byte) bool) bool {
	var try func(prefix []byte) bool
	try = func(prefix []byte) bool {
		if in(prefix) {
			return true
		}
		if len(prefix)+1 >= n {
			return false
		}
		for c := 0; c < 256; c++ {
			if try(append(bytes.Clone(prefix), byte(c))) {
				return true
			}
		}
		return false
	}
	if n == 0 || n > 3 {
		return false // nothing is shorter than 0; beyond 2 bytes too wide to search
	}
	return try(nil)
}
