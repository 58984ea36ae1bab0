package keyviz

import (
	"bytes"
	"hash/maphash"
	"math/bits"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// spaceSaving is a weighted Space-Saving summary (Metwally, Agrawal and
// El Abbadi, 2005) of at most capacity keys. Every update adds its weight to
// exactly one entry, so the entry counts always sum to total. When a new key
// arrives and the summary is full, the entry with the smallest count m is
// replaced by the new key with count m+w and error m. That keeps two
// guarantees, for the stream of updates fed to it:
//
//   - an entry's true weight lies in [count - error, count];
//   - a key that is absent has true weight at most the smallest count, which
//     is at most total/capacity; so every key heavier than total/capacity is
//     present.
//
// Entries live in fixed slots; a min-heap of slot numbers ordered by count
// finds the entry to replace in O(1), and each entry records its heap
// position, so repositioning an incremented entry (O(log capacity)) swaps
// small integers. Keys are indexed by a seeded 64-bit hash, computed once
// per update, and each slot keeps its key in a buffer reused when the slot
// is replaced: an update does no string hashing in the map and, once the
// buffers have grown, no allocation. Two keys with the same hash (about one
// chance in 2^56 per update at 256 entries) are told apart by comparing the
// bytes; the newcomer's update is then dropped, so the guarantees above hold
// for the updates that were fed. Not safe for concurrent use; the sampler
// guards each route's summary with its own mutex.
type spaceSaving struct {
	capacity int
	total    uint64
	evicted  bool // an entry has been replaced: absent keys may have weight
	seed     maphash.Seed
	index    ssIndex   // key hash -> slot
	ents     []ssEntry // slots
	heap     []int32   // slots, min-heap on count
}

type ssEntry struct {
	key   []byte
	hash  uint64
	count uint64
	err   uint64
	// The sampled reads and writes fed to this entry since its key took
	// the slot: count - err is exactly their weighted sum.
	reads, writes uint64
	hpos          int32 // position in heap
}

func newSpaceSaving(capacity int) *spaceSaving {
	return &spaceSaving{
		capacity: capacity,
		seed:     maphash.MakeSeed(),
		index:    newSSIndex(capacity),
		ents:     make([]ssEntry, 0, capacity),
		heap:     make([]int32, 0, capacity),
	}
}

// add feeds one update of key with weight w (w > 0), a read or a write.
// Counts saturate at 2^64-1 rather than wrap.
func (s *spaceSaving) add(key []byte, w uint64, write bool) {
	s.addHashed(key, maphash.Bytes(s.seed, key), w, write)
}

// event counts one sampled read or write of e.
func (e *ssEntry) event(write bool) {
	if write {
		e.writes++
	} else {
		e.reads++
	}
}

func (s *spaceSaving) addHashed(key []byte, h, w uint64, write bool) {
	pos, i := s.index.find(h)
	if i >= 0 {
		e := &s.ents[i]
		if !bytes.Equal(e.key, key) {
			return // hash collision: drop this update
		}
		s.total = saturate.Add(s.total, w)
		e.count = saturate.Add(e.count, w)
		e.event(write)
		s.down(int(e.hpos))
		return
	}
	s.total = saturate.Add(s.total, w)
	if len(s.ents) < s.capacity {
		i := int32(len(s.ents))
		s.ents = append(s.ents, ssEntry{key: bytes.Clone(key), hash: h, count: w, hpos: int32(len(s.heap))})
		s.ents[i].event(write)
		s.heap = append(s.heap, i)
		s.index.set(pos, h, i)
		s.up(len(s.heap) - 1)
		return
	}
	i = s.heap[0]
	e := &s.ents[i]
	s.index.remove(e.hash)
	e.key = append(e.key[:0], key...)
	e.hash = h
	e.err = e.count
	e.count = saturate.Add(e.count, w)
	e.reads, e.writes = 0, 0
	e.event(write)
	pos, _ = s.index.find(h) // the removal may have moved the free cell
	s.index.set(pos, h, i)
	s.evicted = true
	s.down(0)
}

// ssIndex maps key hashes to slots: open addressing with linear probing in
// a power-of-two table at most half full, with backward-shift deletion (no
// tombstones), sized once for the summary's capacity.
type ssIndex struct {
	mask  uint64
	cells []ssCell
}

type ssCell struct {
	hash uint64
	slot int32 // slot+1; 0 = empty
}

func newSSIndex(capacity int) ssIndex {
	n := 4
	for n < 2*capacity {
		n *= 2
	}
	return ssIndex{mask: uint64(n - 1), cells: make([]ssCell, n)}
}

// find returns the slot holding hash h, or -1 and the empty cell where h
// would go.
func (x *ssIndex) find(h uint64) (pos int, slot int32) {
	for i := h & x.mask; ; i = (i + 1) & x.mask {
		c := &x.cells[i]
		if c.slot == 0 {
			return int(i), -1
		}
		if c.hash == h {
			return int(i), c.slot - 1
		}
	}
}

func (x *ssIndex) set(pos int, h uint64, slot int32) {
	x.cells[pos] = ssCell{hash: h, slot: slot + 1}
}

// remove deletes hash h (which must be present) and shifts the rest of its
// probe run back so that every remaining hash stays reachable from its home
// cell.
func (x *ssIndex) remove(h uint64) {
	hole, _ := x.find(h)
	for j := (uint64(hole) + 1) & x.mask; x.cells[j].slot != 0; j = (j + 1) & x.mask {
		// The cell at j may fill the hole unless its home lies cyclically in
		// (hole, j].
		home := x.cells[j].hash & x.mask
		if (j-home)&x.mask < (j-uint64(hole))&x.mask {
			continue
		}
		x.cells[hole] = x.cells[j]
		hole = int(j)
	}
	x.cells[hole] = ssCell{}
}

// min is the smallest count (0 for an empty summary).
func (s *spaceSaving) min() uint64 {
	if len(s.heap) == 0 {
		return 0
	}
	return s.ents[s.heap[0]].count
}

// degraded reports whether the summary's error bound is too weak to trust.
// Once an entry has been replaced, every entry's error and every absent key's
// weight are bounded only by the smallest count m (m <= total/capacity). The
// summary is degraded when m exceeds half that ceiling, m > total/(2·capacity):
// the weight is spread so evenly that the bound is near its worst. A summary
// that never replaced an entry is exact and never degraded, and one in which
// a single key holds more than (capacity+1)/(2·capacity) of the weight (just
// over half) never is either: the other capacity-1 entries then share less
// than total·(capacity-1)/(2·capacity), so their minimum is below
// total/(2·capacity).
func (s *spaceSaving) degraded() bool {
	if !s.evicted {
		return false
	}
	// m·2·capacity > total, in 128 bits.
	hi, lo := bits.Mul64(s.min(), 2*uint64(s.capacity))
	return hi > 0 || lo > s.total
}

// top returns the entries, heaviest first (ties by key), as report entries.
func (s *spaceSaving) top() []*api.TopKeyCount {
	es := slices.Clone(s.ents)
	slices.SortFunc(es, func(a, b ssEntry) int {
		if a.count != b.count {
			if a.count > b.count {
				return -1
			}
			return 1
		}
		return bytes.Compare(a.key, b.key)
	})
	out := make([]*api.TopKeyCount, len(es))
	for i, e := range es {
		out[i] = &api.TopKeyCount{Key: bytes.Clone(e.key), Count: e.count, Error: e.err, SampledReads: e.reads, SampledWrites: e.writes}
	}
	return out
}

func (s *spaceSaving) less(i, j int) bool {
	return s.ents[s.heap[i]].count < s.ents[s.heap[j]].count
}

func (s *spaceSaving) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !s.less(i, p) {
			return
		}
		s.swap(i, p)
		i = p
	}
}

func (s *spaceSaving) down(i int) {
	n := len(s.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && s.less(r, c) {
			c = r
		}
		if !s.less(c, i) {
			return
		}
		s.swap(i, c)
		i = c
	}
}

func (s *spaceSaving) swap(i, j int) {
	s.heap[i], s.heap[j] = s.heap[j], s.heap[i]
	s.ents[s.heap[i]].hpos = int32(i)
	s.ents[s.heap[j]].hpos = int32(j)
}
