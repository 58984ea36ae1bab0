package keyviz

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// Defaults and limits of the sampler (docs/design.md#the-detector,
// docs/design.md#the-load-pipeline and docs/design.md#limits-and-bad-input).
const (
	DefaultStepMs      = 60_000
	DefaultBuckets     = 16
	DefaultWriteWeight = 4
	DefaultReadWeight  = 1
	DefaultSampleRate  = 16
	DefaultTopK        = 32

	// MaxTopK bounds a route's sketch: a row carries its sketch as top
	// keys, which a report may hold at most api.MaxReportTopKeys of.
	MaxTopK = api.MaxReportTopKeys
	// MaxSampleRate bounds SampleRate: one in 2^20 observations.
	MaxSampleRate = 1 << 20
	// MaxStepMs bounds the step a sampler accepts: one day.
	MaxStepMs = 24 * 60 * 60 * 1000

	maxBuckets = catalog.MaxBuckets
)

// ErrInvalidConfig is wrapped by NewSampler and SetConfig when a setting is
// out of range; the message names the setting. Nothing is applied.
var ErrInvalidConfig = errors.New("invalid keyviz config")

// LoadConfig is the part of the cluster's replicated config a sampler follows
// (docs/design.md#the-load-pipeline). It comes back in every Report response and is adopted at the
// next step boundary.
type LoadConfig struct {
	StepMs      uint64
	Buckets     int
	WriteWeight uint32
	ReadWeight  uint32
	// A scheduled step change: columns from NextStepAtMs on (a boundary of
	// both steps) are NextStepMs long. 0 = none.
	NextStepMs, NextStepAtMs uint64
}

// LoadConfigFromProto extracts the load settings of a cluster config.
func LoadConfigFromProto(c *api.Config) LoadConfig {
	return LoadConfig{
		StepMs:       c.GetStepMs(),
		Buckets:      int(c.GetBuckets()),
		WriteWeight:  c.GetWriteWeight(),
		ReadWeight:   c.GetReadWeight(),
		NextStepMs:   c.GetNextStepMs(),
		NextStepAtMs: c.GetNextStepAtMs(),
	}
}

func (c LoadConfig) validate() error {
	switch {
	case c.StepMs == 0 || c.StepMs > MaxStepMs:
		return fmt.Errorf("%w: step_ms %d not in [1, %d]", ErrInvalidConfig, c.StepMs, MaxStepMs)
	case c.Buckets < 1 || c.Buckets > maxBuckets:
		return fmt.Errorf("%w: buckets %d not in [1, %d]", ErrInvalidConfig, c.Buckets, maxBuckets)
	case c.NextStepAtMs != 0 && (c.NextStepMs == 0 || c.NextStepMs > MaxStepMs || c.NextStepAtMs%c.NextStepMs != 0):
		return fmt.Errorf("%w: next_step_ms %d at %d: not a step in [1, %d] with the change on its boundary",
			ErrInvalidConfig, c.NextStepMs, c.NextStepAtMs, MaxStepMs)
	}
	return nil
}

// at returns the config of a column that opens at startMs: with the
// scheduled step once its boundary is reached.
func (c LoadConfig) at(startMs uint64) LoadConfig {
	if c.NextStepAtMs == 0 || startMs < c.NextStepAtMs {
		return c
	}
	c.StepMs, c.NextStepMs, c.NextStepAtMs = c.NextStepMs, 0, 0
	return c
}

// SamplerConfig configures a Sampler. Zero fields take the defaults.
type SamplerConfig struct {
	// Load is the initial load config, used until the cluster's arrives.
	Load LoadConfig
	// SampleRate: one in SampleRate observations feeds the top-K sketch
	// (1 = every observation).
	SampleRate uint32
	// TopK is the capacity of each route's Space-Saving sketch.
	TopK int
	// Seed, if not 0, makes the sampling reproducible: which observations
	// are sampled and which the operation sample keeps follow from it (and
	// the order of the calls). 0 draws fresh randomness, as a data node
	// should; tools that replay a run (simlab) set it.
	Seed uint64
}

// seedSource hands out the sampler's seeds: fresh random ones, or a fixed
// sequence (SamplerConfig.Seed). Not safe for concurrent use; each source
// is guarded by the mutex of its caller.
type seedSource struct{ r *rand.Rand }

func newSeedSource(seed, stream uint64) seedSource {
	if seed == 0 {
		return seedSource{}
	}
	return seedSource{rand.New(rand.NewPCG(seed, stream))}
}

func (s seedSource) next() uint64 {
	if s.r == nil {
		return rand.Uint64()
	}
	return s.r.Uint64()
}

