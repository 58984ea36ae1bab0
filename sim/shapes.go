package sim

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// The workloads of real key shapes: narrow, pair, incidental and
// oscillate. Like the others they are pure functions of their options and
// the seed.

// narrowPattern is what narrow's prefixes are cut from: a key shape of
// real stores (tenant, table, time-ordered id), repeated as needed.
const narrowPattern = "tenant:0042:orders:2026-12-03T18:00:00.000Z:shard-7:"

// narrowPrefix is the first n bytes of narrowPattern repeated.
func narrowPrefix(n int) string {
	return strings.Repeat(narrowPattern, n/len(narrowPattern)+1)[:n]
}

// narrow: HotKeys keys under a PrefixLen-byte prefix, all the load uniform
// over them. In a route that spans everything, every key falls into one
// bucket of the 8-byte layout window once the prefix is 8 bytes or more:
// only sampled keys can place a useful split key.
type narrow struct {
	base
	prefixLen int
}

func newNarrow(opts WorkloadOptions) (Workload, error) {
	if opts.PrefixLen < 1 || opts.PrefixLen > MaxPrefixLen {
		return nil, fmt.Errorf("%w: prefix-len %d: want 1 to %d bytes", ErrInvalidWorkload, opts.PrefixLen, MaxPrefixLen)
	}
	keys, err := NewPrefixedKeySpace(narrowPrefix(opts.PrefixLen), opts.HotKeys)
	if err != nil {
		return nil, err
	}
	if !(opts.WriteFraction >= 0 && opts.WriteFraction <= 1) {
		return nil, fmt.Errorf("%w: write-fraction %v: want a fraction in [0, 1]", ErrInvalidWorkload, opts.WriteFraction)
	}
	return &narrow{base: base{name: Narrow, keys: keys, writeFrac: opts.WriteFraction, write: fraction53(opts.WriteFraction)},
		prefixLen: opts.PrefixLen}, nil
}

func (w *narrow) String() string {
	return fmt.Sprintf("narrow: %d keys %s..%s under a %d-byte prefix, uniform, %s",
		w.keys.n, w.keys.Key(0), w.keys.Key(w.keys.n-1), w.prefixLen, w.mix())
}

func (w *narrow) Hotspot(time.Duration) (uint64, uint64, bool) { return 0, w.keys.n, true }

func (w *narrow) Stream(r *rand.Rand) Stream { return &uniformStream{w: &uniform{base: w.base}, r: r} }

// pair: two adjacent keys (index floor(n/φ) and the next) with PairShare
// of the operations each, the rest uniform.
type pair struct {
	base
	share  float64
	shareT uint64
	at     uint64
}

func newPair(b base, opts WorkloadOptions) (Workload, error) {
	if !(opts.PairShare > 0 && opts.PairShare <= 0.5) {
		return nil, fmt.Errorf("%w: pair-share %v: want a share in (0, 0.5]", ErrInvalidWorkload, opts.PairShare)
	}
	return &pair{base: b, share: opts.PairShare, shareT: fraction53(opts.PairShare), at: min(golden(b.keys.n), b.keys.n-2)}, nil
}

func (w *pair) String() string {
	return fmt.Sprintf("pair: %s of ops on each of %s and %s, the rest uniform over %d keys, %s",
		percent(w.share), w.keys.Key(w.at), w.keys.Key(w.at+1), w.keys.n, w.mix())
}

func (w *pair) Hotspot(time.Duration) (uint64, uint64, bool) { return w.at, w.at + 2, true }

func (w *pair) Stream(r *rand.Rand) Stream { return &pairStream{w: w, r: r} }

type pairStream struct {
	w *pair
	r *rand.Rand
}

func (s *pairStream) Next(time.Duration) (uint64, bool) {
	w := s.w
	d := s.r.Uint64() >> 11
	var k uint64
	switch {
	case d < w.shareT:
		k = w.at
	case d < 2*w.shareT:
		k = w.at + 1
	default:
		k = s.r.Uint64N(w.keys.n)
	}
	return k, w.writes(s.r)
}

