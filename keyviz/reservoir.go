package keyviz

import (
	"bytes"
	"math/bits"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// ReservoirSize is how many sampled operations a route's column keeps as
// its operation sample: where the load lies inside the route, for a split
// key that balances it (the detector's balance point, docs/design.md).
// Three reporters' samples place a cut within about 5% of the load.
const ReservoirSize = 32

// reservoir is a uniform sample of up to ReservoirSize of the sampled
// operations fed to it (Vitter's algorithm R): after n operations each is
// in it with probability ReservoirSize/n, reads and writes alike. Keys are
// copied into one buffer that grows only when a replacing key does not fit
// its slot, so a warmed-up reservoir does not allocate. Not safe for
// concurrent use; the sketch box's mutex guards it.
type reservoir struct {
	seen  uint64
	rng   uint64 // xorshift64* state, never 0
	n     int
	slots [ReservoirSize]resSlot
	buf   []byte
}

type resSlot struct {
	off, n, cap int // key bytes in buf[off : off+n], room for cap
	write       bool
}

func newReservoir(seed uint64) *reservoir {
	return &reservoir{rng: seed | 1, buf: make([]byte, 0, ReservoirSize*32)}
}

// add offers one sampled operation.
func (r *reservoir) add(key []byte, write bool) {
	r.seen++
	i := r.n
	if r.n == ReservoirSize {
		// Replace a uniform slot with probability ReservoirSize/seen:
		// j uniform in [0, seen) by multiply-shift, kept if below the size.
		r.rng ^= r.rng >> 12
		r.rng ^= r.rng << 25
		r.rng ^= r.rng >> 27
		j, _ := bits.Mul64(r.rng*0x2545f4914f6cdd1d, r.seen)
		if j >= ReservoirSize {
			return
		}
		i = int(j)
	} else {
		r.n++
		r.slots[i] = resSlot{off: len(r.buf), cap: len(key)}
		r.buf = append(r.buf, key...)
	}
	s := &r.slots[i]
	if len(key) > s.cap {
		s.off, s.cap = len(r.buf), len(key)
		r.buf = append(r.buf, key...)
	} else {
		copy(r.buf[s.off:], key)
	}
	s.n, s.write = len(key), write
}

// samples returns the sample as report entries, by key, duplicates merged.
func (r *reservoir) samples() []*api.SampledKey {
	if r == nil || r.n == 0 {
		return nil
	}
	key := func(s resSlot) []byte { return r.buf[s.off : s.off+s.n] }
	slots := slices.Clone(r.slots[:r.n])
	slices.SortFunc(slots, func(a, b resSlot) int { return bytes.Compare(key(a), key(b)) })
	out := make([]*api.SampledKey, 0, len(slots))
	for _, s := range slots {
		if n := len(out); n == 0 || !bytes.Equal(out[n-1].Key, key(s)) {
			out = append(out, &api.SampledKey{Key: bytes.Clone(key(s))})
		}
		e := out[len(out)-1]
		if s.write {
			e.Writes++
		} else {
			e.Reads++
		}
	}
	return out
}