// Sampler counts the requests a data node serves, per route, into columns
// (docs/design.md#the-load-pipeline). Observe and ObserveSize may be called from any number of
// goroutines; SetRoutes, SetConfig and CloseColumn may be called from any
// goroutine too and are serialized among themselves (normally a Reporter
// calls them).
//
// Memory: the route table holds about 200 bytes per route (plus 8 bytes per
// route id between the smallest and largest); each route observed in a
// column holds (2·buckets+2) 8-byte counters rounded up to 64 bytes, and, if
// sampled, a sketch of at most TopK keys; at most 64 contended routes per
// column also hold stripes, 10.5 KiB per route on 2 cores at 16 buckets (the bound
// is in stripes.go).
type Sampler struct {
	// Read by every Observe, written under mu. The padding keeps the
	// counters written on the drop paths off this cache line.
	table     atomic.Pointer[routeTable]
	arena     atomic.Pointer[arena]
	sampleMax uint64 // immutable: sampled() threshold for SampleRate
	// immutable: loads per contention probe (stripes.go)
	probeSpins int
	// immutable, tests only: stripe every block when it is created.
	stripeAll bool
	_         [31]byte

	unknownRoute atomic.Uint64
	_            [56]byte
	keyTooLong   atomic.Uint64
	_            [56]byte
	// Blocks striped because their counters were contended.
	stripedRoutes atomic.Uint64
	_             [56]byte

	sampleRate uint32 // immutable
	topK       int    // immutable

	// boxMu orders the creation of a route's sketch with the close that
	// swaps sketches out, so that a new sketch always gets the weights of
	// the column it lands in.
	boxMu      sync.Mutex
	boxWeights [2]uint64 // read, write weight of the open column
	boxSeeds   seedSource

	mu       sync.Mutex
	colSeeds seedSource // the arenas' sampling seeds
	col      openColumn
	pending  *LoadConfig   // adopted at the next CloseColumn
	retired  []*routeEntry // left the table during the open column
	scratch  []uint64      // drain buffer
}

// openColumn describes the column being filled.
type openColumn struct {
	start   uint64 // window start, once started
	started bool
	cfg     LoadConfig
}

// sketchBox is one route's sketch for one column, with the column's weights.
type sketchBox struct {
	ww, wr uint64

	mu     sync.Mutex
	sealed bool // the column closed; feed the route's next box
	ss     *spaceSaving
	res    *reservoir
	// The sampled reads and writes fed to ss: what the keys' shares are
	// measured against.
	reads, writes uint64
}

// sealedBox is installed in the entries that left the table, like
// sealedBlock.
var sealedBox = &sketchBox{sealed: true}

// NewSampler returns a sampler with an empty route table: observations are
// dropped (and counted) until SetRoutes.
func NewSampler(cfg SamplerConfig) (*Sampler, error) {
	l := cfg.Load
	if l.StepMs == 0 {
		l.StepMs = DefaultStepMs
	}
	if l.Buckets == 0 {
		l.Buckets = DefaultBuckets
	}
	if l.WriteWeight == 0 {
		l.WriteWeight = DefaultWriteWeight
	}
	if l.ReadWeight == 0 {
		l.ReadWeight = DefaultReadWeight
	}
	if err := l.validate(); err != nil {
		return nil, err
	}
	if cfg.SampleRate == 0 {
		cfg.SampleRate = DefaultSampleRate
	}
	if cfg.SampleRate > MaxSampleRate {
		return nil, fmt.Errorf("%w: sample rate %d above %d", ErrInvalidConfig, cfg.SampleRate, MaxSampleRate)
	}
	if cfg.TopK == 0 {
		cfg.TopK = DefaultTopK
	}
	if cfg.TopK < 1 || cfg.TopK > MaxTopK {
		return nil, fmt.Errorf("%w: top-K capacity %d not in [1, %d]", ErrInvalidConfig, cfg.TopK, MaxTopK)
	}
	s := &Sampler{
		sampleMax:  math.MaxUint64 / uint64(cfg.SampleRate),
		probeSpins: probeSpins,
		sampleRate: cfg.SampleRate,
		topK:       cfg.TopK,
		boxWeights: [2]uint64{uint64(l.ReadWeight), uint64(l.WriteWeight)},
		col:        openColumn{cfg: l},
		scratch:    make([]uint64, maxBlockWords),
	}
	s.colSeeds = newSeedSource(cfg.Seed, 1)
	s.boxSeeds = newSeedSource(cfg.Seed, 2)
	s.table.Store(newTable(0, false, nil))
	s.arena.Store(newArena(minArenaWords, minArenaBlocks, s.colSeeds.next()))
	return s, nil
}

