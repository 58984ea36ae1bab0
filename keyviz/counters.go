package keyviz

import (
	"sync/atomic"
	"unsafe"
)

// A block holds one route's counters for one column:
//
//	c[0], c[1]          read bytes, write bytes
//	c[2+2i], c[3+2i]    reads and writes that fell in bucket i
//
// Every observation is exactly one atomic add to one count word (plus one to
// a byte word for ObserveSize), so a column's reads, writes and weighted
// bucket counts are derived from the same words and always agree. A block
// whose words several cores add to at once gets stripes, copies of its
// words, and its counts are then the sums over the block's words and its
// stripes' (stripes.go).
//
// Closing a column drains a block by swapping each word with the seal bit.
// Adds to one word are totally ordered with that swap: an add before it is in
// the value the swap returns; an add after it returns a value with the seal
// bit set, and the observer repeats it in the route's next block. So an
// observation racing with a close is counted exactly once, in one of the two
// columns, and the close never waits for observers. Sealed blocks are never
// reused (the garbage collector frees them once no straggler holds them).
type block struct {
	seed uint64 // mixes the sampling decision; see sampled
	c    []atomic.Uint64
	hot  atomic.Pointer[stripeSet] // nil until striped; sealedStripes once closed
}

const (
	sealed = uint64(1) << 63

	// Words per cache line: blocks are padded to whole lines so that
	// observers of different routes do not share one.
	lineWords = 8
	// maxBlockWords is the block length of a route with MaxBuckets buckets.
	maxBlockWords = (2 + 2*maxBuckets + lineWords - 1) / lineWords * lineWords

	golden = 0x9e3779b97f4a7c15
)

func blockWords(k int) int {
	return (2 + 2*k + lineWords - 1) / lineWords * lineWords
}

// sealedBlock is installed in the entries of routes that left the table or
// whose layout changed: an observer still holding such an entry finds every
// word sealed and looks its route up again.
var sealedBlock = func() *block {
	b := &block{c: make([]atomic.Uint64, maxBlockWords)}
	for i := range b.c {
		b.c[i].Store(sealed)
	}
	b.hot.Store(sealedStripes)
	return b
}()

// byteWord is the word of a block that sums the bytes of reads or writes.
func byteWord(write bool) int {
	if write {
		return 1
	}
	return 0
}

// drain seals every word of b and of its stripes and returns the counts they
// held, and the stripes if b had any. The stripe pointer is sealed first, so
// that b cannot be striped once drained. dst must be at least len(b.c) long.
func (b *block) drain(dst []uint64) ([]uint64, *stripeSet) {
	dst = dst[:len(b.c)]
	st := b.hot.Swap(sealedStripes)
	for i := range b.c {
		dst[i] = b.c[i].Swap(sealed) &^ sealed
	}
	if st == sealedStripes {
		st = nil
	}
	if st != nil {
		st.drainStripes(dst)
	}
	return dst, st
}

// sampled decides whether the observation that moved a count word to v feeds
// the sketch. Every add returns a distinct v, so hashing v (with a seed drawn
// per column and route) picks a pseudo-random one in sampleRate observations
// of each word without a random-number call (which would double the cost of
// Observe; see bench_test.go). Unlike a plain "every n-th" counter it does
// not alias with periodic request patterns. The hash is the murmur3/splitmix
// finalizer.
func sampled(v, seed, max uint64) bool {
	x := v ^ seed
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x <= max
}

// An arena hands out the blocks of one column from two preallocated slices,
// so that the first observation of a route in a column does not allocate.
// It is sized by the closer from the previous column's use; when it runs out,
// blocks come from the heap. It also holds the column's striping budget.
type arena struct {
	seed      uint64
	words     []atomic.Uint64
	blocks    []block
	nextWord  atomic.Uint64
	nextBlock atomic.Uint64
	overflow  atomic.Uint64 // words allocated from the heap instead

	stripes int           // per striped block
	striped atomic.Uint64 // blocks striped (or refused by the cap)
}

const (
	minArenaWords  = 64 * lineWords
	minArenaBlocks = 64
)

func newArena(words, blocks int, seed uint64) *arena {
	return &arena{
		seed:    seed,
		words:   alignedWords(words, lineWords),
		blocks:  make([]block, blocks),
		stripes: stripeCount(),
	}
}

// next returns an arena sized for the use of a, given that the table needs
// at most maxWords words in at most maxBlocks blocks.
func (a *arena) next(maxWords, maxBlocks int, seed uint64) *arena {
	used := min(a.nextWord.Load(), uint64(len(a.words))) + a.overflow.Load()
	w := used + used/4
	nb := a.nextBlock.Load() // counts heap blocks too: alloc bumps it first
	b := nb + nb/4
	return newArena(
		int(max(min(w, uint64(maxWords)), minArenaWords)),
		int(max(min(b, uint64(maxBlocks)), minArenaBlocks)),
		seed,
	)
}

// alloc returns a zeroed block of n words for the route with the given id.
// The caller publishes it with a compare-and-swap, which orders these plain
// writes before any observer's use.
func (a *arena) alloc(n int, id uint64) *block {
	var b *block
	if i := a.nextBlock.Add(1) - 1; i < uint64(len(a.blocks)) {
		b = &a.blocks[i]
	} else {
		b = new(block)
	}
	if end := a.nextWord.Add(uint64(n)); end <= uint64(len(a.words)) {
		b.c = a.words[end-uint64(n) : end : end]
	} else {
		a.overflow.Add(uint64(n))
		b.c = alignedWords(n, lineWords)
	}
	b.seed = a.seed ^ id*golden
	return b
}

// alignedWords returns n zeroed words starting on a boundary of align words.
func alignedWords(n, align int) []atomic.Uint64 {
	w := make([]atomic.Uint64, n+align-1)
	off := 0
	if r := uintptr(unsafe.Pointer(&w[0])) % uintptr(align*8); r != 0 {
		off = int((uintptr(align*8) - r) / 8)
	}
	return w[off : off+n : off+n]
}
