package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrInvalidWorkload is wrapped by ParseWorkload and NewKeySpace when a
// workload name or option is wrong; the message names the option as the
// `hotsplitctl sim` flag spells it (workload, key-space, write-fraction,
// hot-share, hot-width, skew, shift-every).
var ErrInvalidWorkload = errors.New("invalid workload")

// Workload names.
const (
	Uniform    = "uniform"
	Zipf       = "zipf"
	HotRange   = "hotrange"
	HotKey     = "hotkey"
	Shift      = "shift"
	Narrow     = "narrow"
	Pair       = "pair"
	Incidental = "incidental"
	Oscillate  = "oscillate"
)

// WorkloadNames lists the workloads ParseWorkload knows, in a fixed order.
func WorkloadNames() []string {
	return []string{Uniform, Zipf, HotRange, HotKey, Shift, Narrow, Pair, Incidental, Oscillate}
}

// Defaults of WorkloadOptions.
const (
	DefaultKeySpace         = 1_000_000
	DefaultWriteFraction    = 0.5
	DefaultHotKeyShare      = 0.9
	DefaultHotRangeShare    = 0.8
	DefaultHotWidth         = 0.01
	DefaultSkew             = 1.1
	DefaultShiftEvery       = 30 * time.Second
	DefaultPrefixLen        = 19
	DefaultHotKeys          = 1000
	DefaultPairShare        = 0.45
	DefaultIncidentalShare  = 0.01
	DefaultAmplitude        = 0.1
	DefaultOscillateEvery   = time.Minute
	MaxPrefixLen            = 1024
	MaxSkew                 = 100
	MaxHotWidth             = 0.5
	MinShiftEvery           = time.Millisecond
	MaxShiftEvery           = 24 * time.Hour
	defaultHotShareSentinel = 0
)

// WorkloadOptions parameterize a workload. Start from
// DefaultWorkloadOptions: every field is taken as given (a zero KeySpace is
// an error, a zero WriteFraction means read-only), except HotShare, whose
// zero means the workload's own default. Options a workload does not use
// are ignored.
type WorkloadOptions struct {
	// KeySpace is the number of distinct keys (see KeySpace).
	KeySpace uint64
	// WriteFraction is the share of operations that write, in [0, 1]; the
	// rest read. Every workload draws it independently of the key.
	WriteFraction float64
	// HotShare is the share of operations sent to the hot key (hotkey) or
	// into the hot range (hotrange, shift), in (0, 1]; the rest are uniform
	// over the whole key space. 0 takes DefaultHotKeyShare for hotkey and
	// DefaultHotRangeShare for hotrange and shift.
	HotShare float64
	// HotWidth is the hot range's share of the key space (hotrange, shift),
	// in (0, MaxHotWidth]; the range holds at least one key.
	HotWidth float64
	// Skew is zipf's exponent s, in (1, MaxSkew]: the key of popularity
	// rank k (from 0) is drawn with probability proportional to (k+1)^-s.
	Skew float64
	// ShiftEvery is how long (in operation time, see Stream) the shift
	// workload's hot range stays in one place, in [MinShiftEvery,
	// MaxShiftEvery].
	ShiftEvery time.Duration
	// PrefixLen and HotKeys shape narrow: HotKeys keys (2 to a billion)
	// sharing a prefix of PrefixLen bytes (1 to MaxPrefixLen), all the load
	// uniform over them.
	PrefixLen int
	HotKeys   uint64
	// PairShare is the share of the operations on each of pair's two
	// adjacent hot keys, in (0, 0.5].
	PairShare float64
	// IncidentalShare is the share of the operations that write
	// incidental's one key inside its read-hot range, in (0, 1-HotShare].
	IncidentalShare float64
	// Amplitude and OscillateEvery shape oscillate: the hot range's share
	// alternates between HotShare·(1+Amplitude) and HotShare·(1−Amplitude)
	// every OscillateEvery (in [MinShiftEvery, MaxShiftEvery]); Amplitude in
	// [0, 1).
	Amplitude      float64
	OscillateEvery time.Duration
}