// modulated is incidental and oscillate: a hot range (at hotrange's place)
// whose share may alternate over time, plus — for incidental — one key in
// the middle of the range written by IncidentalShare of the operations.
//
// incidental: the range is read-only (its reads are the hot load), the
// incidental key is write-only, the rest is uniform with the write fraction.
// oscillate: the range's share alternates between HotShare·(1+Amplitude)
// and HotShare·(1−Amplitude) every OscillateEvery, starting high; the rest
// is uniform. Put the range's mean load at the threshold (with the rate)
// and it oscillates ±Amplitude around it.
type modulated struct {
	base
	share, amp float64
	hiT, loT   uint64 // fraction53 of the range's share in high and low phases
	width      uint64
	start      uint64
	every      time.Duration // 0: never alternates
	incShare   float64
	incT       uint64 // fraction53(incShare)
	incKey     uint64
}

func newModulated(b base, opts WorkloadOptions) (Workload, error) {
	share, err := hotShare(opts.HotShare, DefaultHotRangeShare)
	if err != nil {
		return nil, err
	}
	if !(opts.HotWidth > 0 && opts.HotWidth <= MaxHotWidth) {
		return nil, fmt.Errorf("%w: hot-width %v: want a share of the key space in (0, %v]", ErrInvalidWorkload, opts.HotWidth, MaxHotWidth)
	}
	width := max(uint64(opts.HotWidth*float64(b.keys.n)), 1)
	m := &modulated{base: b, share: share, width: width, start: min(b.keys.n-golden(b.keys.n), b.keys.n-width)}
	if b.name == Oscillate {
		if !(opts.Amplitude >= 0 && opts.Amplitude < 1) || share*(1+opts.Amplitude) > 1 {
			return nil, fmt.Errorf("%w: amplitude %v: want [0, 1) with hot-share·(1+amplitude) at most 1", ErrInvalidWorkload, opts.Amplitude)
		}
		if opts.OscillateEvery < MinShiftEvery || opts.OscillateEvery > MaxShiftEvery {
			return nil, fmt.Errorf("%w: oscillate-every %v: want a duration in [%v, %v]", ErrInvalidWorkload, opts.OscillateEvery, MinShiftEvery, MaxShiftEvery)
		}
		m.amp, m.every = opts.Amplitude, opts.OscillateEvery
	} else {
		if !(opts.IncidentalShare > 0 && opts.IncidentalShare <= 1-share) {
			return nil, fmt.Errorf("%w: incidental-share %v: want a share in (0, 1-hot-share]", ErrInvalidWorkload, opts.IncidentalShare)
		}
		m.incShare, m.incT, m.incKey = opts.IncidentalShare, fraction53(opts.IncidentalShare), m.start+width/2
	}
	m.hiT, m.loT = fraction53(share*(1+m.amp)), fraction53(share*(1-m.amp))
	return m, nil
}

// IncidentalKey is incidental's written key, and false for other workloads.
func IncidentalKey(w Workload) ([]byte, bool) {
	m, ok := w.(*modulated)
	if !ok || m.incShare == 0 {
		return nil, false
	}
	return m.keys.Key(m.incKey), true
}

func (w *modulated) String() string {
	rng := fmt.Sprintf("[%s, %s) (%d keys)", w.keys.Key(w.start), w.keys.Key(w.start+w.width), w.width)
	rest := fmt.Sprintf("the rest uniform over %d keys, %s", w.keys.n, w.mix())
	if w.name == Incidental {
		return fmt.Sprintf("incidental: %s of ops read %s, %s write %s, %s", percent(w.share), rng, percent(w.incShare), w.keys.Key(w.incKey), rest)
	}
	return fmt.Sprintf("oscillate: %s±%s of ops in %s, alternating every %v, %s", percent(w.share), percent(w.amp), rng, w.every, rest)
}

func (w *modulated) Hotspot(time.Duration) (uint64, uint64, bool) {
	return w.start, w.start + w.width, true
}

// high reports whether the range is in its high phase at operation time at.
func (w *modulated) high(at time.Duration) bool {
	return w.every == 0 || (max(at, 0)/w.every)%2 == 0
}

func (w *modulated) Stream(r *rand.Rand) Stream { return &modulatedStream{w: w, r: r} }

type modulatedStream struct {
	w *modulated
	r *rand.Rand
}

func (s *modulatedStream) Next(at time.Duration) (uint64, bool) {
	w := s.w
	t := w.loT
	if w.high(at) {
		t = w.hiT
	}
	d := s.r.Uint64() >> 11
	switch {
	case d < t:
		k := w.start + s.r.Uint64N(w.width)
		if w.incShare != 0 {
			return k, false // incidental's range is read-hot
		}
		return k, w.writes(s.r)
	case d < t+w.incT:
		return w.incKey, true
	}
	return s.r.Uint64N(w.keys.n), w.writes(s.r)
}
