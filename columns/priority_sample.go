package columns

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// rowSample is one row's merged operation sample: a priority sample
// (Duffield, Lund and Thorup) of at most mergedSamples of the reporters'
// sampled keys. Every reporter's sampled key is an item with a weight w
// (its share of the reporter's load, see addSamples) and a pseudo-random
// u in (0, 1] drawn from a fixed hash of (reporter, route, position); its
// priority is w/u. The sample keeps the mergedSamples items of highest
// priority and the highest priority of any item it left out, τ; a kept
// item then stands for max(w, τ) — an unbiased estimate of the weight of
// any set of keys. Which items are kept and τ are functions of the set of
// items alone (priorities are totally ordered, ties by weight then key),
// so the sample does not depend on the order reports arrive in; and until
// more than mergedSamples items arrive it keeps every item with its own
// weight, exactly what merging them all would.
//
// A merge offers a row's items while walking a report of thousands of
// rows, so the row's sample is cold in cache at every offer. A heap cost a
// handful of cache misses per kept item (16% of a version 2 report's
// ingest); instead kept items are appended to a buffer of sampleBuffer,
// and when it is full the mergedSamples of highest priority are selected
// in place and the rest left out (cut). The lowest item kept by the last
// cut is the floor a later item must beat to be appended. The kept set and
// τ are those a heap would keep: the same order decides, only later.
//
// Memory is O(sampleBuffer) per row whatever the number of reporters:
// the items (24 bytes each) and their keys, copied into a per-row buffer
// that is compacted at every cut.
type rowSample struct {
	items []sampleItem // unordered past index mergedSamples-1 once cut
	keys  []byte       // the items' key bytes
	// Once cut (fu != 0), items[:mergedSamples] are the highest of the
	// items offered before the last cut and items[mergedSamples-1] the
	// lowest of them, the floor; fw, fu are its weight and u, here so that
	// the common test against the floor does not touch the cold items.
	fw, fu uint64
	// tw, tu are the highest priority left out (weight, u); tu == 0: none.
	tw, tu uint64
}

// sampleBuffer is how many items a row's sample holds before it cuts back
// to mergedSamples: half as many again, so a cut's selection work is
// spread over mergedSamples/2 kept items (twice as many cost a v2 merge
// 3% less CPU and its column 28 MiB more).
const sampleBuffer = mergedSamples + mergedSamples/2

// selectRounds bounds selectTop's partitions: about twice the log2 of
// sampleBuffer, which random priorities never reach.
const selectRounds = 16

// sampleItem is one reporter's sampled key: weight w, u·2^63 in [1, 2^63].
type sampleItem struct {
	w, u   uint64
	off, n uint32 // key bytes in rowSample.keys
}

func (s *rowSample) key(it sampleItem) []byte {
	return s.keys[it.off : it.off+it.n : it.off+it.n]
}

// less orders items by priority w/u, lowest first: w_a·u_b < w_b·u_a in
// 128 bits; equal priorities by weight, then key, so the order is total up
// to items that are indistinguishable in the output.
func (s *rowSample) less(a, b sampleItem) bool {
	if c := cmpPriority(a.w, a.u, b.w, b.u); c != 0 {
		return c < 0
	}
	return bytes.Compare(s.key(a), s.key(b)) < 0
}

// cmpPriority orders (weight, u) pairs by priority w/u, then by weight; 0
// when both are equal (the caller breaks the tie by key where it must).
// No closure for the tie: the sample compares a few times per item, and
// building one each time cost more than the comparison.
func cmpPriority(aw, au, bw, bu uint64) int {
	ah, al := bits.Mul64(aw, bu)
	bh, bl := bits.Mul64(bw, au)
	switch {
	case ah != bh:
		return cmpU64(ah, bh)
	case al != bl:
		return cmpU64(al, bl)
	case aw != bw:
		return cmpU64(aw, bw)
	}
	return 0
}