// DefaultWorkloadOptions returns the defaults: a million keys, half writes,
// the workloads' own hot shares, a hot range of 1% of the keys, zipf skew
// 1.1, a shift every 30 s, narrow's 1000 keys under a 19-byte prefix,
// pair's 45% per key, incidental's 1% of writes, and oscillate's ±10%
// every minute.
func DefaultWorkloadOptions() WorkloadOptions {
	return WorkloadOptions{
		KeySpace:        DefaultKeySpace,
		WriteFraction:   DefaultWriteFraction,
		HotShare:        defaultHotShareSentinel,
		HotWidth:        DefaultHotWidth,
		Skew:            DefaultSkew,
		ShiftEvery:      DefaultShiftEvery,
		PrefixLen:       DefaultPrefixLen,
		HotKeys:         DefaultHotKeys,
		PairShare:       DefaultPairShare,
		IncidentalShare: DefaultIncidentalShare,
		Amplitude:       DefaultAmplitude,
		OscillateEvery:  DefaultOscillateEvery,
	}
}

// Workload is a key distribution and read/write mix. A Workload is
// immutable and safe for concurrent use; the Streams it makes are not.
type Workload interface {
	// Name is the workload's name as ParseWorkload takes it.
	Name() string
	// String describes the workload and its parameters in one line.
	String() string
	// Keys is the key space the workload draws from.
	Keys() KeySpace
	// Hotspot is the range of key indexes [lo, hi) the workload makes hot
	// at operation time at: the hot key (hotkey), the hot range (hotrange,
	// and shift at that time), the most popular key (zipf). ok is false
	// for uniform, which has none.
	Hotspot(at time.Duration) (lo, hi uint64, ok bool)
	// Stream returns a stream of operations drawing only from r, so that
	// the sequence is a pure function of r's seed.
	Stream(r *rand.Rand) Stream
}

// Stream draws operations. Not safe for concurrent use.
type Stream interface {
	// Next draws the next operation: the index of its key in Keys() and
	// whether it writes. at is the operation's time — its offset from the
	// start of the run as scheduled, not as observed — and only moves the
	// shift workload's hot range; the draws themselves never depend on it
	// otherwise.
	Next(at time.Duration) (key uint64, write bool)
}

// ParseWorkload returns the named workload with opts, checking the options
// the workload uses.
func ParseWorkload(name string, opts WorkloadOptions) (Workload, error) {
	if !slices.Contains(WorkloadNames(), name) {
		return nil, fmt.Errorf("%w: workload %q: want one of %s", ErrInvalidWorkload, name, strings.Join(WorkloadNames(), ", "))
	}
	if name == Narrow {
		return newNarrow(opts)
	}
	keys, err := NewKeySpace(opts.KeySpace)
	if err != nil {
		return nil, err
	}
	if !(opts.WriteFraction >= 0 && opts.WriteFraction <= 1) {
		return nil, fmt.Errorf("%w: write-fraction %v: want a fraction in [0, 1]", ErrInvalidWorkload, opts.WriteFraction)
	}
	b := base{name: name, keys: keys, writeFrac: opts.WriteFraction, write: fraction53(opts.WriteFraction)}
	switch name {
	case Uniform:
		return &uniform{base: b}, nil
	case Zipf:
		return newZipf(b, opts.Skew)
	case HotKey:
		share, err := hotShare(opts.HotShare, DefaultHotKeyShare)
		if err != nil {
			return nil, err
		}
		return &hotspot{base: b, share: share, shareT: fraction53(share), width: 1, start: golden(keys.n)}, nil
	case Pair:
		return newPair(b, opts)
	case Incidental, Oscillate:
		return newModulated(b, opts)
	default: // HotRange, Shift
		share, err := hotShare(opts.HotShare, DefaultHotRangeShare)
		if err != nil {
			return nil, err
		}
		if !(opts.HotWidth > 0 && opts.HotWidth <= MaxHotWidth) {
			return nil, fmt.Errorf("%w: hot-width %v: want a share of the key space in (0, %v]", ErrInvalidWorkload, opts.HotWidth, MaxHotWidth)
		}
		width := max(uint64(opts.HotWidth*float64(keys.n)), 1)
		h := &hotspot{base: b, share: share, shareT: fraction53(share), width: width,
			start: min(keys.n-golden(keys.n), keys.n-width)}
		if name == Shift {
			if err := h.setShift(opts.ShiftEvery); err != nil {
				return nil, err
			}
		}
		return h, nil
	}
}

