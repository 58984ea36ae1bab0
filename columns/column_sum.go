package columns

import (
	"bytes"
	"cmp"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// Merge bounds (docs/design.md#the-load-pipeline).
const (
	// mergedTopKeys is how many top-K estimates of one row go into a
	// committed column: the highest upper bounds. A key the detector could
	// isolate carries most of the route's load in its lower bound, so it
	// is among them unless 32 other keys' error bounds exceed it.
	mergedTopKeys = 32
	// maxMergeKeys bounds the distinct keys one row merges. Reporters send
	// at most 256 keys each; past this many the merged sketch is marked
	// degraded (the detector then does not isolate) and further keys are
	// ignored, which keeps the bounds of the keys already tracked sound.
	maxMergeKeys = 1024
	// minKeyTable is the slot count of a row's first key table; tables
	// double when three quarters full.
	minKeyTable = 16
	// mergedSamples bounds a row's merged operation sample, while merging
	// and in the committed column (see rowSample).
	mergedSamples = 128
	// sumShards is how many independently locked parts a column's sum has
	// (a power of two): reporters merging the same window at once mostly
	// work in different parts.
	sumShards = 16
)

// keyHashSeed seeds the key tables of every column. Hash values never
// reach an output: they only find a key's entry, whose bytes are compared.
var keyHashSeed = maphash.MakeSeed()

// columnSum merges every accepted contribution to one window as it
// arrives, into flat tables that hold no reference to the reports: counts
// and bucket sums per route, one entry per distinct (route, key) with the
// key's bytes copied into an arena, and a bounded operation sample per
// route. Each row finds its keys through its own small open-addressing
// table of (hash, entry) slots, kept in a shared slot arena, so merging one
// row's keys touches a cache line or two rather than a column-wide map.
//
// Memory is bounded by the routes reported (live ones only), independent
// of the number of reporters: per route its counts and buckets, at most
// maxMergeKeys distinct keys, and at most mergedSamples sampled keys
// (rowSample) — about 4.5 KiB plus 1.5 times the sampled keys' bytes for
// a route whose sample is full.
//
// Concurrency. The rows live in sumShards shards by route id, each with its
// own mutex, so reporters merging the same window at once contend only
// when they touch the same shard at the same moment. reporters is guarded
// by the Aggregator's mutex (a contribution is claimed there, then merged
// outside it); the Aggregator seals a column and waits for the merges
// claimed before the seal (openColumn.merging) before it reads the sum,
// which is read-only from then on. Merging is commutative: the entry does
// not depend on which merge ran first.
type columnSum struct {
	windowStartMs uint64
	stepMs        uint64
	// reporters maps each contributor to its column's content digest, so a
	// second, different report for the same (reporter, window) is told
	// from a resend.
	reporters map[string]uint64

	shards [sumShards]sumShard
	// deadRows counts reporter rows dropped on admission because their
	// route was no longer live.
	deadRows atomic.Uint64
}

// sumShard holds the rows of the routes that hash to it, guarded by mu.
type sumShard struct {
	mu       sync.Mutex
	rowIndex routeIndex // route id -> rows
	rows     []rowSum
	buckets  []uint64  // arena of the rows' bucket sums
	slots    []keySlot // arena of the rows' key tables
	keys     []keySum
	keyBytes []byte // arena of the keys' bytes
}

// rowSum is one route's merged load. Sums saturate at 2^64-1: validation
// rejects a single report that overflows, but many valid reports may still
// add up past it, and a saturated count keeps the detector's verdict
// ("hotter than any threshold") right.
type rowSum struct {
	id                    uint64
	reads, writes         uint64
	readBytes, writeBytes uint64
	inputs                uint64 // reporter rows merged
	// Bucket sums are buckets[bucketOff : bucketOff+bucketLen]. Two inputs
	// that disagree on the bucket count (a config change between their
	// reports) leave the row without bucket evidence (bucketsMixed): none
	// is better than a sum of two layouts.
	bucketOff, bucketLen int
	bucketsMixed         bool
	// absentUpper is Σ over full sketches of their smallest scaled count:
	// what a key absent from every one of them could at most have had.
	absentUpper uint64
	degraded    bool
	// The row's key table is slots[tableOff : tableOff+tableLen]
	// (tableLen 0 or a power of two) holding nkeys keys.
	tableOff, tableLen int
	nkeys              int
	// sampleRate is the largest reporter sample rate merged; sample holds
	// the reporters' sampled keys, each weighted by its share of its
	// reporter's load.
	sampleRate uint32
	sample     rowSample
	// sampledTotal and sampledVar sum the reporters' sampled operations
	// scaled and weighted like the keys' lower estimates, and their
	// variance; sampledUnknown: a reporter with top keys sent no sampled
	// counts (a version 1 build), so the sums are no denominator.
	sampledTotal, sampledVar uint64
	sampledUnknown           bool
}

// keySlot is one slot of a row's key table: entry is 1 + the index in keys,
// 0 for an empty slot (so a fresh arena is empty).
type keySlot struct {
	hash  uint64
	entry int32
}

// keySum is one key's merged estimate. ownAbsent is the part of the row's
// absentUpper contributed by full sketches that do hold the key: it must
// not be added again for them.
type keySum struct {
	off, n                  int // key bytes in keyBytes
	lower, upper, ownAbsent uint64
	// The raw sampled events behind lower, and lower's variance (Σ over
	// reporters of rate²·(ww²·writes + wr²·reads)).
	sampledReads, sampledWrites, variance uint64
}

func newColumnSum(windowStartMs, stepMs uint64) *columnSum {
	return &columnSum{windowStartMs: windowStartMs, stepMs: stepMs, reporters: make(map[string]uint64)}
}

// shardOf is the shard of a route: a multiplicative hash, so that
// consecutive ids spread over every shard.
func shardOf(routeID uint64) int {
	return int((routeID * 0x9e3779b97f4a7c15) >> (64 - 4)) // log2(sumShards)
}

// digestOf returns the content digest reporter's contribution was merged
// with, and whether it was merged. Must hold Aggregator.mu (or own the sum
// alone).
func (c *columnSum) digestOf(reporter string) (uint64, bool) {
	d, ok := c.reporters[reporter]
	return d, ok
}

// claim records reporter's contribution (its content digest d) as merged
// into the column. Must hold Aggregator.mu (or own the sum alone); the
// merge itself follows outside it.
func (c *columnSum) claim(reporter string, d uint64) { c.reporters[reporter] = d }

// add claims and merges one contribution given as a message, with its
// content digest: for a sum with a single owner (MergeColumn). The column
// is taken as validated; a column that does not encode or decode merges
// nothing.
func (c *columnSum) add(reporter string, col *api.ReportColumn, cat *catalog.Catalog) (dead uint64) {
	info, err := columnOf(col, cat)
	if err != nil {
		return 0
	}
	c.claim(reporter, info.digest)
	return c.merge(reporter, info)
}

// columnOf encodes col and reads its rows and which are live in cat, as
// validation does.
func columnOf(col *api.ReportColumn, cat *catalog.Catalog) (columnInfo, error) {
	b, err := proto.Marshal(col)
	if err != nil {
		return columnInfo{}, err
	}
	wc, err := api.ReadColumn(b)
	if err != nil {
		return columnInfo{}, err
	}
	info := columnInfo{window: wc.WindowStartMs, step: wc.StepMs, ww: wc.WriteWeight, wr: wc.ReadWeight,
		rows: make([]api.WireRow, wc.NumRows), live: make([]bool, wc.NumRows)}
	info.digest = columnDigest(b)
	wc.Rows(func(i int, row []byte) bool {
		if err = info.rows[i].Read(row); err != nil {
			return false
		}
		_, info.live[i] = cat.Route(info.rows[i].RouteID)
		return true
	})
	return info, err
}

// merge merges one reporter's validated column, claimed before. Rows of
// routes that were not live in the catalog it was validated against are
// dropped; merge returns how many. It keeps no reference to col's rows or
// the report they alias. It may run concurrently with other merges into c:
// it sorts the rows into small batches, one per shard, and applies a batch
// under its shard's lock when it fills, so concurrent merges contend only
// when they flush into the same shard at the same moment.
func (c *columnSum) merge(reporter string, col columnInfo) (dead uint64) {
	rh := reporterHash(reporter)
	bs := batchPool.Get().(*shardBatches)
	defer batchPool.Put(bs)
	// Each reporter starts at its own row: reporters send routes in the
	// same order, and merges that walked them in step would take the same
	// shard locks one after another.
	n := len(col.rows)
	start := 0
	if n > 0 {
		start = int(rh % uint64(n))
	}
	for k := range n {
		i := start + k
		if i >= n {
			i -= n
		}
		if !col.live[i] {
			dead++
			continue
		}
		s := shardOf(col.rows[i].RouteID)
		b := &bs[s]
		b.rows[b.n] = &col.rows[i]
		if b.n++; b.n == mergeBatch {
			c.shards[s].apply(b, col.ww, col.wr, rh)
		}
	}
	for s := range bs {
		if bs[s].n > 0 {
			c.shards[s].apply(&bs[s], col.ww, col.wr, rh)
		}
	}
	c.deadRows.Add(dead)
	return dead
}

// mergeBatch is how many rows of one shard a merge reads before it takes
// the shard's lock to apply them.
const mergeBatch = 32

// shardBatch is a merge's rows for one shard not yet applied.
type shardBatch struct {
	rows [mergeBatch]*api.WireRow
	n    int
	next int32 // where the shard's next row likely is (addRow's hint)
}

type shardBatches [sumShards]shardBatch

// batchPool keeps the merges' batches.
var batchPool = sync.Pool{New: func() any { return new(shardBatches) }}

// apply merges a batch into the shard under its lock and empties it.
func (c *sumShard) apply(b *shardBatch, ww, wr uint32, rh uint64) {
	c.mu.Lock()
	for _, r := range b.rows[:b.n] {
		b.next = c.addRow(r, b.next, ww, wr, rh) + 1
	}
	c.mu.Unlock()
	clear(b.rows[:b.n]) // the batch is pooled; the rows are not its to keep
	b.n = 0
}

// addRow merges one reporter's row (docs/design.md#the-load-pipeline): plain sums of counts, bytes
// and buckets; per key, lower += (count-error)·rate and upper += count·rate,
// plus, for every full sketch that lacks the key, that sketch's smallest
// count·rate (Space-Saving: an absent key's count is at most the minimum);
// degraded if any input is. rh is the reporter's hash (for its samples'
// priorities).
//
// "Full" is read off the sketch itself, since a report does not carry the
// sketch capacity: a Space-Saving summary that has replaced an entry always
// holds an entry with error > 0 (each replacement inserts one), and one
// that never replaced an entry holds every key it was fed, so a key absent
// from it had a sampled count of zero.
//
// hint is where the row may be: every reporter sends the routes in the same
// order, so a batch's rows follow one another in the shard as the first
// reporter's did, and the row after the last one merged is usually the
// next. addRow returns where the row is.
func (c *sumShard) addRow(row *api.WireRow, hint int32, ww, wr uint32, rh uint64) int32 {
	i := c.find(row.RouteID, hint)
	if i < 0 {
		i = int32(len(c.rows))
		c.rowIndex.put(row.RouteID, i)
		c.rows = append(c.rows, rowSum{id: row.RouteID})
	}
	r := &c.rows[i]
	r.inputs++
	r.reads = saturate.Add(r.reads, row.Reads)
	r.writes = saturate.Add(r.writes, row.Writes)
	r.readBytes = saturate.Add(r.readBytes, row.ReadBytes)
	r.writeBytes = saturate.Add(r.writeBytes, row.WriteBytes)
	r.degraded = r.degraded || row.TopKDegraded
	r.sampleRate = max(r.sampleRate, row.SampleRate)
	c.addBuckets(r, row.Buckets)
	addSamples(r, row, ww, wr, rh)
	addSampled(r, row, ww, wr)
	c.addTopKeys(r, row, ww, wr)
	return i
}

// find returns the row of route id, or -1: rows[hint] if it is that
// route's, else through the index.
func (c *sumShard) find(id uint64, hint int32) int32 {
	if int(hint) < len(c.rows) && c.rows[hint].id == id {
		return hint
	}
	if i, ok := c.rowIndex.get(id); ok {
		return i
	}
	return -1
}

// addTopKeys merges one reporter's top keys into r.
func (c *sumShard) addTopKeys(r *rowSum, row *api.WireRow, ww, wr uint32) {
	top := row.TopKeys
	if len(top) == 0 {
		return
	}
	rate := uint64(row.SampleRate)
	full := row.TopKDegraded
	minScaled := uint64(math.MaxUint64)
	for _, k := range top {
		full = full || k.Error > 0
		minScaled = min(minScaled, k.Count*rate) // validated: no overflow
	}
	if full {
		r.absentUpper = saturate.Add(r.absentUpper, minScaled)
	}
	for _, k := range top {
		e := c.key(r, k.Key)
		if e == nil {
			r.degraded = true // past maxMergeKeys
			continue
		}
		e.lower = saturate.Add(e.lower, (k.Count-k.Error)*rate)
		e.upper = saturate.Add(e.upper, k.Count*rate)
		e.sampledReads = saturate.Add(e.sampledReads, k.SampledReads)
		e.sampledWrites = saturate.Add(e.sampledWrites, k.SampledWrites)
		e.variance = saturate.Add(e.variance, keyVariance(k, rate, ww, wr))
		if full {
			e.ownAbsent = saturate.Add(e.ownAbsent, minScaled)
		}
	}
}

// keyVariance is the variance of one reporter's scaled lower count of k,
// rate·(count − error), as a sum of Poisson counts: rate²·(ww²·writes +
// wr²·reads) from the raw sampled events. A reporter that sends no raw
// counts (a version 1 build) is taken to have sampled events of the larger
// weight: rate²·max(ww, wr)·(count − error), which errs high.
func keyVariance(k api.WireTopKey, rate uint64, ww, wr uint32) uint64 {
	r2 := saturate.Mul64(rate, rate)
	if k.SampledReads != 0 || k.SampledWrites != 0 {
		w := saturate.Mul64(uint64(ww)*uint64(ww), k.SampledWrites).Add(saturate.Mul64(uint64(wr)*uint64(wr), k.SampledReads))
		return r2.Mul(w).Uint64()
	}
	return r2.Mul(saturate.Mul64(uint64(max(ww, wr)), k.Count-k.Error)).Uint64()
}

// addSampled adds one reporter's sampled operations to r's sampled total
// and its variance.
func addSampled(r *rowSum, row *api.WireRow, ww, wr uint32) {
	sr, sw := row.SampledReads, row.SampledWrites
	if sr == 0 && sw == 0 {
		r.sampledUnknown = r.sampledUnknown || len(row.TopKeys) > 0
		return
	}
	rate := uint64(row.SampleRate)
	w := saturate.Mul64(uint64(ww), sw).Add(saturate.Mul64(uint64(wr), sr))
	r.sampledTotal = saturate.Add(r.sampledTotal, w.Scale(rate).Uint64())
	v := saturate.Mul64(uint64(ww)*uint64(ww), sw).Add(saturate.Mul64(uint64(wr)*uint64(wr), sr))
	r.sampledVar = saturate.Add(r.sampledVar, saturate.Mul64(rate, rate).Mul(v).Uint64())
}

// addSamples offers one reporter's operation sample to r's merged sample:
// each sampled key weighted by its share of the reporter's sampled weight
// times the reporter's weighted load (its bucket sum), so samples of
// reporters with more load count for more. rh is the reporter's hash; a
// key's priority also depends on the route and on its position in the
// reporter's sample.
func addSamples(r *rowSum, row *api.WireRow, ww, wr uint32, rh uint64) {
	ss := row.Samples
	if len(ss) == 0 {
		return
	}
	var load, sampled uint64
	for _, b := range row.Buckets {
		load = saturate.Add(load, b) // validated: no overflow
	}
	for _, s := range ss {
		sampled = saturate.Add(sampled, saturate.Add(saturate.Mul(uint64(ww), uint64(s.Writes)), saturate.Mul(uint64(wr), uint64(s.Reads))))
	}
	if load == 0 || sampled == 0 {
		return
	}
	h := sampleRowHash(rh, row.RouteID)
	for pos, s := range ss {
		w := saturate.Add(saturate.Mul(uint64(ww), uint64(s.Writes)), saturate.Mul(uint64(wr), uint64(s.Reads)))
		hi, lo := bits.Mul64(load, w)
		q, _ := bits.Div64(hi, lo, sampled) // w <= sampled: q <= load
		if q == 0 {
			continue
		}
		r.sample.offer(q, sampleU(sampleItemHash(h, pos)), s.Key)
	}
}

func (c *sumShard) addBuckets(r *rowSum, b []uint64) {
	switch {
	case r.bucketsMixed:
	case r.inputs == 1: // the first row merged (addRow counts it first)
		r.bucketOff, r.bucketLen = len(c.buckets), len(b)
		c.buckets = append(c.buckets, b...)
	case r.bucketLen != len(b):
		r.bucketsMixed = true
	default:
		sums := c.buckets[r.bucketOff : r.bucketOff+r.bucketLen]
		for i, v := range b {
			// No test for empty buckets (most are): the branch mispredicts
			// more than the add costs.
			sums[i] = saturate.Add(sums[i], v)
		}
	}
}

// tableFor is the table size that holds n keys at most three quarters
// full.
func tableFor(n int) int {
	t := minKeyTable
	for 4*n > 3*t {
		t *= 2
	}
	return t
}

// key returns the entry of key in row r, adding it if the row has room,
// else nil.
func (c *sumShard) key(r *rowSum, key []byte) *keySum {
	h := maphash.Bytes(keyHashSeed, key)
	if i, found := c.lookup(r, h, key); found {
		return &c.keys[i]
	}
	if r.nkeys >= maxMergeKeys {
		return nil
	}
	if tableFor(r.nkeys+1) > r.tableLen {
		c.growTable(r)
	}
	i := int32(len(c.keys))
	c.keys = append(c.keys, keySum{off: len(c.keyBytes), n: len(key)})
	c.keyBytes = append(c.keyBytes, key...)
	c.place(r, h, i)
	r.nkeys++
	return &c.keys[i]
}

// lookup finds key (hash h) in r's table.
func (c *sumShard) lookup(r *rowSum, h uint64, key []byte) (int32, bool) {
	if r.tableLen == 0 {
		return 0, false
	}
	table := c.slots[r.tableOff : r.tableOff+r.tableLen]
	mask := uint64(r.tableLen - 1)
	for p := h & mask; ; p = (p + 1) & mask {
		s := table[p]
		if s.entry == 0 {
			return 0, false
		}
		if s.hash == h && bytes.Equal(c.keyOf(s.entry-1), key) {
			return s.entry - 1, true
		}
	}
}

// place puts entry i (hash h) into the first free slot of r's table, which
// has one (tables stay at most three quarters full).
func (c *sumShard) place(r *rowSum, h uint64, i int32) {
	table := c.slots[r.tableOff : r.tableOff+r.tableLen]
	mask := uint64(r.tableLen - 1)
	p := h & mask
	for table[p].entry != 0 {
		p = (p + 1) & mask
	}
	table[p] = keySlot{hash: h, entry: i + 1}
}

// growTable moves r's keys to a table twice the size at the end of the
// arena. The old slots are left behind: the arena is at most twice the
// live tables.
func (c *sumShard) growTable(r *rowSum) {
	old := c.slots[r.tableOff : r.tableOff+r.tableLen]
	n := max(minKeyTable, 2*r.tableLen)
	off := len(c.slots)
	c.slots = append(c.slots, make([]keySlot, n)...)
	r.tableOff, r.tableLen = off, n
	for _, s := range old {
		if s.entry != 0 {
			c.place(r, s.hash, s.entry-1)
		}
	}
}

func (c *sumShard) keyOf(i int32) []byte {
	k := c.keys[i]
	return c.keyBytes[k.off : k.off+k.n : k.off+k.n]
}

// estimates returns row r's merged key estimates, highest upper bound first
// (ties: higher lower bound, then key), at most limit of them. The keys
// share the column's arena. sampled adds the clusterversion.SampledEvidence fields.
func (c *sumShard) estimates(r *rowSum, limit int, sampled bool) []*api.KeyEstimate {
	if r.nkeys == 0 {
		return nil
	}
	out := make([]*api.KeyEstimate, 0, r.nkeys)
	for _, slot := range c.slots[r.tableOff : r.tableOff+r.tableLen] {
		if slot.entry == 0 {
			continue
		}
		i := slot.entry - 1
		e := &c.keys[i]
		absent := uint64(math.MaxUint64)
		if r.absentUpper != math.MaxUint64 {
			absent = r.absentUpper - e.ownAbsent // ownAbsent sums a subset of absentUpper's terms
		}
		k := &api.KeyEstimate{Key: c.keyOf(i), Lower: e.lower, Upper: saturate.Add(e.upper, absent)}
		if sampled {
			k.SampledReads, k.SampledWrites, k.Variance = e.sampledReads, e.sampledWrites, e.variance
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b *api.KeyEstimate) int {
		if c := cmp.Compare(b.Upper, a.Upper); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Lower, a.Lower); c != 0 {
			return c
		}
		return bytes.Compare(a.Key, b.Key)
	})
	if len(out) > limit {
		out = out[:limit:limit]
	}
	return out
}

func (c *columnSum) rowCount() int {
	n := 0
	for i := range c.shards {
		n += len(c.shards[i].rows)
	}
	return n
}

func (r *rowSum) counts() *api.ColumnRow {
	return &api.ColumnRow{RouteId: r.id, Reads: r.reads, Writes: r.writes, ReadBytes: r.readBytes, WriteBytes: r.writeBytes}
}

func (c *columnSum) sortedReporters() []string {
	out := make([]string, 0, len(c.reporters))
	for r := range c.reporters {
		out = append(out, r)
	}
	slices.SortFunc(out, strings.Compare)
	return out
}
