package columns

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// mergeCatalog has three routes: 1 = ["", g) in group 1, 2 = [g, p) and
// 3 = [p, +inf) in group 2.
func mergeCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, err := catalog.FromProto(&api.CatalogSnapshot{Version: 1, NextRouteId: 4, Routes: []*api.RouteDescriptor{
		{RouteId: 1, Start: nil, End: []byte("g"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE},
		{RouteId: 2, Start: []byte("g"), End: []byte("p"), GroupId: 2, State: api.RouteState_ROUTE_STATE_ACTIVE},
		{RouteId: 3, Start: []byte("p"), End: nil, GroupId: 2, State: api.RouteState_ROUTE_STATE_ACTIVE},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const testStep = 1000

func reportCol(w uint64, rows ...*api.ReportRow) *api.ReportColumn {
	return &api.ReportColumn{WindowStartMs: w, StepMs: testStep, Buckets: 16, WriteWeight: 4, ReadWeight: 1, Rows: rows}
}

func key(k string, count, errBound uint64) *api.TopKeyCount {
	return &api.TopKeyCount{Key: []byte(k), Count: count, Error: errBound}
}

func buckets16(v ...uint64) []uint64 {
	b := make([]uint64, 16)
	copy(b, v)
	return b
}

func estimates(r *api.ColumnRow) map[string][2]uint64 {
	out := map[string][2]uint64{}
	for _, k := range r.GetTopKeys() {
		out[string(k.GetKey())] = [2]uint64{k.GetLower(), k.GetUpper()}
	}
	return out
}

// row is the merged row of a route (nil if none); the sum must be at rest.
func (c *columnSum) row(id uint64) *rowSum {
	sh := &c.shards[shardOf(id)]
	if i, ok := sh.rowIndex.get(id); ok {
		return &sh.rows[i]
	}
	return nil
}

func findRow(t *testing.T, c *api.ObserveColumn, id uint64) *api.ColumnRow {
	t.Helper()
	for _, r := range c.GetRows() {
		if r.GetRouteId() == id {
			return r
		}
	}
	t.Fatalf("route %d not in column %v", id, c.GetRows())
	return nil
}

func TestMergeCountsAndBuckets(t *testing.T) {
	cat := mergeCatalog(t)
	s := newColumnSum(5000, testStep)
	s.add("a", reportCol(5000,
		&api.ReportRow{RouteId: 2, Reads: 100, Writes: 200, ReadBytes: 1000, WriteBytes: 2000, Buckets: buckets16(1, 2, 3), SampleRate: 1},
		&api.ReportRow{RouteId: 1, Reads: 1, SampleRate: 1, Buckets: buckets16(1)},
	), cat)
	s.add("b", reportCol(5000,
		&api.ReportRow{RouteId: 2, Reads: 10, Writes: 20, ReadBytes: 100, WriteBytes: 200, Buckets: buckets16(10, 0, 30), SampleRate: 16},
		&api.ReportRow{RouteId: 3, Writes: 5, WriteBytes: 50, SampleRate: 16, Buckets: buckets16(0, 20)},
	), cat)
	e, stats := s.entry(cat, detector.DefaultConfig(), 64, 1, nil)

	if e.GetWindowStartMs() != 5000 || e.GetAtMs() != 6000 || e.GetStepMs() != testStep {
		t.Fatalf("window fields: %v", e)
	}
	if !slices.Equal(e.GetReporters(), []string{"a", "b"}) {
		t.Fatalf("reporters %v", e.GetReporters())
	}
	r := findRow(t, e, 2)
	if r.GetReads() != 110 || r.GetWrites() != 220 || r.GetReadBytes() != 1100 || r.GetWriteBytes() != 2200 {
		t.Fatalf("route 2 sums: %v", r)
	}
	// Score (220·4 + 110)·60000/1000 = 59400 >= 50000: hot, with evidence.
	if !slices.Equal(r.GetBuckets(), buckets16(11, 2, 33)) {
		t.Fatalf("route 2 buckets %v", r.GetBuckets())
	}
	// Route 1 and 3 are below the threshold: kept for display, no evidence.
	if r1 := findRow(t, e, 1); r1.GetBuckets() != nil || r1.GetReads() != 1 {
		t.Fatalf("route 1: %v", r1)
	}
	want := []*api.GroupLoad{
		{GroupId: 1, Reads: 1},
		{GroupId: 2, Reads: 110, Writes: 225, ReadBytes: 1100, WriteBytes: 2250},
	}
	if len(e.GetGroupTotals()) != 2 || !proto.Equal(e.GetGroupTotals()[0], want[0]) || !proto.Equal(e.GetGroupTotals()[1], want[1]) {
		t.Fatalf("group totals %v, want %v", e.GetGroupTotals(), want)
	}
	if !slices.IsSortedFunc(e.GetRows(), func(a, b *api.ColumnRow) int { return int(a.GetRouteId()) - int(b.GetRouteId()) }) {
		t.Fatalf("rows not in route order")
	}
	if stats.inputs != 4 || stats.deadRows != 0 || e.GetDroppedRows() != 0 {
		t.Fatalf("stats %+v dropped %d", stats, e.GetDroppedRows())
	}
}

// TestMergeTopK checks the docs/design.md#the-load-pipeline bounds with sample rates 1 and 16 and a
// key missing from a full sketch.
func TestMergeTopK(t *testing.T) {
	cat := mergeCatalog(t)
	hot := func(rate uint32, keys ...*api.TopKeyCount) *api.ReportRow {
		return &api.ReportRow{RouteId: 2, Writes: 10000, SampleRate: rate, Buckets: buckets16(1), TopKeys: keys}
	}
	s := newColumnSum(0, testStep)
	// a: rate 1, never replaced an entry (all errors 0): exact, not full.
	s.add("a", reportCol(0, hot(1, key("x", 100, 0), key("y", 50, 0))), cat)
	// b: rate 16, full (an entry with error > 0); smallest count 5.
	s.add("b", reportCol(0, hot(16, key("x", 10, 2), key("z", 5, 5))), cat)
	e, _ := s.entry(cat, detector.DefaultConfig(), 64, 1, nil)
	got := estimates(findRow(t, e, 2))
	want := map[string][2]uint64{
		// x is in both: lower 100 + (10-2)·16, upper 100 + 10·16.
		"x": {228, 260},
		// y is missing from b's full sketch: + b's minimum 5·16 on upper.
		"y": {50, 130},
		// z is missing from a, which is not full: nothing added.
		"z": {0, 80},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("estimates %v, want %v", got, want)
	}
	// Highest upper first.
	keys := findRow(t, e, 2).GetTopKeys()
	if string(keys[0].GetKey()) != "x" || string(keys[1].GetKey()) != "y" || string(keys[2].GetKey()) != "z" {
		t.Fatalf("order %v", keys)
	}
	if findRow(t, e, 2).GetTopKDegraded() {
		t.Fatalf("degraded without a degraded input")
	}

	// A third, degraded input with rate 1 holding only y: degraded, and
	// its minimum (7) lands on x and z.
	s2 := newColumnSum(0, testStep)
	s2.add("a", reportCol(0, hot(1, key("x", 100, 0), key("y", 50, 0))), cat)
	s2.add("b", reportCol(0, hot(16, key("x", 10, 2), key("z", 5, 5))), cat)
	r := hot(1, key("y", 7, 3))
	r.TopKDegraded = true
	s2.add("c", reportCol(0, r), cat)
	e2, _ := s2.entry(cat, detector.DefaultConfig(), 64, 1, nil)
	got2 := estimates(findRow(t, e2, 2))
	want2 := map[string][2]uint64{"x": {228, 267}, "y": {54, 137}, "z": {0, 87}}
	if fmt.Sprint(got2) != fmt.Sprint(want2) || !findRow(t, e2, 2).GetTopKDegraded() {
		t.Fatalf("estimates %v degraded %v, want %v degraded", got2, findRow(t, e2, 2).GetTopKDegraded(), want2)
	}
}

func TestMergeTopKBounded(t *testing.T) {
	cat := mergeCatalog(t)
	var keys []*api.TopKeyCount
	for i := range 40 {
		keys = append(keys, key(fmt.Sprintf("k%02d", i), uint64(1000+i), 0))
	}
	s := newColumnSum(0, testStep)
	s.add("a", reportCol(0, &api.ReportRow{RouteId: 2, Writes: 100000, SampleRate: 1, Buckets: buckets16(1), TopKeys: keys}), cat)
	e, _ := s.entry(cat, detector.DefaultConfig(), 64, 1, nil)
	got := findRow(t, e, 2).GetTopKeys()
	if len(got) != mergedTopKeys {
		t.Fatalf("%d keys, want %d", len(got), mergedTopKeys)
	}
	// The 32 highest: k08 … k39, highest first.
	if string(got[0].GetKey()) != "k39" || string(got[31].GetKey()) != "k08" {
		t.Fatalf("kept %s … %s", got[0].GetKey(), got[31].GetKey())
	}
}

func TestMergeKeyCapDegrades(t *testing.T) {
	cat := mergeCatalog(t)
	s := newColumnSum(0, testStep)
	for r := range maxMergeKeys/api.MaxReportTopKeys + 1 {
		var keys []*api.TopKeyCount
		for i := range api.MaxReportTopKeys {
			keys = append(keys, key(fmt.Sprintf("r%d-%03d", r, i), 1, 0))
		}
		s.add(fmt.Sprint("rep", r), reportCol(0, &api.ReportRow{RouteId: 2, Writes: 100000, SampleRate: 1, Buckets: buckets16(1), TopKeys: keys}), cat)
	}
	e, _ := s.entry(cat, detector.DefaultConfig(), 64, 1, nil)
	if r := findRow(t, e, 2); !r.GetTopKDegraded() || len(r.GetTopKeys()) != mergedTopKeys {
		t.Fatalf("a row past the key cap must be degraded, with %d keys: %v, %d", mergedTopKeys, r.GetTopKDegraded(), len(r.GetTopKeys()))
	}
	if n := s.row(2).nkeys; n != maxMergeKeys {
		t.Fatalf("%d keys tracked, want the cap %d", n, maxMergeKeys)
	}
}

func TestMergeBucketCountsDisagree(t *testing.T) {
	cat := mergeCatalog(t)
	s := newColumnSum(0, testStep)
	s.add("a", reportCol(0, &api.ReportRow{RouteId: 2, Writes: 10000, SampleRate: 1, Buckets: buckets16(5)}), cat)
	s.add("b", reportCol(0, &api.ReportRow{RouteId: 2, Writes: 10000, SampleRate: 1, Buckets: make([]uint64, 32)}), cat)
	s.add("c", reportCol(0, &api.ReportRow{RouteId: 2, Writes: 10000, SampleRate: 1, Buckets: buckets16(5)}), cat)
	e, _ := s.entry(cat, detector.DefaultConfig(), 64, 1, nil)
	if r := findRow(t, e, 2); r.GetBuckets() != nil || r.GetWrites() != 30000 {
		t.Fatalf("mixed layouts must give no bucket evidence but full counts: %v", r)
	}
}

func TestMergeDeadRoutes(t *testing.T) {
	cat := mergeCatalog(t)
	s := newColumnSum(0, testStep)
	if dead := s.add("a", reportCol(0,
		&api.ReportRow{RouteId: 2, Writes: 10, SampleRate: 1, Buckets: buckets16(1)},
		&api.ReportRow{RouteId: 99, Writes: 10, SampleRate: 1},
	), cat); dead != 1 {
		t.Fatalf("dead rows on admission: %d, want 1", dead)
	}
	s.add("b", reportCol(0, &api.ReportRow{RouteId: 3, Writes: 10, SampleRate: 1, Buckets: buckets16(1)}), cat)
	// Route 3 splits before the column is assembled.
	after, _, err := cat.Split(3, []byte("t"), 1)
	if err != nil {
		t.Fatal(err)
	}
	e, stats := s.entry(after, detector.DefaultConfig(), 64, 1, nil)
	if e.GetDroppedRows() != 2 || stats.deadRows != 2 {
		t.Fatalf("dropped %d (stats %d), want 2", e.GetDroppedRows(), stats.deadRows)
	}
	if len(e.GetRows()) != 1 || e.GetRows()[0].GetRouteId() != 2 {
		t.Fatalf("rows %v", e.GetRows())
	}
	for _, g := range e.GetGroupTotals() {
		if g.GetWrites() != 10 {
			t.Fatalf("dead rows must not count in group totals: %v", g)
		}
	}
}

func TestMergeBelowThresholdRows(t *testing.T) {
	// Many small routes: only the belowRows highest are kept, without
	// evidence; group totals still count them all.
	var routes []*api.RouteDescriptor
	for i := range 10 {
		start := []byte{byte('a' + i)}
		if i == 0 {
			start = nil
		}
		var end []byte
		if i < 9 {
			end = []byte{byte('a' + i + 1)}
		}
		routes = append(routes, &api.RouteDescriptor{RouteId: uint64(i + 1), Start: start, End: end, GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE})
	}
	cat, err := catalog.FromProto(&api.CatalogSnapshot{Version: 1, NextRouteId: 11, Routes: routes})
	if err != nil {
		t.Fatal(err)
	}
	s := newColumnSum(0, testStep)
	var rows []*api.ReportRow
	for i := range 10 {
		id := uint64(i + 1)
		k := catalog.NewLayout(routes[i].Start, routes[i].End, 16).K()
		rows = append(rows, &api.ReportRow{RouteId: id, Reads: id * 10, SampleRate: 1, Buckets: make([]uint64, k), TopKeys: []*api.TopKeyCount{key("q", 1, 0)}})
	}
	rows[9].Writes = 1000 // route 10: (4000 + 100)·60 = 246000, hot
	s.add("a", reportCol(0, rows...), cat)
	e, _ := s.entry(cat, detector.DefaultConfig(), 3, 1, nil)
	var ids []uint64
	for _, r := range e.GetRows() {
		ids = append(ids, r.GetRouteId())
		if r.GetRouteId() != 10 && (r.GetBuckets() != nil || r.GetTopKeys() != nil) {
			t.Fatalf("below-threshold row %d kept evidence", r.GetRouteId())
		}
	}
	if !slices.Equal(ids, []uint64{7, 8, 9, 10}) {
		t.Fatalf("rows %v, want the hot route 10 and the 3 highest below it", ids)
	}
	if r := findRow(t, e, 10); len(r.GetTopKeys()) != 1 || r.GetBuckets() == nil {
		t.Fatalf("hot row lost its evidence: %v", r)
	}
	if g := e.GetGroupTotals(); len(g) != 1 || g[0].GetReads() != 550 || g[0].GetWrites() != 1000 {
		t.Fatalf("group totals %v", g)
	}
}

// At cluster version 3 every live reported route is in route_loads with its
// counts, rows hold only the hot route's evidence, and no display rows are
// kept (the loads cover them).
func TestMergeRouteLoads(t *testing.T) {
	cat := mergeCatalog(t)
	s := newColumnSum(0, testStep)
	s.add("a", reportCol(0,
		&api.ReportRow{RouteId: 3, Writes: 1000, ReadBytes: 9, SampleRate: 1, TopKeys: []*api.TopKeyCount{key("q", 4000, 0)}},
		&api.ReportRow{RouteId: 1, Reads: 7, WriteBytes: 3},
		&api.ReportRow{RouteId: 99, Reads: 5}, // gone
	), cat)
	s.add("b", reportCol(0, &api.ReportRow{RouteId: 1, Reads: 2, Writes: 1}), cat)
	e, _ := s.entry(cat, detector.DefaultConfig(), 64, clusterversion.Version3, nil)
	if err := e.GetRouteLoads().Check(); err != nil {
		t.Fatal(err)
	}
	var loads []api.RouteLoad
	for _, l := range e.GetRouteLoads().All() {
		loads = append(loads, l)
	}
	want := []api.RouteLoad{{RouteID: 1, Reads: 9, Writes: 1, WriteBytes: 3}, {RouteID: 3, Writes: 1000, ReadBytes: 9}}
	if !slices.Equal(loads, want) {
		t.Fatalf("route loads %v, want %v", loads, want)
	}
	if rows := e.GetRows(); len(rows) != 1 || rows[0].GetRouteId() != 3 || len(rows[0].GetTopKeys()) != 1 {
		t.Fatalf("rows %v, want only the hot route 3 with its evidence", rows)
	}
	// Below version 3 the same sum has no loads and keeps display rows.
	if e2, _ := s.entry(cat, detector.DefaultConfig(), 64, clusterversion.Version2, nil); e2.GetRouteLoads() != nil || len(e2.GetRows()) != 2 {
		t.Fatalf("version 2 entry: loads %v rows %v", e2.GetRouteLoads(), e2.GetRows())
	}
}

// TestMergeOrderIndependentProperty: the committed entry does not depend on
// the order reports arrive in, nor on merges running at once (the second
// sum merges every report in its own goroutine), at every version; every
// estimate has lower <= upper; and a row's merged sample stays within
// sampleBuffer items while merging and mergedSamples committed, however
// many reporters sample it (up to 12 × 40 here).
func TestMergeOrderIndependentProperty(t *testing.T) {
	cat := mergeCatalog(t)
	sampleKeys := make([]string, 60)
	for i := range sampleKeys {
		sampleKeys[i] = fmt.Sprintf("s%02d", i)
	}
	rapid.Check(t, func(t *rapid.T) {
		// Crowded: enough reporters sampling route 2 to overflow its
		// merged sample (at least 6 × 30 > mergedSamples).
		crowded := rapid.Bool().Draw(t, "crowded")
		n, minSamples := rapid.IntRange(1, 12).Draw(t, "reporters"), 0
		if crowded {
			n, minSamples = rapid.IntRange(6, 12).Draw(t, "reporters"), 30
		}
		var cols []*api.ReportColumn
		for i := range n {
			var rows []*api.ReportRow
			ids := rapid.SliceOfDistinct(rapid.Uint64Range(1, 4), func(v uint64) uint64 { return v }).Draw(t, fmt.Sprint("routes", i))
			if crowded && !slices.Contains(ids, 2) {
				ids = append(ids, 2)
			}
			for _, id := range ids {
				var keys []*api.TopKeyCount
				for _, k := range rapid.SliceOfDistinct(rapid.SampledFrom([]string{"h", "i", "j", "k", "l"}), func(s string) string { return s }).Draw(t, fmt.Sprint("keys", i, id)) {
					c := rapid.Uint64Range(1, 1000).Draw(t, "count")
					keys = append(keys, key(k, c, rapid.Uint64Range(0, c).Draw(t, "err")))
				}
				var samples []*api.SampledKey
				lo := 0
				if id == 2 {
					lo = minSamples
				}
				for _, k := range rapid.SliceOfNDistinct(rapid.SampledFrom(sampleKeys), lo, 40, func(s string) string { return s }).Draw(t, fmt.Sprint("samples", i, id)) {
					samples = append(samples, &api.SampledKey{Key: []byte(k), Reads: rapid.Uint32Range(0, 3).Draw(t, "sr"), Writes: rapid.Uint32Range(1, 3).Draw(t, "sw")})
				}
				rows = append(rows, &api.ReportRow{
					RouteId: id, Reads: rapid.Uint64Range(0, 1e6).Draw(t, "r"), Writes: rapid.Uint64Range(0, 1e6).Draw(t, "w"),
					SampleRate: rapid.SampledFrom([]uint32{1, 16}).Draw(t, "rate"), Buckets: buckets16(rapid.Uint64Range(1, 1e6).Draw(t, "b")),
					TopKeys: keys, TopKDegraded: rapid.Bool().Draw(t, "deg"), Samples: samples,
				})
			}
			cols = append(cols, reportCol(0, rows...))
		}
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		perm := rapid.Permutation(idx).Draw(t, "order")
		a, b := newColumnSum(0, testStep), newColumnSum(0, testStep)
		var wg sync.WaitGroup
		for i := range n {
			a.add(fmt.Sprint("r", i), cols[i], cat)
			b.claim(fmt.Sprint("r", perm[i]), 0)
			wire, err := columnOf(cols[perm[i]], cat)
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { b.merge(fmt.Sprint("r", perm[i]), wire) })
		}
		wg.Wait()
		for id := uint64(1); id <= 3; id++ {
			if r := a.row(id); r != nil && len(r.sample.items) > sampleBuffer {
				t.Fatalf("route %d holds %d sampled keys, more than %d", id, len(r.sample.items), sampleBuffer)
			}
		}
		dc := detector.DefaultConfig()
		dc.Threshold = 1
		for _, v := range clusterversion.Versions() {
			ea, _ := a.entry(cat, dc, 64, v, nil)
			eb, _ := b.entry(cat, dc, 64, v, nil)
			if !proto.Equal(ea, eb) {
				t.Fatalf("version %d: order changed the entry:\n%v\n%v", v, ea, eb)
			}
			for _, r := range ea.GetRows() {
				for _, k := range r.GetTopKeys() {
					if k.GetLower() > k.GetUpper() {
						t.Fatalf("route %d key %q: lower %d > upper %d", r.GetRouteId(), k.GetKey(), k.GetLower(), k.GetUpper())
					}
				}
				if len(r.GetSamples()) > mergedSamples {
					t.Fatalf("route %d: %d samples", r.GetRouteId(), len(r.GetSamples()))
				}
			}
		}
	})
}

// sampledKeyCount is a top-K entry with raw sampled reads and writes
// (count - error = 4·writes + reads).
func sampledKeyCount(k string, reads, writes, errBound uint64) *api.TopKeyCount {
	return &api.TopKeyCount{Key: []byte(k), Count: 4*writes + reads + errBound, Error: errBound, SampledReads: reads, SampledWrites: writes}
}

// The merge keeps the raw sampled counts per key and the variance of the
// key's lower estimate, and the reporters' operation samples weighted by
// their reporter's load; below version 2 none of it reaches the entry.
func TestMergeKeepsSampledEvidence(t *testing.T) {
	cat, err := catalog.New([][]byte{[]byte("g"), []byte("p")}, 7)
	if err != nil {
		t.Fatal(err)
	}
	hotRow := func(rate uint32, k *api.TopKeyCount, load uint64, samples ...*api.SampledKey) *api.ReportRow {
		return &api.ReportRow{RouteId: 2, Writes: load / 4, SampleRate: rate, Buckets: buckets16(load), TopKeys: []*api.TopKeyCount{k}, Samples: samples}
	}
	sk := func(k string, reads, writes uint32) *api.SampledKey {
		return &api.SampledKey{Key: []byte(k), Reads: reads, Writes: writes}
	}
	a := reportCol(0, hotRow(16, sampledKeyCount("h", 10, 100, 0), 1_000_000, sk("h", 0, 3), sk("i", 1, 0)))
	b := reportCol(0, hotRow(4, sampledKeyCount("h", 0, 50, 2), 500_000, sk("h", 0, 1), sk("j", 0, 1)))
	// A version 1 reporter: no raw counts; variance from the larger weight.
	c := reportCol(0, hotRow(1, key("h", 30, 0), 100_000))
	var entries []*api.ObserveColumn
	for _, order := range [][]Contribution{{{"a", a}, {"b", b}, {"c", c}}, {{"c", c}, {"b", b}, {"a", a}}} {
		entries = append(entries, MergeColumn(order, cat, detector.DefaultConfig(), clusterversion.Version2))
	}
	if !proto.Equal(entries[0], entries[1]) {
		t.Fatal("the merge depends on the reports' order")
	}
	r := findRow(t, entries[0], 2)
	k := r.GetTopKeys()[0]
	wantVar := uint64(16*16*(16*100+1*10) + 4*4*(16*50) + 1*4*30)
	if string(k.GetKey()) != "h" || k.GetSampledReads() != 10 || k.GetSampledWrites() != 150 || k.GetVariance() != wantVar {
		t.Fatalf("key %v, want 10 reads, 150 writes, variance %d", k, wantVar)
	}
	if r.GetSampleRate() != 16 {
		t.Fatalf("sample rate %d, want the largest, 16", r.GetSampleRate())
	}
	// a: h 12 of 13 sampled weight of 1e6; i 1/13; b: h and j half of 5e5.
	want := []*api.WeightedKey{{Key: []byte("h"), Weight: 1_000_000*12/13 + 250_000}, {Key: []byte("i"), Weight: 1_000_000 / 13}, {Key: []byte("j"), Weight: 250_000}}
	if got := r.GetSamples(); len(got) != len(want) {
		t.Fatalf("samples %v", got)
	}
	for i, w := range want {
		if g := r.GetSamples()[i]; !bytes.Equal(g.GetKey(), w.GetKey()) || g.GetWeight() != w.GetWeight() {
			t.Fatalf("sample %d = %v, want %v", i, g, w)
		}
	}
	v1 := findRow(t, MergeColumn([]Contribution{{"a", a}, {"b", b}}, cat, detector.DefaultConfig(), clusterversion.Version1), 2)
	if len(v1.GetSamples()) != 0 || v1.GetSampleRate() != 0 || v1.GetTopKeys()[0].GetVariance() != 0 || v1.GetTopKeys()[0].GetSampledWrites() != 0 {
		t.Fatalf("version 1 entry carries version 2 evidence: %v", v1)
	}
}