// Observe counts one client request on routeID for key. Call it exactly
// once per client request, at the replica that serves it — never when a
// replica applies replicated writes (that would count every write once per
// replica) and never twice for one request (e.g. not again on a retry inside
// the node). The route id is the data node's own routing decision; an id not
// in the route table is dropped and counted (see Stats).
//
// The unsampled path is one atomic add: no lock, no clock read, no
// allocation. (The first observation of a route in a column also takes the
// route's counters from an arena the close preallocates, sized from the
// previous column; only when more routes are touched than that does it
// allocate.) One in SampleRate observations also feeds the route's top-K
// sketch under the route's mutex. A route whose counters several cores
// contend for is striped for the rest of the column: each core then adds
// to its own stripe and buffers its sampled observations there (stripes.go).
// Racing with a column close, an observation is counted exactly once, in one
// column or the next (see CloseColumn).
func (s *Sampler) Observe(routeID uint64, key []byte, write bool) {
	if e := s.table.Load().lookup(routeID); e != nil {
		s.observeAt(e, e.blk.Load(), key, write, 0)
		return
	}
	s.unknownRoute.Add(1)
}

// ObserveSize is Observe for a request that moved n bytes (read or written);
// the bytes are summed per route. Called instead of Observe, not in addition.
// If the request races with a column close, its count and its bytes are each
// counted once but may land in adjacent columns.
func (s *Sampler) ObserveSize(routeID uint64, key []byte, write bool, n uint64) {
	if e := s.table.Load().lookup(routeID); e != nil {
		s.observeAt(e, e.blk.Load(), key, write, n)
		return
	}
	s.unknownRoute.Add(1)
}

// observeAt counts an observation of route entry e, whose block the caller
// loaded as b (nil if the route had none yet in the open column). It is the
// whole fast path in one call; everything rare is behind a call.
func (s *Sampler) observeAt(e *routeEntry, b *block, key []byte, write bool, n uint64) {
	if b != nil {
		w := 2
		if write {
			w = 3
		}
		if e.k > 1 {
			w += 2 * e.bucket(key)
		}
		if st := b.hot.Load(); st != nil {
			// observeStriped, written out: a call costs a striped route
			// a sixth of its observation.
			i := st.pick()
			o := int(i) * st.words
			if v := st.c[o+w].Add(1); v&sealed == 0 {
				if v%probeEvery == 0 {
					s.probeStripe(st, &st.c[o+w], v)
				}
				if n != 0 && st.c[o+byteWord(write)].Add(n)&sealed != 0 {
					s.addBytesNext(e, write, n)
				}
				if sampled(v+i<<stripeShift, b.seed, s.sampleMax) {
					s.sampleStriped(e, st, &st.bufs[i], key, write)
				}
				return
			}
		} else if v := b.c[w].Add(1); v&sealed == 0 {
			if v%probeEvery == 0 {
				s.probe(e, b, w, v)
			}
			if n != 0 && b.c[byteWord(write)].Add(n)&sealed != 0 {
				s.addBytesNext(e, write, n)
			}
			if sampled(v, b.seed, s.sampleMax) {
				s.sample(e, key, write)
			}
			return
		}
	}
	s.observeSlow(e.id, key, write, n)
}

// observeIn is observeAt's count for word w of e's block b, out of line:
// false if the close sealed b.
func (s *Sampler) observeIn(e *routeEntry, b *block, w int, key []byte, write bool, n uint64) bool {
	if st := b.hot.Load(); st != nil {
		return s.observeStriped(e, b, st, w, key, write, n)
	}
	v := b.c[w].Add(1)
	if v&sealed != 0 {
		return false
	}
	if v%probeEvery == 0 {
		s.probe(e, b, w, v)
	}
	if n != 0 && b.c[byteWord(write)].Add(n)&sealed != 0 {
		s.addBytesNext(e, write, n)
	}
	if sampled(v, b.seed, s.sampleMax) {
		s.sample(e, key, write)
	}
	return true
}

// observeSlow counts an observation whose route has no block yet in the open
// column, or whose block a close sealed under it: it looks the route up
// again in the current table and retries there. A route that left the table
// meanwhile is dropped like any unknown route.
func (s *Sampler) observeSlow(routeID uint64, key []byte, write bool, n uint64) {
	for {
		e := s.table.Load().lookup(routeID)
		if e == nil {
			s.unknownRoute.Add(1)
			return
		}
		if s.observeIn(e, s.blockFor(e), e.word(key, write), key, write, n) {
			return
		}
	}
}

// addBytesNext adds n to the read or write bytes of e's route in its next
// block: the close sealed the block whose count the bytes go with.
func (s *Sampler) addBytesNext(e *routeEntry, write bool, n uint64) {
	for {
		if e = s.table.Load().lookup(e.id); e == nil {
			return // the route left the table; its count is already in
		}
		if s.blockFor(e).c[byteWord(write)].Add(n)&sealed == 0 {
			return
		}
	}
}