func hotShare(v, def float64) (float64, error) {
	if v == defaultHotShareSentinel {
		return def, nil
	}
	if !(v > 0 && v <= 1) {
		return 0, fmt.Errorf("%w: hot-share %v: want a share in (0, 1]", ErrInvalidWorkload, v)
	}
	return v, nil
}

// base is what every workload shares: its name, keys and read/write mix.
type base struct {
	name      string
	keys      KeySpace
	writeFrac float64
	write     uint64 // fraction53(writeFrac)
}

func (b *base) Name() string   { return b.name }
func (b *base) Keys() KeySpace { return b.keys }

// writes draws the kind of one operation.
func (b *base) writes(r *rand.Rand) bool { return r.Uint64()>>11 < b.write }

func (b *base) mix() string {
	return "writes " + percent(b.writeFrac)
}

// uniform: every key equally likely.
type uniform struct{ base }

func (w *uniform) String() string {
	return fmt.Sprintf("uniform over %d keys %s..%s, %s", w.keys.n, w.keys.Key(0), w.keys.Key(w.keys.n-1), w.mix())
}

func (w *uniform) Hotspot(time.Duration) (uint64, uint64, bool) { return 0, 0, false }

func (w *uniform) Stream(r *rand.Rand) Stream { return &uniformStream{w: w, r: r} }

type uniformStream struct {
	w *uniform
	r *rand.Rand
}

func (s *uniformStream) Next(time.Duration) (uint64, bool) {
	k := s.r.Uint64N(s.w.keys.n)
	return k, s.w.writes(s.r)
}

// zipf draws popularity ranks from math/rand/v2's Zipf and scatters them
// over the key space with the bijection key = (rank·mul + add) mod n, so the
// popular keys are spread out like real hot keys rather than packed at the
// start of the key space (which would be a hot range instead).
type zipf struct {
	base
	skew     float64
	mul, add uint64
}

func newZipf(b base, skew float64) (*zipf, error) {
	if !(skew > 1 && skew <= MaxSkew) {
		return nil, fmt.Errorf("%w: skew %v: want an exponent in (1, %d]", ErrInvalidWorkload, skew, MaxSkew)
	}
	n := b.keys.n
	mul := max(golden(n), 1)
	for gcd(mul, n) != 1 {
		mul++
	}
	return &zipf{base: b, skew: skew, mul: mul, add: n - golden(n)}, nil
}

// keyOfRank is the key index of popularity rank k.
func (w *zipf) keyOfRank(k uint64) uint64 {
	return (mulMod(k, w.mul, w.keys.n) + w.add) % w.keys.n
}

func (w *zipf) String() string {
	return fmt.Sprintf("zipf s=%v over %d keys (hottest %s), %s", w.skew, w.keys.n, w.keys.Key(w.keyOfRank(0)), w.mix())
}

func (w *zipf) Hotspot(time.Duration) (uint64, uint64, bool) {
	k := w.keyOfRank(0)
	return k, k + 1, true
}

func (w *zipf) Stream(r *rand.Rand) Stream {
	return &zipfStream{w: w, r: r, z: rand.NewZipf(r, w.skew, 1, w.keys.n-1)}
}

