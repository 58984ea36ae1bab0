package keyviz

import (
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/hotsplit/hotsplit/catalog"
)

// Striped counters for contended routes.
//
// A route's block is one set of words that every observer of the route adds
// to. When several cores observe one route at once those words — and the
// byte words every ObserveSize adds to, and the route's sketch — bounce
// between the cores' caches and the cores take turns: two goroutines on one
// hot route went no faster than one. So a block whose counters are contended
// gets stripes for the rest of its column: stripeCount copies of its words,
// each padded to whole 128-byte line pairs, each with a buffer for its
// sampled observations, and each observer adds to the stripe it picks.
//
// When: at every probeEvery-th (4096th) add to one of its count words in a
// column, the observer polls that word (probeSpins loads, about a
// microsecond: busy). If the word changes meanwhile, another core is adding
// to it at that very moment, and the observer stripes the block. A goroutine
// alone never sees its own words change while it polls, so a route observed
// from one goroutine is not striped (unless the goroutine is preempted
// mid-poll and another takes over its P), and a seeded single-goroutine
// replay, like simlab's, samples exactly as an unstriped sampler would.
// The probe costs about a
// microsecond per 4096 observations of a word, under 0.3 ns per
// observation. Other signals were worse: the add's own — a failed
// compare-and-swap — was too rare, since contention costs line transfers
// rather than failed swaps (two cores hammering one word on the 2-core AMD
// VM failed about 3 times per million observations); a count threshold
// alone stripes every lukewarm route of a long column, and the cap would go
// to the first of them rather than to the contended ones. Striping lasts for
// the column: the next column's block starts unstriped and is striped again
// at a busy probe, a few thousand observations into the column of a route
// that is still contended.
//
// Which stripe: six bits of a multiplicative hash of the address of a
// variable on the observer's stack, at a rotation chosen by a salt of the
// stripe set. Goroutines' stacks are disjoint, so goroutines get stripes at
// random but each keeps its own (until its stack moves); there are twice as
// many stripes as Ps, so the goroutines running at one moment mostly hold
// different ones. Two
// goroutines that share a stripe find out when one finds the stripe's sample
// buffer locked by the other, or when a probe of a stripe word (as of block
// words) is busy; either moves the salt, which reshuffles every goroutine's
// stripe. No random number is drawn per call, and picking costs a few
// instructions: a per-P hint held in a sync.Pool cost 15 ns per observation
// more and a shared round-robin ticket is itself a contended word
// (BenchmarkStripeHint).
//
// Sampled observations of a striped route are buffered per stripe
// (sampleBuf) and fed to the route's sketch 64 at a time, or at the close:
// each feed moves the sketch's lines to the feeding core, and feeding one
// at a time cost a striped route on two cores about a fifth of its
// observation.
//
// Memory bound: at most maxStripedRoutes (64) blocks are striped per column
// (counted on the column's arena), each with stripeCount stripes — twice
// GOMAXPROCS rounded up to a power of two, in [2, maxStripes = 16] — of
// (2+2k rounded up to 16) 8-byte words plus a 2304-byte sample buffer. With
// 16 buckets a stripe is 2.6 KiB: 10.5 KiB per striped route on a 2-core
// node, 42 KiB with 16 stripes, and at most 2.6 MiB per column; at the
// 256-bucket maximum 6.4 KiB a stripe and 6.4 MiB per column. A column's stripes are
// allocated when its blocks are striped (one allocation per striped route
// and column, not per observation) and freed with them.
//
// Exactly once: stripe words are sealed and drained at the close like the
// block's own words (see block), and the block's stripe pointer is swapped
// for sealedStripes first, so a block cannot be striped after the close
// looked at it: an observation counted in a stripe is in the column that
// drains it, one that finds its stripe sealed is repeated in the route's
// next block. The close then seals the stripes' sample buffers and feeds
// what they hold to the closing column's sketch; a sample that finds its
// buffer sealed goes to the route's sketch directly, like any sample racing
// with a close.

const (
	// probeEvery is how many adds to a count word lie between two probes
	// of it for another core.
	probeEvery = 4096
	// probeSpins is how many times a probe loads the word: about a
	// microsecond on the 2-core VM, enough for another core's add to reach
	// the word and for this core to see it (two line transfers).
	probeSpins = 2048
	// maxStripedRoutes caps the blocks striped per column.
	maxStripedRoutes = 64
	// maxStripes caps the stripes of a block.
	maxStripes = 16
	// stripeAlign is a stripe's alignment in words: 128 bytes, a pair of
	// lines, as adjacent-line prefetchers fetch them.
	stripeAlign = 16
	// maxStripeWords is the stripe length of a route with MaxBuckets buckets.
	maxStripeWords = (maxBlockWords + stripeAlign - 1) / stripeAlign * stripeAlign
	// stripeShift places a stripe's index above any count in the value
	// the sampling decision hashes, so the stripes of a block do not sample
	// at the same counts.
	stripeShift = 52
)