// blockFor returns e's block for the open column, allocating it on first use.
func (s *Sampler) blockFor(e *routeEntry) *block {
	for {
		if b := e.blk.Load(); b != nil {
			return b
		}
		if nb := s.arena.Load().alloc(e.words, e.id); e.blk.CompareAndSwap(nil, nb) {
			if s.stripeAll {
				s.stripe(e, nb)
			}
			return nb
		}
	}
}

// sample feeds key to the route's sketch with the column's weight for the
// operation. Keys longer than catalog.MaxKeyLen are not fed (and counted).
func (s *Sampler) sample(e *routeEntry, key []byte, write bool) {
	if len(key) > catalog.MaxKeyLen {
		s.keyTooLong.Add(1)
		return
	}
	id := e.id
	for {
		bx := e.sk.Load()
		if bx == nil {
			bx = s.newBox(e)
		}
		bx.mu.Lock()
		if !bx.sealed {
			bx.feed(key, write)
			bx.mu.Unlock()
			return
		}
		bx.mu.Unlock()
		// The column closed under us: feed the next one.
		if e = s.table.Load().lookup(id); e == nil {
			return
		}
	}
}

// feed adds a sampled observation to the sketch. The caller holds bx.mu.
func (bx *sketchBox) feed(key []byte, write bool) {
	w := bx.wr
	if write {
		w = bx.ww
	}
	if w == 0 {
		return
	}
	bx.ss.add(key, w, write)
	bx.res.add(key, write)
	if write {
		bx.writes++
	} else {
		bx.reads++
	}
}

func (s *Sampler) newBox(e *routeEntry) *sketchBox {
	s.boxMu.Lock()
	defer s.boxMu.Unlock()
	if bx := e.sk.Load(); bx != nil {
		return bx
	}
	bx := s.makeBoxLocked(s.boxWeights[1], s.boxWeights[0])
	e.sk.Store(bx)
	return bx
}

// makeBox returns a new sketch with the given write and read weights.
func (s *Sampler) makeBox(ww, wr uint64) *sketchBox {
	s.boxMu.Lock()
	defer s.boxMu.Unlock()
	return s.makeBoxLocked(ww, wr)
}

func (s *Sampler) makeBoxLocked(ww, wr uint64) *sketchBox {
	return &sketchBox{wr: wr, ww: ww, ss: newSpaceSaving(s.topK), res: newReservoir(s.boxSeeds.next())}
}

// Stats are the sampler's counters since it was created.
type Stats struct {
	// Observations whose route id was not in the route table.
	UnknownRoute uint64
	// Sampled observations not fed to the sketch because the key is longer
	// than catalog.MaxKeyLen (they are still counted).
	KeyTooLong uint64
	// Route columns whose counters were striped because several cores
	// contended for them (a route counts once per column it is striped in).
	StripedRoutes uint64
}

// Stats returns the drop counters and the striping count.
func (s *Sampler) Stats() Stats {
	return Stats{UnknownRoute: s.unknownRoute.Load(), KeyTooLong: s.keyTooLong.Load(), StripedRoutes: s.stripedRoutes.Load()}
}

// SetConfig stages the cluster's load config. It is adopted by the next
// CloseColumn for the column that opens then, never for the open one.
func (s *Sampler) SetConfig(c LoadConfig) error {
	if err := c.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = &c
	return nil
}

// SetRoutes replaces the route table with routes at catalog version
// version. A version at or below the current one is ignored (the table never
// goes backwards), except before the first table is set. Routes that stay
// keep their counters; routes that leave are still reported for the open
// column; observations for them after this call are dropped as unknown. The
// descriptors' keys are referenced, not copied, and must not be modified
// (as everywhere in catalog).
func (s *Sampler) SetRoutes(routes []*catalog.RouteDescriptor, version uint64) error {
	return s.setRoutes(routes, version, false)
}

// setRoutes is SetRoutes; with reset (the catalog of a new cluster id,
// restored from a backup or recovered) it replaces the table whatever its
// version.
func (s *Sampler) setRoutes(routes []*catalog.RouteDescriptor, version uint64, reset bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.table.Load()
	if old.set && version <= old.version && !reset {
		return nil
	}
	t, err := buildTable(routes, version, old, s.retired, s.col.cfg.Buckets)
	if err != nil {
		return err
	}
	// Entries not in the new table are gone: report them with the open
	// column. (A retired route that came back is in the table again.)
	var retired []*routeEntry
	for _, e := range old.routes {
		if t.lookup(e.id) != e {
			retired = append(retired, e)
		}
	}
	for _, e := range s.retired {
		if t.lookup(e.id) != e {
			retired = append(retired, e)
		}
	}
	s.retired = retired
	s.table.Store(t)
	return nil
}

// RoutesVersion is the catalog version of the route table, and whether a
// table was ever set.
func (s *Sampler) RoutesVersion() (uint64, bool) {
	t := s.table.Load()
	return t.version, t.set
}
