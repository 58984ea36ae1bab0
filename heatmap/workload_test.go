package heatmap

import (
	"bytes"
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/hlc"
)

// workload feeds a history what a busy cluster of n routes would: every
// route loaded every column with a skewed base load and ±30% noise (so
// the band layout moves between columns), a hotspot that moves every 60
// columns, and a split every 30 columns.
type workload struct {
	cat    *catalog.Catalog
	base   map[uint64]uint64 // route id → base reads per column
	rng    *rand.Rand
	hlc    uint64
	column int
}

func newWorkload(t tb, routes int, seed uint64) *workload {
	splits := make([][]byte, routes-1)
	for i := range splits {
		splits[i] = fmt.Appendf(nil, "tenant:%04d:user:%08d", i%97, i*1000)
	}
	// Keys of 97 tenants, sorted.
	sortKeys(splits)
	cat, err := catalog.New(splits, 1)
	if err != nil {
		t.Fatal(err)
	}
	w := &workload{cat: cat, base: make(map[uint64]uint64), rng: rand.New(rand.NewPCG(seed, 7))}
	for _, id := range routeIDs(cat) {
		w.base[id] = 1 + uint64(1000/(1+w.rng.IntN(200))) // skewed: most cold, a few warm
	}
	return w
}

func sortKeys(k [][]byte) { slices.SortFunc(k, bytes.Compare) }

// next returns the next column's input and advances the catalog now and
// then by a split (whose mark the caller may add).
func (w *workload) next(startMs, stepMs uint64) (ColumnInput, *Mark) {
	w.column++
	var mark *Mark
	if w.column%30 == 0 {
		mark = w.split(startMs)
	}
	ids := routeIDs(w.cat)
	hot := ids[(w.column/60*7919)%len(ids)]
	loads := make([]RouteLoad, 0, len(ids))
	for _, id := range ids {
		b := w.base[id]
		if b == 0 {
			b = 1 + uint64(w.rng.IntN(5))
			w.base[id] = b
		}
		r := b * uint64(70+w.rng.IntN(61)) / 100
		if id == hot {
			r *= 500
		}
		loads = append(loads, RouteLoad{RouteID: id, Reads: r, Writes: r / 4, ReadBytes: r * 180, WriteBytes: r * 60})
	}
	// The state machine's loads come sorted by route id.
	slices.SortFunc(loads, func(a, b RouteLoad) int { return cmp.Compare(a.RouteID, b.RouteID) })
	return ColumnInput{WindowStartMs: startMs, AtMs: startMs + stepMs, Weights: Weights{Read: 1, Write: 2}, Catalog: w.cat, Loads: loads}, mark
}

// split splits a route in the middle of its keys (a new boundary).
func (w *workload) split(atMs uint64) *Mark {
	ids := routeIDs(w.cat)
	r, _ := w.cat.Route(ids[w.rng.IntN(len(ids)-1)])
	key := append(append([]byte(nil), r.Start...), '/', byte('a'+w.rng.IntN(26)))
	w.hlc = max(w.hlc+1, hlc.Make(atMs, 0))
	next, _, err := w.cat.Split(r.ID, key, w.hlc)
	if err != nil {
		return nil
	}
	w.cat = next
	w.hlc++
	return &Mark{AtHLC: w.hlc, Kind: splitKind, Keys: [][]byte{key}, RouteID: r.ID}
}

// build feeds columns of stepMs for spanMs from startMs, with marks.
func (w *workload) build(t tb, h *History, startMs, stepMs, spanMs uint64) *History {
	for at := startMs; at < startMs+spanMs; at += stepMs {
		in, mark := w.next(at, stepMs)
		h = mustAdd(t, h, in)
		if mark != nil {
			var err error
			if h, err = h.AddMark(*mark); err != nil {
				t.Fatal(err)
			}
		}
	}
	return h
}
