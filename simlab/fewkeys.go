package simlab

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/hotsplit/hotsplit/sim"
)

// FewKeys is a workload of a few comparably hot keys in one route — a few
// tenants, a few counters: k keys spread evenly over the sim key space
// (key i at index ⌊n·(2i+1)/(2k)⌋) take a hot share of the operations
// between them in proportion to their shares, the rest is uniform over the
// key space; half the operations write. It is a sim.Workload, so simlab
// runs it like the sim package's own.
type FewKeys struct {
	name     string
	keys     sim.KeySpace
	at       []uint64  // key indexes, ascending
	cum      []uint64  // cumulative thresholds of 2^53 for the keys
	shares   []float64 // each key's share of all operations
	hotShare float64
}

// NewFewKeys returns the few-keys workload named name whose keys take
// hotShare (in (0, 1]) of the operations, split in proportion to shares
// (relative weights, at least two, all positive).
func NewFewKeys(name string, hotShare float64, shares ...float64) (*FewKeys, error) {
	if !(hotShare > 0 && hotShare <= 1) {
		return nil, fmt.Errorf("%w: few keys: hot share %v, want (0, 1]", ErrInvalidSpec, hotShare)
	}
	if len(shares) < 2 {
		return nil, fmt.Errorf("%w: few keys: %d shares, want at least 2", ErrInvalidSpec, len(shares))
	}
	var sum float64
	for _, s := range shares {
		if !(s > 0) {
			return nil, fmt.Errorf("%w: few keys: share %v, want > 0", ErrInvalidSpec, s)
		}
		sum += s
	}
	keys, err := sim.NewKeySpace(sim.DefaultKeySpace)
	if err != nil {
		return nil, err
	}
	w := &FewKeys{name: name, keys: keys, hotShare: hotShare}
	n, k := keys.Len(), uint64(len(shares))
	var c float64
	for i, s := range shares {
		w.at = append(w.at, n*(2*uint64(i)+1)/(2*k))
		w.shares = append(w.shares, hotShare*s/sum)
		c += hotShare * s / sum
		w.cum = append(w.cum, uint64(math.Ldexp(c, 53)))
	}
	return w, nil
}

// Name is the workload's name.
func (w *FewKeys) Name() string { return w.name }

// String lists the keys and their shares.
func (w *FewKeys) String() string {
	parts := make([]string, len(w.at))
	for i, k := range w.at {
		parts[i] = fmt.Sprintf("%s %s%%", w.keys.Key(k), strconv.FormatFloat(100*w.shares[i], 'f', 1, 64))
	}
	return fmt.Sprintf("%s: %s of ops on %s, the rest uniform over %d keys, writes 50%%",
		w.name, strconv.FormatFloat(100*w.hotShare, 'f', 0, 64)+"%", strings.Join(parts, ", "), w.keys.Len())
}

// Keys is the sim key space.
func (w *FewKeys) Keys() sim.KeySpace { return w.keys }

// Hotspot is the range from the first hot key to the last.
func (w *FewKeys) Hotspot(time.Duration) (uint64, uint64, bool) {
	return w.at[0], w.at[len(w.at)-1] + 1, true
}

// HotKeys are the few keys, in key order.
func (w *FewKeys) HotKeys() [][]byte {
	out := make([][]byte, len(w.at))
	for i, k := range w.at {
		out[i] = w.keys.Key(k)
	}
	return out
}

// Shares are the keys' shares of all operations.
func (w *FewKeys) Shares() []float64 { return w.shares }

// Stream draws from r only.
func (w *FewKeys) Stream(r *rand.Rand) sim.Stream { return &fewKeysStream{w: w, r: r} }

type fewKeysStream struct {
	w *FewKeys
	r *rand.Rand
}

func (s *fewKeysStream) Next(time.Duration) (uint64, bool) {
	// d < 2^53: the last threshold is 2^53 at a hot share of 1.
	d := s.r.Uint64() >> 11
	k := s.w.keys.Len()
	for i, c := range s.w.cum {
		if d < c {
			k = s.w.at[i]
			break
		}
	}
	if k == s.w.keys.Len() {
		k = s.r.Uint64N(k)
	}
	return k, s.r.Uint64()>>63 == 1
}

// FewKeysShape is one few-keys workload of the acceptance and the table:
// the keys' shares and the load in thresholds. The loads keep every key's
// own load at least 10% away from the threshold, so a key either must sit
// alone (its load alone is hot) or must not (one key per route relieves),
// and ⌈log2(load)⌉ + 2 splits suffice: fewkeys-2 (1.5× the threshold per
// key) needs both keys isolated, four boundaries; the others need the keys
// apart.
type FewKeysShape struct {
	Name   string
	Shares []float64
	Load   float64
}

// FewKeysShapes are the few-keys shapes: two keys 50/50, three 34/33/33,
// five 20% each (the reported one, at 3× the threshold) and unequal
// 40/35/25.
func FewKeysShapes() []FewKeysShape {
	return []FewKeysShape{
		{"fewkeys-2", []float64{50, 50}, 3},
		{"fewkeys-3", []float64{34, 33, 33}, 2.4},
		{"fewkeys-5", []float64{20, 20, 20, 20, 20}, 3},
		{"fewkeys-40-35-25", []float64{40, 35, 25}, 2},
	}
}

// Workload is the shape's workload: every operation on one of its keys.
func (s FewKeysShape) Workload() (*FewKeys, error) { return NewFewKeys(s.Name, 1, s.Shares...) }

// Bound is the splits the shape must be relieved within, ⌈log2(load)⌉ + 2.
func (s FewKeysShape) Bound() int { return int(math.Ceil(math.Log2(s.Load))) + 2 }
