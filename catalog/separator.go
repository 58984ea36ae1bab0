package catalog

import "bytes"

// ShortestBetween returns a shortest key s with lo <= s <= hi (lo <= hi;
// for lo > hi it returns hi). It is a prefix of hi whenever one qualifies,
// so a boundary cut between two real keys reads like the right-hand one cut
// short: between "user:0050" and "user:0050/x\x88" it is "user:0050/",
// between "user:0049:z" and "user:0061" it is "user:006". LevelDB's
// FindShortestSeparator serves the same purpose (small, readable block
// boundaries). It allocates nothing: the result shares hi's (or lo's) bytes.
//
// Why it is shortest: let n be the length of the common prefix of lo and
// hi. If lo is a prefix of hi, lo itself qualifies and anything shorter is
// a proper prefix of lo, so below it. Otherwise lo[n] < hi[n], and hi[:n+1]
// is above lo and not above hi; a key of length <= n either is a prefix of
// both (below lo) or differs from them inside the common prefix (below
// both or above both).
func ShortestBetween(lo, hi []byte) []byte {
	if bytes.Compare(lo, hi) >= 0 {
		return hi
	}
	n := commonPrefix(lo, hi)
	if n == len(lo) {
		return lo
	}
	return hi[: n+1 : n+1]
}

// ShortestSeparator returns a shortest key s with a < s <= b (a < b): the
// boundary that keeps a below and b at or above it, e.g. a split key that
// puts the evidence key a in the left child and b in the right one.
func ShortestSeparator(a, b []byte) []byte {
	n := commonPrefix(a, b)
	if n >= len(b) {
		return b // a >= b: no separator; b is the caller's upper bound
	}
	return b[: n+1 : n+1]
}

// IsSingleKey reports whether [start, end) is the route of exactly one key,
// [H, H·0x00): nothing lies strictly inside it, so it can never be split.
func IsSingleKey(start, end []byte) bool {
	return len(end) == len(start)+1 && end[len(start)] == 0 && bytes.Equal(end[:len(start)], start)
}