// stripeSet is one block's stripes: stripe i's copy of block word w is
// c[i*words+w] (words past the block's length are padding), and bufs[i]
// holds its sampled observations.
type stripeSet struct {
	mask  uint64 // stripes - 1
	words int
	// Mixed into the stripe picks, and moved when goroutines collide.
	salt atomic.Uint64
	c    []atomic.Uint64
	bufs []sampleBuf
}

// sampleBuf holds a stripe's sampled observations until it is full or the
// close takes them, so that the cores of a striped route do not take turns
// on the route's sketch for each one: a full buffer is fed to the sketch
// under one lock. The keys are copied; a key longer than the buffer is fed
// at once. The sketch gets the same observations, in another order, so its
// guarantees (spacesaving.go) and the reservoir's uniformity are those of
// the unstriped route.
type sampleBuf struct {
	mu     sync.Mutex
	sealed bool // the close took the buffer: feed the sketch directly
	n      int
	used   int    // bytes of keys
	writes uint64 // bit i: observation i is a write
	ends   [sampleBufLen]uint16
	keys   [sampleBufBytes]byte
	_      [sampleBufPad]byte
}

const (
	sampleBufLen   = 64
	sampleBufBytes = 2048
	// Pads a buffer to a multiple of 128 bytes (with 8-byte words).
	sampleBufPad = 128 - (8+8+8+8+8+2*sampleBufLen+sampleBufBytes)%128
)

// sealedStripes is installed in a block's stripe pointer by the close, and in
// sealedBlock's: every word is sealed, so an observer that reaches it
// repeats its observation in the route's next block, and no block is striped
// after its close.
var sealedStripes = func() *stripeSet {
	st := &stripeSet{words: maxStripeWords, c: make([]atomic.Uint64, maxStripeWords)}
	for i := range st.c {
		st.c[i].Store(sealed)
	}
	return st
}()

// newStripeSet returns the stripes of a block of blockWords words; salt
// (the block's sampling seed) varies the stripe hints from column to column.
func newStripeSet(stripes, blockWords int, salt uint64) *stripeSet {
	w := (blockWords + stripeAlign - 1) / stripeAlign * stripeAlign
	st := &stripeSet{
		mask:  uint64(stripes - 1),
		words: w,
		c:     alignedWords(stripes*w, stripeAlign),
		bufs:  make([]sampleBuf, stripes),
	}
	st.salt.Store(salt)
	return st
}

// stripeCount is the stripes a block gets: twice GOMAXPROCS rounded up to a
// power of two, in [2, maxStripes]. Twice, so that the goroutines running
// at one moment (at most GOMAXPROCS) mostly land on different stripes.
func stripeCount() int {
	n := 2
	for n < 2*runtime.GOMAXPROCS(0) && n < maxStripes {
		n *= 2
	}
	return n
}

// pick is the stripe of the calling goroutine: six bits of a multiplicative
// hash of the address of a variable on its stack (goroutines' stacks are
// disjoint), at a rotation the set's salt chooses. The hash does not wait
// for the salt's load: the chain of dependent loads and multiplies before
// the add is what a striped observation pays for (hashing the salt in, and
// a slice per stripe, made it 30 % slower than an unstriped one; this is
// 8 %).
func (st *stripeSet) pick() uint64 {
	var x byte
	h := uint64(uintptr(unsafe.Pointer(&x))) * golden
	return bits.RotateLeft64(h, int(st.salt.Load()&63)) >> (64 - 6) & st.mask
}

// observeStriped counts an observation of word w in the stripes st of e's
// block b, and reports false without counting it if the close sealed them.
func (s *Sampler) observeStriped(e *routeEntry, b *block, st *stripeSet, w int, key []byte, write bool, n uint64) bool {
	i := st.pick()
	o := int(i) * st.words
	v := st.c[o+w].Add(1)
	if v&sealed != 0 {
		return false
	}
	if v%probeEvery == 0 {
		s.probeStripe(st, &st.c[o+w], v)
	}
	if n != 0 && st.c[o+byteWord(write)].Add(n)&sealed != 0 {
		s.addBytesNext(e, write, n)
	}
	if sampled(v+i<<stripeShift, b.seed, s.sampleMax) {
		s.sampleStriped(e, st, &st.bufs[i], key, write)
	}
	return true
}

