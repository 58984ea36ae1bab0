package columns

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// heavyColumn is one reporter's column over routes 1..n of a benchSplits
// catalog, route id's row carrying writes(id) writes, 16 buckets, 8 top keys
// and 32 sampled keys, each key padded to 76 bytes (about 3.5 KB of
// evidence a row, so a few hundred routes overfill the budget and the tests
// stay quick under -race).
func heavyColumn(w uint64, n int, reporter string, writes func(id uint64) uint64) *api.ReportColumn {
	c := reportCol(w)
	for id := uint64(1); id <= uint64(n); id++ {
		wr := writes(id)
		r := &api.ReportRow{RouteId: id, Writes: wr, SampleRate: 16, Buckets: buckets16(4 * wr), SampledWrites: 40}
		for k := range 8 {
			r.TopKeys = append(r.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "k%06d-top-%d-%s", id, k, keyPad), Count: 4 * 5, SampledWrites: 5})
		}
		for k := range 32 {
			r.Samples = append(r.Samples, &api.SampledKey{Key: fmt.Appendf(nil, "k%06d-%s-%02d-%s", id, reporter, k, keyPad), Writes: 1})
		}
		c.Rows = append(c.Rows, r)
	}
	return c
}

const keyPad = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func rowsBytes(e *api.ObserveColumn) int {
	n := 0
	for _, r := range e.GetRows() {
		n += proto.Size(r)
	}
	return n
}

// bounded_evidence: at version 3 every hot route is in route_loads, but
// evidence goes only to the hottest rows that fit in
// MaxColumnEvidenceBytes — and, given a candidacy, to the routes that may
// be planned first. Below version 3 every hot row keeps its evidence.
func TestEntryBoundsEvidence(t *testing.T) {
	const n = 400 // about 80 rows' evidence (two reporters' samples each) fits
	cat, err := catalog.New(benchSplits(n), 7)
	if err != nil {
		t.Fatal(err)
	}
	writes := func(id uint64) uint64 { return 1000 + id%97 }
	s := newColumnSum(0, testStep)
	for _, r := range []string{"a", "b"} {
		s.add(r, heavyColumn(0, n, r, writes), cat)
	}
	dc := detector.DefaultConfig()
	e, stats := s.entry(cat, dc, 64, clusterversion.Version3, nil)
	if got := e.GetRouteLoads().Len(); got != n {
		t.Fatalf("route_loads lists %d routes, want every one of %d", got, n)
	}
	b := rowsBytes(e)
	biggest := 0 // every row is about this size: the next one did not fit
	for _, r := range e.GetRows() {
		biggest = max(biggest, proto.Size(r))
	}
	if b > api.MaxColumnEvidenceBytes || b <= api.MaxColumnEvidenceBytes-biggest-64 || len(e.GetRows()) == n {
		t.Fatalf("%d rows with %d bytes of evidence: want the budget of %d filled to within a row (%d bytes), not every row", len(e.GetRows()), b, api.MaxColumnEvidenceBytes, biggest)
	}
	if stats.evidenceBytes != b || stats.evidenceRows+stats.withoutEvidence != n || stats.evidenceRows != len(e.GetRows()) {
		t.Fatalf("stats %+v for %d rows of %d bytes", stats, len(e.GetRows()), b)
	}
	// The hottest got it: no row left out scores above one kept.
	kept := map[uint64]bool{}
	minKept := uint64(1 << 63)
	for _, r := range e.GetRows() {
		kept[r.GetRouteId()] = true
		minKept = min(minKept, 2*writes(r.GetRouteId()))
		if len(r.GetSamples()) == 0 || len(r.GetTopKeys()) == 0 || len(r.GetBuckets()) != 16 {
			t.Fatalf("route %d kept without its evidence: %v", r.GetRouteId(), r)
		}
	}
	for id := uint64(1); id <= n; id++ {
		if !kept[id] && 2*writes(id) > minKept {
			t.Fatalf("route %d (%d writes) left out while a route with %d writes kept its evidence", id, 2*writes(id), minKept)
		}
	}

	// Candidates first: only routes divisible by 3 may be planned, and
	// they alone fill the budget.
	e3, _ := s.entry(cat, dc, 64, clusterversion.Version3, func(id uint64) bool { return id%3 == 0 })
	for _, r := range e3.GetRows() {
		if r.GetRouteId()%3 != 0 {
			t.Fatalf("route %d got evidence before a candidate", r.GetRouteId())
		}
	}

	// Version 2: unbounded, every hot row with its evidence.
	e2, _ := s.entry(cat, dc, 64, clusterversion.Version2, nil)
	if len(e2.GetRows()) != n || rowsBytes(e2) <= api.MaxColumnEvidenceBytes {
		t.Fatalf("version 2 entry: %d rows, %d bytes", len(e2.GetRows()), rowsBytes(e2))
	}
}

// Through the aggregator and a real FSM at version 3: routes the detector
// has counted hot in the two columns before (so this column can make them
// candidates) get the evidence budget first, and the bounded entry
// applies.
func TestAggregatorGivesCandidatesEvidence(t *testing.T) {
	const n = 300 // about 150 rows' evidence fits the budget; 100 are candidates
	h := newAggHarnessSplits(t, 0, benchSplits(n))
	h.begin()
	defer h.end()
	counted := func(id uint64) bool { return id%3 == 0 }
	w := uint64(1_000_000)
	for col := range 3 {
		h.clock.set(w + testStep/2)
		writes := func(id uint64) uint64 {
			if col < 2 && !counted(id) {
				return 1 // cold
			}
			return 1000 + id%97
		}
		res := h.report("a", heavyColumn(w, n, "a", writes))
		h.admitted(w, "a")
		h.clock.set(w + 2*testStep)
		h.step()
		// The column applied with its one reporter. (Not the answer's
		// acknowledgement: that waits step + grace in real time, which a
		// 900-route column under -race on a loaded machine can outlast.)
		if r := h.result(res); r.err != nil {
			t.Fatalf("column %d: %v", col, r.err)
		}
		if applied := h.prop.columns(); len(applied) != col+1 || len(applied[col].GetReporters()) != 1 {
			t.Fatalf("column %d: %d columns applied, want %d each counting its one reporter", col, len(applied), col+1)
		}
		w += testStep
	}
	applied := h.prop.columns()
	last := applied[len(applied)-1]
	if rowsBytes(last) > api.MaxColumnEvidenceBytes || len(last.GetRows()) == 0 {
		t.Fatalf("last column: %d rows, %d bytes", len(last.GetRows()), rowsBytes(last))
	}
	got := map[uint64]bool{}
	for _, r := range last.GetRows() {
		got[r.GetRouteId()] = true
	}
	// Candidates first: either every route counted twice got evidence, or
	// only such routes did.
	var missing, extra []uint64
	for id := uint64(1); id <= n; id++ {
		switch {
		case counted(id) && !got[id]:
			missing = append(missing, id)
		case !counted(id) && got[id]:
			extra = append(extra, id)
		}
	}
	if len(missing) > 0 && len(extra) > 0 {
		t.Fatalf("routes %v got evidence before candidates %v", extra[:1], missing[:1])
	}
	if len(extra) == 0 && len(missing) == 0 {
		t.Fatalf("the budget fits exactly the candidates: the test does not tell orders apart")
	}
	if got := h.metric("hotsplit_columns_rows_without_evidence_total", ""); got == 0 {
		t.Fatal("no hot row counted as committed without evidence")
	}
}
