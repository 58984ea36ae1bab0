package sim

import (
	"fmt"
)

// KeyPrefix starts every key the simulator generates.
const KeyPrefix = "user:"

// Key space bounds.
const (
	MinKeySpace = 2
	MaxKeySpace = 1_000_000_000_000
	minDigits   = 8
)

// KeySpace is the simulator's set of keys: n keys KeyPrefix followed by the
// key's index in fixed-width decimal, at least 8 digits ("user:00000042").
//
// Why this shape: catalog.Layout cuts a route into sub-buckets by the 8
// bytes after the common prefix of the route's bounds. Fixed width makes
// byte order numeric order and the short prefix leaves that window to the
// digits, so a route's layout sorts its keys by the first digit in which its
// bounds differ, and only coarsely by the digits after it (a decimal digit
// takes 10 of a byte's 256 values). A route whose bounds differ by d in that
// digit spreads its keys over about d groups of buckets, and the detector's
// median split lands between two digit values where the load is; a route
// whose bounds differ by one puts nearly all its keys in one or two
// buckets, so its first median split lands at an edge and its children sort
// by the next digit. A route unbounded above, or one reaching down to the
// empty key, sorts by the prefix's bytes and sees a single bucket: hence End
// and SplitKeys, which bound the key space tightly.
type KeySpace struct {
	n      uint64
	width  int
	prefix string // KeyPrefix unless made by NewPrefixedKeySpace
}

// NewKeySpace returns the key space of n keys, n in [MinKeySpace,
// MaxKeySpace].
func NewKeySpace(n uint64) (KeySpace, error) {
	if n < MinKeySpace || n > MaxKeySpace {
		return KeySpace{}, fmt.Errorf("%w: key-space %d: want %d to %d keys", ErrInvalidWorkload, n, uint64(MinKeySpace), uint64(MaxKeySpace))
	}
	return KeySpace{n: n, width: max(minDigits, digits(n-1)), prefix: KeyPrefix}, nil
}

// NewPrefixedKeySpace returns n keys that share the given prefix, followed
// by the key's index in the fewest decimal digits that hold n-1, so that the
// keys share exactly the prefix (plus any leading digit all indexes share):
// the narrow workload's "K hot keys under a common prefix of P bytes".
func NewPrefixedKeySpace(prefix string, n uint64) (KeySpace, error) {
	if n < MinKeySpace || n > MaxKeySpace {
		return KeySpace{}, fmt.Errorf("%w: hot-keys %d: want %d to %d keys", ErrInvalidWorkload, n, uint64(MinKeySpace), uint64(MaxKeySpace))
	}
	return KeySpace{n: n, width: digits(n - 1), prefix: prefix}, nil
}

// Prefix is what every key of k starts with.
func (k KeySpace) Prefix() string { return k.prefix }

// Len is the number of keys.
func (k KeySpace) Len() uint64 { return k.n }

// AppendKey appends the key of index i to dst. i is meant to be below Len;
// a larger index is formatted modulo 10^width, so that every key keeps its
// width.
func (k KeySpace) AppendKey(dst []byte, i uint64) []byte {
	dst = append(dst, k.prefix...)
	start := len(dst)
	for range k.width {
		dst = append(dst, '0')
	}
	for j := len(dst) - 1; j >= start && i > 0; j-- {
		dst[j] = '0' + byte(i%10)
		i /= 10
	}
	return dst
}

// Key returns the key of index i (see AppendKey).
func (k KeySpace) Key(i uint64) []byte {
	return k.AppendKey(make([]byte, 0, len(k.prefix)+k.width), i)
}

// Index parses a key of this key space back to its index; ok is false for
// any other byte string (wrong prefix, width or digits, or an index at or
// beyond Len).
func (k KeySpace) Index(key []byte) (i uint64, ok bool) {
	if len(key) != len(k.prefix)+k.width || string(key[:len(k.prefix)]) != k.prefix {
		return 0, false
	}
	for _, c := range key[len(k.prefix):] {
		if c < '0' || c > '9' {
			return 0, false
		}
		i = i*10 + uint64(c-'0') // at most 13 digits: no overflow
	}
	return i, i < k.n
}

// End is the tightest route boundary above every key: the common prefix
// of the first and the last key, up to and including the first digit where
// they differ, with that digit raised by one (for a million keys,
// "user:00:", as ':' follows '9'). A route [Key(0), End()) holds the whole
// key space and its layout sorts keys by that first digit.
func (k KeySpace) End() []byte {
	first, last := k.Key(0), k.Key(k.n-1)
	i := len(k.prefix)
	for first[i] == last[i] {
		i++ // the keys differ somewhere: n >= 2
	}
	end := last[: i+1 : i+1]
	end[i]++
	return end
}

// SplitKeys returns parts+1 route boundaries that cut the key space into
// parts ranges of (nearly) equal size: Key(0), the keys of index
// floor(Len·j/parts) for 0 < j < parts, and End. Bootstrapping a cluster with
// them bounds every route that holds keys, so each one's bucket layout works
// from the first column (see KeySpace for how well). parts is clamped to
// [1, Len].
func (k KeySpace) SplitKeys(parts int) [][]byte {
	p := uint64(max(parts, 1))
	p = min(p, k.n)
	out := make([][]byte, 0, p+1)
	for j := range p {
		out = append(out, k.Key(mulDiv(k.n, j, p)))
	}
	return append(out, k.End())
}

func digits(n uint64) int {
	d := 1
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}