// sampleStriped buffers a sampled observation of a striped route in its
// stripe's buffer sb, one of st's, feeding the buffer to the route's sketch
// when it is full. Finding sb locked means another goroutine shares the
// stripe: it moves st's salt. Once the close took sb, the observation goes to the route's sketch
// directly, like any sample racing with a close.
func (s *Sampler) sampleStriped(e *routeEntry, st *stripeSet, sb *sampleBuf, key []byte, write bool) {
	if len(key) > catalog.MaxKeyLen {
		s.keyTooLong.Add(1)
		return
	}
	if !sb.mu.TryLock() {
		st.salt.Add(golden) // another goroutine is on this stripe: reshuffle
		sb.mu.Lock()
	}
	if !sb.sealed && len(key) <= sampleBufBytes {
		switch {
		case sb.n == sampleBufLen || sb.used+len(key) > sampleBufBytes:
			s.flushSamples(e, sb, true)
		case sb.n >= sampleBufLen/2 || sb.used+len(key) > sampleBufBytes/2:
			s.flushSamples(e, sb, false)
		}
		sb.used += copy(sb.keys[sb.used:], key)
		sb.ends[sb.n] = uint16(sb.used)
		if write {
			sb.writes |= 1 << sb.n
		}
		sb.n++
		sb.mu.Unlock()
		return
	}
	sb.mu.Unlock()
	s.sample(e, key, write)
}

// flushSamples feeds sb's observations to e's sketch for the open column
// (or, if its route left the table meanwhile, drops them as sample does).
// Unless wait, it gives up if another goroutine holds the sketch: a half
// full buffer is fed when the sketch is free, and only a full one waits for
// it, so that the goroutines of a striped route seldom queue on the sketch
// (a goroutine that blocks on a mutex sleeps, and the route is back to one
// core). The caller holds sb.mu.
func (s *Sampler) flushSamples(e *routeEntry, sb *sampleBuf, wait bool) {
	id := e.id
	for {
		bx := e.sk.Load()
		if bx == nil {
			bx = s.newBox(e)
		}
		if !bx.mu.TryLock() {
			if !wait {
				return
			}
			bx.mu.Lock()
		}
		if !bx.sealed {
			sb.feed(bx)
			bx.mu.Unlock()
			return
		}
		bx.mu.Unlock()
		if e = s.table.Load().lookup(id); e == nil {
			sb.n, sb.used, sb.writes = 0, 0, 0
			return
		}
	}
}

// feed moves sb's observations into bx. The caller holds sb.mu and bx.mu.
func (sb *sampleBuf) feed(bx *sketchBox) {
	off := 0
	for i := range sb.n {
		end := int(sb.ends[i])
		bx.feed(sb.keys[off:end], sb.writes&(1<<i) != 0)
		off = end
	}
	sb.n, sb.used, sb.writes = 0, 0, 0
}

// takeSamples seals st's buffers and feeds what they hold to bx, the
// sketch of the column being closed (made with the column's weights if the
// route had none). The close calls it after draining the block that st
// belongs to.
func (s *Sampler) takeSamples(st *stripeSet, bx *sketchBox, ww, wr uint64) *sketchBox {
	for i := range st.bufs {
		sb := &st.bufs[i]
		sb.mu.Lock()
		sb.sealed = true
		if sb.n > 0 {
			if bx == nil {
				bx = s.makeBox(ww, wr)
			}
			bx.mu.Lock()
			sb.feed(bx)
			bx.mu.Unlock()
		}
		sb.mu.Unlock()
	}
	return bx
}

// probe polls word w of e's block b, which the caller just moved to v, and
// stripes b if another core adds to it meanwhile.
func (s *Sampler) probe(e *routeEntry, b *block, w int, v uint64) {
	if busy(&b.c[w], v, s.probeSpins) {
		s.stripe(e, b)
	}
}

// probeStripe polls the stripe word p, which the caller just moved to v,
// and reshuffles the stripes if another goroutine adds to it meanwhile: it
// shares the caller's stripe.
func (s *Sampler) probeStripe(st *stripeSet, p *atomic.Uint64, v uint64) {
	if busy(p, v, s.probeSpins) {
		st.salt.Add(golden)
	}
}

// busy reports whether the word p, just moved to v by the caller, changes
// while the caller polls it: whether another core is adding to it now.
func busy(p *atomic.Uint64, v uint64, spins int) bool {
	for range spins {
		if p.Load() != v {
			return true
		}
	}
	return false
}

// stripe gives e's block b stripes for the rest of its column, unless the
// column's cap is reached or the close sealed b first.
func (s *Sampler) stripe(e *routeEntry, b *block) {
	a := s.arena.Load()
	if a.striped.Add(1) > maxStripedRoutes {
		return
	}
	if b.hot.CompareAndSwap(nil, newStripeSet(a.stripes, e.words, b.seed)) {
		s.stripedRoutes.Add(1)
	}
}

// drainStripes adds the counts held in st to dst and seals them.
func (st *stripeSet) drainStripes(dst []uint64) {
	for i := range int(st.mask) + 1 {
		c := st.c[i*st.words : i*st.words+len(dst)]
		for w := range c {
			dst[w] += c[w].Swap(sealed) &^ sealed // far below 2^63 each
		}
	}
}
