package columns

import (
	"bytes"
	"fmt"
	"math"
	"math/bits"
	"slices"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// Load report limits (docs/design.md#limits-and-bad-input); the wire limits are api's.
const (
	// maxFutureSteps: a column whose window ends more than this many steps
	// after the leader's wall clock is rejected (a reporter far ahead must
	// not hold columns open).
	maxFutureSteps = 2
	// quadraticDupLimit: below this many entries a duplicate check compares
	// pairs instead of allocating a set.
	quadraticDupLimit = 32
)

// Rejection reasons, the fixed label values of the rejected-reports metric.
const (
	rejectTooLarge        = "too_large"
	rejectReporterID      = "reporter_id"
	rejectStep            = "step"
	rejectAlignment       = "alignment"
	rejectFuture          = "future"
	rejectDuplicateColumn = "duplicate_column"
	rejectDuplicateRoute  = "duplicate_route"
	rejectSampleRate      = "sample_rate"
	rejectBuckets         = "buckets"
	rejectTopKeys         = "top_keys"
	rejectKeySize         = "key_size"
	rejectOverflow        = "overflow"
	rejectBacklog         = "backlog"
	rejectConflict        = "conflict"
	rejectSamples         = "samples"
	rejectMalformed       = "malformed"
)

var rejectReasons = []string{
	rejectTooLarge, rejectReporterID, rejectStep, rejectAlignment, rejectFuture, rejectDuplicateColumn,
	rejectDuplicateRoute, rejectSampleRate, rejectBuckets, rejectTopKeys, rejectKeySize, rejectOverflow, rejectBacklog,
	rejectConflict, rejectSamples, rejectMalformed,
}

// rejection is why a report was refused: reason is the metric label, msg
// names the field ("columns[0].rows[3].buckets: …").
type rejection struct {
	reason string
	msg    string
}

func reject(reason, format string, args ...any) *rejection {
	return &rejection{reason: reason, msg: fmt.Sprintf(format, args...)}
}

// wireReport is a report in wire form, its top level read: what the
// leader validates and merges, without decoding it into messages.
type wireReport struct {
	reporter string
	columns  [][]byte // each column's encoding, in order
	size     int      // the report's encoded size
	// heads[i] is columns[i]'s own fields, when every column's were read
	// (readHeads); nil otherwise.
	heads []api.WireColumn
}

// readReport reads the top level of an encoded ReportRequest; it fails with
// api.ErrMalformedReport where proto.Unmarshal would fail.
func readReport(b []byte) (wireReport, error) {
	id, cols, err := api.ReadReportRequest(b)
	return wireReport{reporter: id, columns: cols, size: len(b)}, err
}

// readHeads reads every column's own fields into r.heads, once for both the
// late check and validation; it leaves heads nil if a column does not read
// (validation then says why).
func (r *wireReport) readHeads() {
	heads := make([]api.WireColumn, len(r.columns))
	for i, b := range r.columns {
		c, err := api.ReadColumn(b)
		if err != nil {
			return
		}
		heads[i] = c
	}
	r.heads = heads
}

// head returns columns[i]'s own fields.
func (r *wireReport) head(i int) (api.WireColumn, error) {
	if r.heads != nil {
		return r.heads[i], nil
	}
	return api.ReadColumn(r.columns[i])
}

// rowScratch holds the rows validation read, for the merge that follows:
// each row is read from the wire once. One is reused report after report
// (the Aggregator keeps one per ingest slot), so its rows' slices keep
// their capacity and reading allocates nothing once warm. Its rows' keys
// alias the last report read into it until the next overwrites them.
type rowScratch struct {
	rows []api.WireRow
	live []bool // live[i]: rows[i]'s route was live in the catalog
}

// next returns the scratch row after the n already used.
func (sc *rowScratch) next(n int) *api.WireRow {
	if n == len(sc.rows) {
		sc.rows = append(sc.rows, api.WireRow{})
		sc.rows = sc.rows[:cap(sc.rows)]
	}
	return &sc.rows[n]
}

// validateReport checks a whole report before anything of it is applied
// (docs/design.md#the-load-pipeline and docs/design.md#limits-and-bad-input)
// against the replicated catalog and config and the leader's wall clock, and
// returns the first problem, or nil. The size checked is the report's encoded
// size as it arrived. cfg must be a valid replicated config (step_ms > 0). It
// is pure and linear in the report's size, and walks the report once: on the
// way it computes each column's content digest (see digester); cols[i]
// describes columns[i]. A column or row that does not decode is refused as
// malformed (it cannot come through the transport, whose codec refuses it
// first).
//
// Rows of routes that are not live are checked for everything that does not
// need the route (they are dropped later, not rejected); rows of live routes
// must also carry exactly the route's bucket count under the replicated
// config.
//
// It reads the rows into sc, which the returned columns' parsed rows then
// share.
func validateReport(r wireReport, cat *catalog.Catalog, cfg *api.Config, nowMs uint64, sc *rowScratch) (cols []columnInfo, rej *rejection) {
	if r.size > api.MaxReportBytes {
		return nil, reject(rejectTooLarge, "report: %d bytes exceeds the limit of %d", r.size, api.MaxReportBytes)
	}
	if r.reporter == "" {
		return nil, reject(rejectReporterID, "reporter_id: must be set")
	}
	cols = make([]columnInfo, len(r.columns))
	sc.live = sc.live[:0]
	ends := make([]int, len(r.columns))
	for i := range r.columns {
		c, err := r.head(i)
		if err != nil {
			return nil, reject(rejectMalformed, "%s: %v", fieldPath{col: i, row: -1}, err)
		}
		d := newDigester()
		if rej := validateColumn(c, i, cat, cfg, nowMs, &d, sc); rej != nil {
			return nil, rej
		}
		cols[i] = columnInfo{window: c.WindowStartMs, step: c.StepMs, digest: d.sum(), ww: c.WriteWeight, wr: c.ReadWeight}
		ends[i] = len(sc.live)
	}
	// Slice the scratch only now: reading a later column may have grown it.
	start := 0
	for i, end := range ends {
		cols[i].rows = sc.rows[start:end:end]
		cols[i].live = sc.live[start:end:end]
		start = end
	}
	if i, j, dup := firstDuplicate(len(cols), func(i int) uint64 { return cols[i].window }); dup {
		return nil, reject(rejectDuplicateColumn, "columns[%d].window_start_ms: %d repeats columns[%d]", j, cols[j].window, i)
	}
	return cols, nil
}

// columnInfo is a validated column: its window and step, its content
// digest, its weights, and its rows as read; live[i] says whether rows[i]'s
// route was live in the catalog validated against.
type columnInfo struct {
	window, step, digest uint64
	ww, wr               uint32
	rows                 []api.WireRow
	live                 []bool
}

// validateColumn checks columns[i], feeds its content to d and reads its
// rows into sc, after the rows already there.
func validateColumn(c api.WireColumn, i int, cat *catalog.Catalog, cfg *api.Config, nowMs uint64, d *digester, sc *rowScratch) *rejection {
	path := fieldPath{col: i, row: -1}
	w := c.WindowStartMs
	// A scheduled step change applies from its boundary on (Config.StepAt).
	step := cfg.StepAt(w)
	if c.StepMs != step {
		return reject(rejectStep, "%s.step_ms: %d differs from the replicated step of %d for window %d", path, c.StepMs, step, w)
	}
	if w%step != 0 {
		return reject(rejectAlignment, "%s.window_start_ms: %d is not a multiple of step_ms %d", path, w, step)
	}
	// The window ends more than maxFutureSteps steps after now, written
	// without overflow: w + step > now + 2·step.
	if w > nowMs && w-nowMs > (maxFutureSteps-1)*step {
		return reject(rejectFuture, "%s.window_start_ms: window [%d, %d) ends more than %d steps after the leader's clock (%d)",
			path, w, w+step, maxFutureSteps, nowMs)
	}
	d.header(c)
	var rej *rejection
	first := len(sc.live)
	c.Rows(func(j int, b []byte) bool {
		row := sc.next(first + j)
		if err := row.Read(b); err != nil {
			rej = reject(rejectMalformed, "%s: %v", fieldPath{col: i, row: j}, err)
			return false
		}
		var live bool
		if live, rej = validateRow(row, fieldPath{col: i, row: j}, cat, cfg, c); rej != nil {
			return false
		}
		d.row(row)
		sc.live = append(sc.live, live)
		return true
	})
	if rej != nil {
		return rej
	}
	rows := sc.rows[first:len(sc.live)]
	if a, b, dup := firstDuplicate(len(rows), func(i int) uint64 { return rows[i].RouteID }); dup {
		return reject(rejectDuplicateRoute, "%s.route_id: route %d repeats rows[%d]", fieldPath{col: i, row: b}, rows[b].RouteID, a)
	}
	return nil
}

// fieldPath names a column (row < 0) or a row of a report. It is formatted
// only for a rejection, so an accepted report costs no formatting.
type fieldPath struct{ col, row int }

func (p fieldPath) String() string {
	if p.row < 0 {
		return fmt.Sprintf("columns[%d]", p.col)
	}
	return fmt.Sprintf("columns[%d].rows[%d]", p.col, p.row)
}

// validateRow checks one row; path names it. live says whether its route
// is live in cat.
func validateRow(row *api.WireRow, path fieldPath, cat *catalog.Catalog, cfg *api.Config, c api.WireColumn) (live bool, rej *rejection) {
	rej = checkRow(row, path, cat, cfg, c, &live)
	return live, rej
}

func checkRow(row *api.WireRow, path fieldPath, cat *catalog.Catalog, cfg *api.Config, c api.WireColumn, live *bool) *rejection {
	if row.SampleRate == 0 {
		return reject(rejectSampleRate, "%s.sample_rate: must be at least 1", path)
	}
	b := row.Buckets
	if len(b) > catalog.MaxBuckets {
		return reject(rejectBuckets, "%s.buckets: %d buckets exceeds the limit of %d", path, len(b), catalog.MaxBuckets)
	}
	var route *catalog.RouteDescriptor
	if route, *live = cat.Route(row.RouteID); *live {
		if k := catalog.BucketCount(route.Start, route.End, int(cfg.GetBuckets())); len(b) != k {
			return reject(rejectBuckets, "%s.buckets: %d buckets, but route %d has %d under the replicated config",
				path, len(b), row.RouteID, k)
		}
	}
	var sum uint64
	for _, v := range b {
		var carry uint64
		if sum, carry = bits.Add64(sum, v, 0); carry != 0 {
			return reject(rejectOverflow, "%s.buckets: the bucket sum overflows uint64", path)
		}
	}
	for _, w := range [][2]uint32{{c.WriteWeight, c.ReadWeight}, {cfg.GetWriteWeight(), cfg.GetReadWeight()}} {
		if !weightedFits(row.Reads, row.Writes, w[0], w[1]) {
			return reject(rejectOverflow, "%s: %d writes × %d + %d reads × %d overflows uint64",
				path, row.Writes, w[0], row.Reads, w[1])
		}
	}
	top := row.TopKeys
	if len(top) > api.MaxReportTopKeys {
		return reject(rejectTopKeys, "%s.top_keys: %d entries exceeds the limit of %d", path, len(top), api.MaxReportTopKeys)
	}
	rate := uint64(row.SampleRate)
	for k, e := range top {
		if n := len(e.Key); n > catalog.MaxKeyLen {
			return reject(rejectKeySize, "%s.top_keys[%d].key: %d bytes exceeds the limit of %d", path, k, n, catalog.MaxKeyLen)
		}
		if e.Error > e.Count {
			return reject(rejectTopKeys, "%s.top_keys[%d].error: %d exceeds count %d", path, k, e.Error, e.Count)
		}
		if hi, _ := bits.Mul64(e.Count, rate); hi != 0 {
			return reject(rejectOverflow, "%s.top_keys[%d].count: %d × sample_rate %d overflows uint64", path, k, e.Count, rate)
		}
	}
	if i, j, dup := duplicateKey(top); dup {
		return reject(rejectTopKeys, "%s.top_keys[%d].key: repeats top_keys[%d]", path, j, i)
	}
	return validateSamples(row, path)
}

// validateSamples checks a row's raw sampled counts and operation sample:
// a key's sampled events fit in its count (each weighs at least 1), and
// the sample is bounded, with short keys and something in every entry.
func validateSamples(row *api.WireRow, path fieldPath) *rejection {
	for k, e := range row.TopKeys {
		if ev, carry := bits.Add64(e.SampledReads, e.SampledWrites, 0); carry != 0 || ev > e.Count-e.Error {
			return reject(rejectTopKeys, "%s.top_keys[%d]: %d sampled reads and %d sampled writes exceed count - error %d",
				path, k, e.SampledReads, e.SampledWrites, e.Count-e.Error)
		}
	}
	ss := row.Samples
	if len(ss) > api.MaxReportSamples {
		return reject(rejectSamples, "%s.samples: %d entries exceeds the limit of %d", path, len(ss), api.MaxReportSamples)
	}
	for k, e := range ss {
		if n := len(e.Key); n > catalog.MaxKeyLen {
			return reject(rejectKeySize, "%s.samples[%d].key: %d bytes exceeds the limit of %d", path, k, n, catalog.MaxKeyLen)
		}
		if e.Reads == 0 && e.Writes == 0 {
			return reject(rejectSamples, "%s.samples[%d]: no reads and no writes", path, k)
		}
	}
	return nil
}

// weightedFits reports whether writes·ww + reads·wr fits in 64 bits.
func weightedFits(reads, writes uint64, ww, wr uint32) bool {
	wHi, wLo := bits.Mul64(writes, uint64(ww))
	rHi, rLo := bits.Mul64(reads, uint64(wr))
	_, carry := bits.Add64(wLo, rLo, 0)
	return wHi == 0 && rHi == 0 && carry == 0
}

// firstDuplicate returns the first pair i < j of n values with at(i) ==
// at(j). Reporters send rows sorted by route id, which is checked without
// allocating.
func firstDuplicate(n int, at func(int) uint64) (int, int, bool) {
	increasing := true
	for i := 1; i < n && increasing; i++ {
		increasing = at(i-1) < at(i)
	}
	if increasing {
		return 0, 0, false
	}
	if n <= quadraticDupLimit {
		for j := 1; j < n; j++ {
			for i := range j {
				if at(i) == at(j) {
					return i, j, true
				}
			}
		}
		return 0, 0, false
	}
	first := make(map[uint64]int, n)
	for j := range n {
		if i, ok := first[at(j)]; ok {
			return i, j, true
		}
		first[at(j)] = j
	}
	return 0, 0, false
}

// duplicateKey returns the first pair i < j of top-K entries with the same
// key (a Space-Saving summary never has one; merging it would count the
// key twice).
func duplicateKey(top []api.WireTopKey) (int, int, bool) {
	if len(top) <= quadraticDupLimit {
		for j := 1; j < len(top); j++ {
			for i := range j {
				if bytes.Equal(top[i].Key, top[j].Key) {
					return i, j, true
				}
			}
		}
		return 0, 0, false
	}
	idx := make([]int, len(top))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return bytes.Compare(top[a].Key, top[b].Key) })
	i, j, found := 0, math.MaxInt, false
	for n := 1; n < len(idx); n++ {
		if bytes.Equal(top[idx[n-1]].Key, top[idx[n]].Key) && idx[n] < j {
			// Stable sort: idx[n-1] < idx[n]; report the earliest second
			// occurrence, like the quadratic path.
			i, j, found = idx[n-1], idx[n], true
		}
	}
	return i, j, found
}
