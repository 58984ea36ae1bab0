package heatmap

import (
	"math/rand/v2"
	"slices"

	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/hlc"
)

// A scenario is a replayable sequence of what the state machine feeds a
// history: runs of columns, splits (with their marks) and merge marks.
type scenario struct {
	splits []string // initial catalog
	ops    []scenarioOp
}

type scenarioOp struct {
	// columns > 0: a run of that many columns of stepMs after gapMs, loads
	// from seed on about every loaded-th route.
	columns       int
	stepMs, gapMs uint64
	seed          uint64
	loaded        int
	// otherwise a split of the route at position route (mod the routes)
	// at key (isolate: also at key·0x00, one mark for both), or with
	// merge a merge mark at key.
	route   int
	key     []byte
	isolate bool
	merge   bool
	origin  api.SplitOrigin
}

var origins = []api.SplitOrigin{
	api.SplitOrigin_SPLIT_ORIGIN_UNSPECIFIED, api.SplitOrigin_SPLIT_ORIGIN_MANUAL,
	api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_SINGLE_LOWER_EDGE,
	api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_SINGLE_UPPER_EDGE, api.SplitOrigin_SPLIT_ORIGIN_SUB_BUCKET_MEDIAN,
	api.SplitOrigin_SPLIT_ORIGIN_BALANCE,
}

// drawKey draws keys from a small alphabet with long shared prefixes now
// and then, so separators, caps and collisions all happen.
func drawKey(t *rapid.T, label string) []byte {
	prefix := rapid.SampledFrom([]string{"", "user:", "tenant:0001:order:", string(make([]byte, 70))}).Draw(t, label+"_prefix")
	tail := rapid.SliceOfN(rapid.SampledFrom([]byte("ab\x00\xffz")), 1, 6).Draw(t, label+"_tail")
	return append([]byte(prefix), tail...)
}

func drawScenario(t *rapid.T) scenario {
	var sc scenario
	big := rapid.IntRange(0, 9).Draw(t, "big") == 0
	if big {
		sc.splits = manySplits(rapid.IntRange(MaxBands, MaxBands+300).Draw(t, "routes"))
	} else {
		for range rapid.IntRange(0, 12).Draw(t, "initial_splits") {
			sc.splits = append(sc.splits, string(drawKey(t, "split")))
		}
		slices.Sort(sc.splits)
		sc.splits = slices.Compact(sc.splits)
	}
	for range rapid.IntRange(0, 12).Draw(t, "ops") {
		var op scenarioOp
		switch rapid.IntRange(0, 3).Draw(t, "op") {
		case 0, 1:
			runs := []int{1, 2, 3, 50, LevelColumns + 1, 3 * LevelColumns}
			if big {
				runs = runs[:3] // over MaxBands routes: banding is what is tested
			}
			op.columns = rapid.SampledFrom(runs).Draw(t, "columns")
			op.stepMs = rapid.SampledFrom([]uint64{1000, 60_000, 7}).Draw(t, "step")
			op.gapMs = rapid.SampledFrom([]uint64{0, 0, 1, 5000}).Draw(t, "gap")
			op.seed = rapid.Uint64().Draw(t, "seed")
			op.loaded = rapid.IntRange(1, 4).Draw(t, "loaded")
		case 2:
			op.route = rapid.IntRange(0, 1<<20).Draw(t, "route")
			op.key = drawKey(t, "key")
			op.isolate = rapid.Bool().Draw(t, "isolate")
			op.origin = rapid.SampledFrom(origins).Draw(t, "origin")
		case 3:
			op.merge = true
			op.key = drawKey(t, "merged")
		}
		sc.ops = append(sc.ops, op)
	}
	return sc
}

// replay runs ops[from:] on h over cat, starting at nowMs; it returns the
// history, the catalog, the time reached and the input totals of live
// routes. shuffle permutes every column's loads.
type replayState struct {
	h      *History
	cat    *catalog.Catalog
	nowMs  uint64
	logic  uint64
	totals [metrics]uint64
}

func startScenario(t tb, sc scenario) *replayState {
	return &replayState{h: New(), cat: newCatalog(t, sc.splits...), nowMs: 1_700_000_000_000}
}

func (st *replayState) run(t tb, ops []scenarioOp, shuffle bool) {
	t.Helper()
	for _, op := range ops {
		switch {
		case op.columns > 0:
			st.columns(t, op, shuffle)
		case op.merge:
			st.mark(t, Mark{Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_MERGE,
				MergeOrigin: api.HeatmapMergeOrigin_HEATMAP_MERGE_ORIGIN_AUTOMATIC, Keys: [][]byte{op.key}})
		default:
			st.split(t, op)
		}
	}
}

func (st *replayState) columns(t tb, op scenarioOp, shuffle bool) {
	rng := rand.New(rand.NewPCG(op.seed, 1))
	ids := routeIDs(st.cat)
	st.nowMs += op.gapMs
	w := Weights{Read: uint32(1 + op.seed%3), Write: uint32(op.seed % 5)}
	for range op.columns {
		var loads []RouteLoad
		for _, id := range ids {
			if rng.IntN(op.loaded) != 0 {
				continue
			}
			l := RouteLoad{RouteID: id, Reads: rng.Uint64N(1000), Writes: rng.Uint64N(100),
				ReadBytes: rng.Uint64N(1 << 20), WriteBytes: rng.Uint64N(1 << 10)}
			if rng.IntN(20) == 0 {
				l.Reads <<= 20 // a hot route now and then
			}
			loads = append(loads, l)
			v := l.values(w)
			for m := range metrics {
				st.totals[m] += v[m]
			}
		}
		if rng.IntN(7) == 0 {
			loads = append(loads, RouteLoad{RouteID: st.cat.NextRouteID() + 5, Reads: 99}) // dead: ignored
		}
		if shuffle {
			perm := rand.New(rand.NewPCG(uint64(len(loads)), 2))
			perm.Shuffle(len(loads), func(i, j int) { loads[i], loads[j] = loads[j], loads[i] })
		}
		in := ColumnInput{WindowStartMs: st.nowMs, AtMs: st.nowMs + op.stepMs, Weights: w, Catalog: st.cat, Loads: loads}
		st.h = mustAdd(t, st.h, in)
		st.nowMs += op.stepMs
	}
}

func (st *replayState) split(t tb, op scenarioOp) {
	ids := routeIDs(st.cat)
	id := ids[op.route%len(ids)]
	keys := [][]byte{op.key}
	if op.isolate {
		keys = append(keys, append(append([]byte(nil), op.key...), 0))
	}
	for _, k := range keys {
		r, ok := st.cat.Route(id)
		if !ok {
			return
		}
		if !r.Contains(k) || string(k) == string(r.Start) {
			// Not strictly inside: the route that holds it.
			r = st.cat.Lookup(k)
		}
		next, children, err := st.cat.Split(r.ID, k, st.hlc())
		if err != nil {
			return // the key is a boundary already
		}
		st.cat, id = next, children[1].ID
	}
	st.mark(t, Mark{Kind: api.HeatmapMarkKind_HEATMAP_MARK_KIND_SPLIT, SplitOrigin: op.origin, Keys: keys, RouteID: id})
}

func (st *replayState) hlc() uint64 {
	st.logic++
	return hlc.Make(st.nowMs, st.logic)
}

func (st *replayState) mark(t tb, m Mark) {
	t.Helper()
	m.AtHLC = st.hlc()
	h, err := st.h.AddMark(m)
	if err != nil {
		t.Fatal(err)
	}
	st.h = h
}