type zipfStream struct {
	w *zipf
	r *rand.Rand
	z *rand.Zipf
}

func (s *zipfStream) Next(time.Duration) (uint64, bool) {
	k := s.w.keyOfRank(s.z.Uint64())
	return k, s.w.writes(s.r)
}

// hotspot is hotkey (a range of one key), hotrange (a fixed range) and
// shift (a range that moves every `every`): a share of the operations is
// uniform inside the range, the rest uniform over the whole key space.
//
// Positions: the hot key is the key of index floor(n/φ); the hot range
// starts at n - floor(n/φ) ≈ 0.382·n. Shift's range p (the p-th interval of
// `every`, from 0) starts at (start + p·stride) mod span, where span =
// n - width + 1 is the number of places a range fits and stride =
// floor(n/φ) mod span: consecutive places are about 0.38 or 0.62 of the key
// space apart and never overlap (ParseWorkload checks it), and the sequence
// does not repeat for a long time.
type hotspot struct {
	base
	share  float64
	shareT uint64 // fraction53(share)
	width  uint64
	start  uint64
	// shift only
	every        time.Duration
	stride, span uint64
}

func (h *hotspot) setShift(every time.Duration) error {
	if every < MinShiftEvery || every > MaxShiftEvery {
		return fmt.Errorf("%w: shift-every %v: want a duration in [%v, %v]", ErrInvalidWorkload, every, MinShiftEvery, MaxShiftEvery)
	}
	h.every = every
	h.span = h.keys.n - h.width + 1
	h.stride = golden(h.keys.n) % h.span
	if gap := min(h.stride, h.span-h.stride); gap < h.width {
		return fmt.Errorf("%w: hot-width: a range of %d of %d keys cannot move clear of itself; make it narrower or the key space larger",
			ErrInvalidWorkload, h.width, h.keys.n)
	}
	return nil
}

// startAt is the first key index of the hot range at operation time at.
func (h *hotspot) startAt(at time.Duration) uint64 {
	if h.every == 0 {
		return h.start
	}
	p := uint64(max(at, 0) / h.every)
	return (h.start%h.span + mulMod(p, h.stride, h.span)) % h.span
}

func (h *hotspot) String() string {
	k := h.keys
	rest := fmt.Sprintf("the rest uniform over %d keys, %s", k.n, h.mix())
	switch {
	case h.name == HotKey:
		return fmt.Sprintf("hotkey: %s of ops on %s, %s", percent(h.share), k.Key(h.start), rest)
	case h.every == 0:
		return fmt.Sprintf("hotrange: %s of ops in [%s, %s) (%d keys), %s", percent(h.share), k.Key(h.start), k.Key(h.start+h.width), h.width, rest)
	}
	return fmt.Sprintf("shift: %s of ops in a range of %d keys that moves every %v (first [%s, %s)), %s",
		percent(h.share), h.width, h.every, k.Key(h.start), k.Key(h.start+h.width), rest)
}

func (h *hotspot) Hotspot(at time.Duration) (uint64, uint64, bool) {
	lo := h.startAt(at)
	return lo, lo + h.width, true
}

func (h *hotspot) Stream(r *rand.Rand) Stream { return &hotspotStream{h: h, r: r} }

type hotspotStream struct {
	h *hotspot
	r *rand.Rand
}

func (s *hotspotStream) Next(at time.Duration) (uint64, bool) {
	h := s.h
	var k uint64
	if s.r.Uint64()>>11 < h.shareT {
		k = h.startAt(at) + s.r.Uint64N(h.width)
	} else {
		k = s.r.Uint64N(h.keys.n)
	}
	return k, h.writes(s.r)
}

// percent renders a fraction as a percentage with up to four significant
// digits ("90%", "0.5%").
func percent(f float64) string {
	return strconv.FormatFloat(math.Round(f*100*1e4)/1e4, 'g', 4, 64) + "%"
}
