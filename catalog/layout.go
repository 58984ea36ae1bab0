package catalog

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// MaxBuckets bounds the sub-buckets of one route (docs/design.md#limits-and-bad-input).
const MaxBuckets = 256

// Layout maps the keys of one route [start, end) to k sub-buckets of equal
// width in an 8-byte window that follows the common prefix of start and end
// (docs/design.md#the-catalog). The detector and every reporter build it from the same
// (start, end, k), so all agree on bucket i without exchanging boundaries.
//
// Within a route every key begins with the common prefix P, and the window
// w(K) = the 8 bytes of K after P, zero-padded, is non-decreasing in K. The
// route occupies window values [lo, lo+span); bucket i holds the keys with
// floor((w-lo)·k/span) = i. When the route is narrower than k window values
// the effective k is the span. A Layout is a small value; Bucket does not
// allocate.
type Layout struct {
	prefix []byte // shared with the route's start; never modified
	lo     uint64
	span   uint64 // window values in the route; 0 stands for 2^64
	k      uint64
	start  []byte
	end    []byte
}

// NewLayout returns the layout of [start, end) (end empty = +inf) with at
// most k buckets; k is clamped to [1, MaxBuckets].
func NewLayout(start, end []byte, k int) Layout {
	k = min(max(k, 1), MaxBuckets)
	l := Layout{start: start, end: end}
	if len(end) == 0 {
		// +inf shares no prefix with anything; the window runs to 2^64.
		l.lo = window(start)
		l.span = -l.lo // 2^64 - lo, and 0 (meaning 2^64) when lo is 0
	} else {
		p := commonPrefix(start, end)
		l.prefix = start[:p]
		l.lo = window(start[p:])
		l.span = window(end[p:]) - l.lo
	}
	l.k = uint64(k)
	if l.span != 0 && l.span < l.k {
		l.k = max(l.span, 1)
	}
	if l.span == 0 && len(end) != 0 {
		// start and end agree on the whole window (end = start·0x00…):
		// nothing to tell apart.
		l.k = 1
	}
	return l
}

// K is the effective number of buckets, at least 1.
func (l Layout) K() int { return int(l.k) }

// BucketCount is NewLayout(start, end, k).K() without building the layout:
// the leader checks it for every row of every report. A route is narrower
// than k <= 256 window values only when it ends just past a run of 0xff
// bytes in its start, which real key shapes almost never do; only then is
// the layout built.
func BucketCount(start, end []byte, k int) int {
	k = min(max(k, 1), MaxBuckets)
	if len(end) == 0 {
		if len(start) == 0 || start[0] < 0xff {
			return k // span = 2^64 - window(start) > 2^56
		}
	} else if p := commonPrefix(start, end); p < len(start) && p < len(end) {
		// span = (end[p] - start[p])·2^56 + rest(end) - rest(start), rest
		// being the 7 window bytes after p.
		switch d := end[p] - start[p]; {
		case d >= 2:
			return k // span > 2^56
		case d == 1 && (len(start) == p+1 || start[p+1] < 0xff):
			return k // rest(start) < 0xff·2^48: span > 2^48
		}
	}
	return NewLayout(start, end, k).K()
}

// Bucket returns the bucket of key, in [0, K()). Keys outside the route are
// clamped to the first or last bucket.
func (l Layout) Bucket(key []byte) int {
	if l.k == 1 {
		return 0
	}
	p := len(l.prefix)
	if len(key) < p || !bytes.Equal(key[:p], l.prefix) {
		if bytes.Compare(key, l.start) < 0 {
			return 0
		}
		return int(l.k - 1)
	}
	w := window(key[p:])
	if w < l.lo {
		return 0
	}
	d := w - l.lo
	if l.span == 0 {
		hi, _ := bits.Mul64(d, l.k)
		return int(hi)
	}
	if d >= l.span {
		return int(l.k - 1)
	}
	hi, lo := bits.Mul64(d, l.k)
	q, _ := bits.Div64(hi, lo, l.span)
	return int(q)
}

// Lower returns the first key of bucket i: the route's start for bucket 0,
// else the shortest key whose window is the bucket's first window value.
// Lower(K()) is the route's end (empty for +inf). Lower(i) for 0 < i < K()
// lies strictly inside the route, and the sequence is strictly increasing.
func (l Layout) Lower(i int) []byte {
	switch {
	case i <= 0:
		return l.start
	case uint64(i) >= l.k:
		return l.end
	}
	// ceil(i·span/k) without overflow; span 0 stands for 2^64.
	var hi, lo uint64
	if l.span == 0 {
		hi, lo = uint64(i), 0
	} else {
		hi, lo = bits.Mul64(uint64(i), l.span)
	}
	q, r := bits.Div64(hi, lo, l.k)
	if r != 0 {
		q++
	}
	b := l.lo + q
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], b)
	n := 8
	for n > 0 && buf[n-1] == 0 {
		n--
	}
	key := make([]byte, 0, len(l.prefix)+n)
	key = append(key, l.prefix...)
	return append(key, buf[:n]...)
}

// BucketBoundaries is the layout as a list: the K()-1 interior boundaries of
// (start, end, k); bucket i is [boundary i-1, boundary i) with the route's
// start and end at the two ends.
func BucketBoundaries(start, end []byte, k int) [][]byte {
	l := NewLayout(start, end, k)
	out := make([][]byte, 0, l.K()-1)
	for i := 1; i < l.K(); i++ {
		out = append(out, l.Lower(i))
	}
	return out
}

func window(b []byte) uint64 {
	if len(b) >= 8 {
		return binary.BigEndian.Uint64(b)
	}
	var buf [8]byte
	copy(buf[:], b)
	return binary.BigEndian.Uint64(buf[:])
}

func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