func cmpU64(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

// offer adds one item (weight w > 0, hash u in [1, 2^63], key k).
func (s *rowSample) offer(w, u uint64, k []byte) {
	if s.fu != 0 {
		c := cmpPriority(w, u, s.fw, s.fu)
		if c == 0 {
			c = bytes.Compare(k, s.key(s.items[mergedSamples-1]))
		}
		if c <= 0 { // at least mergedSamples items rank above it
			s.leaveOut(w, u)
			return
		}
	}
	if n := len(s.items); n == cap(s.items) {
		// A reporter's sample first, then the whole buffer: growing by
		// append took nine allocations a row, and overshot the buffer.
		c := sampleBuffer
		if n < api.MaxReportSamples {
			c = api.MaxReportSamples
		}
		s.items = append(make([]sampleItem, 0, c), s.items...)
	}
	s.items = append(s.items, s.store(w, u, k))
	if len(s.items) == sampleBuffer {
		s.cutBack()
	}
}

// cutBack keeps the mergedSamples items of highest priority and leaves
// the rest out.
func (s *rowSample) cutBack() {
	if len(s.items) <= mergedSamples {
		return
	}
	s.selectTop(mergedSamples)
	for _, it := range s.items[mergedSamples:] {
		s.leaveOut(it.w, it.u)
	}
	s.items = s.items[:mergedSamples]
	floor := s.items[mergedSamples-1]
	s.fw, s.fu = floor.w, floor.u
	s.compact()
}

// selectTop reorders the items so that items[:k] are the k highest and
// items[k-1] the lowest of those: quickselect with a middle pivot, and a
// sort of what is left after selectRounds rounds. A reporter knows its
// items' u, so it can choose weights that order its part of the buffer;
// the sort bounds what any order, or a buffer of equal items, costs.
func (s *rowSample) selectTop(k int) {
	it := s.items
	lo, hi := 0, len(it)-1
	for round := 0; lo < hi; round++ {
		if round == selectRounds {
			slices.SortFunc(it[lo:hi+1], func(a, b sampleItem) int {
				switch {
				case s.less(b, a):
					return -1
				case s.less(a, b):
					return 1
				}
				return 0
			})
			return
		}
		mid := lo + (hi-lo)/2
		it[mid], it[hi] = it[hi], it[mid]
		p := lo // it[lo:p] rank above the pivot it[hi]
		for i := lo; i < hi; i++ {
			if s.less(it[hi], it[i]) {
				it[i], it[p] = it[p], it[i]
				p++
			}
		}
		it[p], it[hi] = it[hi], it[p]
		switch {
		case p == k-1:
			return
		case p < k-1:
			lo = p + 1
		default:
			hi = p - 1
		}
	}
}

func (s *rowSample) leaveOut(w, u uint64) {
	if s.tu == 0 || cmpPriority(w, u, s.tw, s.tu) > 0 {
		s.tw, s.tu = w, u
	}
}

func (s *rowSample) store(w, u uint64, k []byte) sampleItem {
	it := sampleItem{w: w, u: u, off: uint32(len(s.keys)), n: uint32(len(k))}
	if s.keys == nil { // room for a reporter's sample of keys like this one
		s.keys = make([]byte, 0, api.MaxReportSamples*len(k))
	}
	s.keys = append(s.keys, k...)
	return it
}

// compact copies the kept items' keys into a fresh buffer with room for
// as many again as the buffer holds items beyond them, so that keys of
// like length fill it up to the next cut without growing it.
func (s *rowSample) compact() {
	live := 0
	for _, it := range s.items {
		live += int(it.n)
	}
	keys := make([]byte, 0, live*sampleBuffer/mergedSamples)
	for i := range s.items {
		it := &s.items[i]
		off := uint32(len(keys))
		keys = append(keys, s.key(*it)...)
		it.off = off
	}
	s.keys = keys
}

// threshold is τ as a weight: tw/u with u = tu/2^63, saturated; 0 when
// nothing was left out.
func (s *rowSample) threshold() uint64 {
	if s.tu == 0 {
		return 0
	}
	return saturate.U128{Hi: s.tw >> 1, Lo: s.tw << 63}.DivSat(s.tu) // tw·2^63 / tu
}

// weighted returns the sample for a committed column: keys in order,
// duplicates summed, each item weighing max(w, τ). It cuts the sample back
// first, so it is called once every merge is done. Keys share the row's
// buffer.
func (s *rowSample) weighted() []*api.WeightedKey {
	if len(s.items) == 0 {
		return nil
	}
	s.cutBack()
	tau := s.threshold()
	items := slices.Clone(s.items)
	slices.SortFunc(items, func(a, b sampleItem) int { return bytes.Compare(s.key(a), s.key(b)) })
	out := make([]*api.WeightedKey, 0, len(items))
	for _, it := range items {
		w := max(it.w, tau)
		if n := len(out); n > 0 && bytes.Equal(out[n-1].Key, s.key(it)) {
			out[n-1].Weight = saturate.Add(out[n-1].Weight, w)
			continue
		}
		out = append(out, &api.WeightedKey{Key: s.key(it), Weight: w})
	}
	return out
}

// reporterHash is a fixed 64-bit hash (wyhash-style multiply-fold mixing)
// of a reporter id, the same in every process so that a merge is
// reproducible: the priority of a reporter's sampled key depends only on
// what was reported.
func reporterHash(id string) uint64 {
	const p0, p1, p2 = 0xa0761d6478bd642f, 0xe7037ed1a0b428db, 0x8ebc6af09c88c6e3
	b := []byte(id)
	h := p0 ^ uint64(len(b))*p1
	for ; len(b) >= 8; b = b[8:] {
		h = mix(h^binary.LittleEndian.Uint64(b), p1)
	}
	if len(b) > 0 {
		h = mix(h^tailWord(b), p2)
	}
	return mix(h, p0^p2)
}

// sampleRowHash and sampleItemHash give a reporter's item at position pos
// of route's sample its fixed hash: a function of (reporter, route,
// position), not of the key, so that an item's priority is known before
// its key is read, and an item below the row's floor costs two multiplies
// and no key (the keys stay uncorrelated with u, which is all priority
// sampling asks).
func sampleRowHash(reporter, route uint64) uint64 {
	return mix(reporter^route*0x9e3779b97f4a7c15, 0xe7037ed1a0b428db)
}

func sampleItemHash(row uint64, pos int) uint64 {
	return mix(row^uint64(pos+1)*0xa0761d6478bd642f, 0x8ebc6af09c88c6e3)
}

// mix folds the 128-bit product of a and b.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// sampleU maps a hash to u·2^63 in [1, 2^63].
func sampleU(h uint64) uint64 { return h>>1 + 1 }
