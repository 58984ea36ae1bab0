package columns

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// validNowMs is the leader's clock in the pure validation tests: window
// 10000 has closed, 12000 is the last window not too far ahead.
const validNowMs = 11_000

func validateConfig() *api.Config {
	return &api.Config{StepMs: testStep, Buckets: 16, WriteWeight: new(uint32(4)), ReadWeight: new(uint32(1)), GraceMs: testStep / 2}
}

// narrowKey ends a route [p, narrowKey) whose 8-byte bucket window spans
// only 3 values, so its layout has 3 buckets whatever the config says.
const narrowKey = "p\x00\x00\x00\x00\x00\x00\x00\x03"

// narrowCatalog is mergeCatalog with route 3 split at narrowKey: route 4 =
// [p, narrowKey) has 3 buckets, route 5 = [narrowKey, +inf) 16.
func narrowCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	c, _, err := mergeCatalog(t).Split(3, []byte(narrowKey), 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rejectionCase is one validation rule: mutate breaks a valid report.
type rejectionCase struct {
	name   string
	reason string
	field  string // the message starts with it
	mutate func(r *api.ReportRequest)
}

func validReport() *api.ReportRequest {
	return &api.ReportRequest{ReporterId: "n1", Columns: []*api.ReportColumn{
		reportCol(9000, &api.ReportRow{RouteId: 2, Reads: 5, SampleRate: 1, Buckets: buckets16(5)}),
		reportCol(10000,
			&api.ReportRow{RouteId: 1, Reads: 5, SampleRate: 1, Buckets: buckets16(5)},
			&api.ReportRow{RouteId: 2, Writes: 5, SampleRate: 16, Buckets: buckets16(20), TopKeys: []*api.TopKeyCount{key("h", 3, 1), key("i", 2, 0)}},
		),
	}}
}

func rejectionCases() []rejectionCase {
	row := func(r *api.ReportRequest) *api.ReportRow { return r.Columns[1].Rows[1] }
	manyKeys := func(n int) []*api.TopKeyCount {
		out := make([]*api.TopKeyCount, n)
		for i := range out {
			out[i] = key(fmt.Sprintf("key-%04d", i), 1, 0)
		}
		return out
	}
	return []rejectionCase{
		{"empty reporter id", rejectReporterID, "reporter_id:", func(r *api.ReportRequest) { r.ReporterId = "" }},
		{"step differs from config", rejectStep, "columns[1].step_ms:", func(r *api.ReportRequest) {
			r.Columns[1].StepMs = 500
			r.Columns[1].WindowStartMs = 10500
		}},
		{"window not aligned", rejectAlignment, "columns[0].window_start_ms:", func(r *api.ReportRequest) { r.Columns[0].WindowStartMs = 9001 }},
		{"window too far ahead", rejectFuture, "columns[1].window_start_ms:", func(r *api.ReportRequest) { r.Columns[1].WindowStartMs = 13000 }},
		{"window a day ahead", rejectFuture, "columns[1].window_start_ms:", func(r *api.ReportRequest) { r.Columns[1].WindowStartMs = 10000 + 86_400_000 }},
		{"duplicate column", rejectDuplicateColumn, "columns[1].window_start_ms:", func(r *api.ReportRequest) { r.Columns[1].WindowStartMs = 9000 }},
		{"duplicate route row", rejectDuplicateRoute, "columns[1].rows[1].route_id:", func(r *api.ReportRequest) { row(r).RouteId = 1 }},
		{"sample rate 0", rejectSampleRate, "columns[1].rows[1].sample_rate:", func(r *api.ReportRequest) { row(r).SampleRate = 0 }},
		{"more than 256 buckets", rejectBuckets, "columns[1].rows[1].buckets: 300 buckets exceeds the limit of 256",
			func(r *api.ReportRequest) { row(r).Buckets = make([]uint64, 300) }},
		{"bucket count beyond the layout", rejectBuckets, "columns[1].rows[1].buckets: 17 buckets",
			func(r *api.ReportRequest) { row(r).Buckets = make([]uint64, 17) }},
		{"bucket count short of the layout", rejectBuckets, "columns[1].rows[1].buckets: 8 buckets",
			func(r *api.ReportRequest) { row(r).Buckets = make([]uint64, 8) }},
		{"narrow route with the config's count", rejectBuckets, "columns[1].rows[0].buckets: 16 buckets, but route 4 has 3",
			func(r *api.ReportRequest) { r.Columns[1].Rows[0].RouteId = 4 }},
		{"more than 256 top keys", rejectTopKeys, "columns[1].rows[1].top_keys: 257 entries",
			func(r *api.ReportRequest) { row(r).TopKeys = manyKeys(257) }},
		{"key over 4 KiB", rejectKeySize, "columns[1].rows[1].top_keys[1].key: 4097 bytes",
			func(r *api.ReportRequest) { row(r).TopKeys[1].Key = bytes.Repeat([]byte("k"), 4097) }},
		{"error above count", rejectTopKeys, "columns[1].rows[1].top_keys[0].error:", func(r *api.ReportRequest) { row(r).TopKeys[0].Error = 4 }},
		{"duplicate top key", rejectTopKeys, "columns[1].rows[1].top_keys[1].key: repeats top_keys[0]",
			func(r *api.ReportRequest) { row(r).TopKeys[1].Key = []byte("h") }},
		{"duplicate top key in a long list", rejectTopKeys, "columns[1].rows[1].top_keys[200].key: repeats top_keys[7]",
			func(r *api.ReportRequest) {
				row(r).TopKeys = manyKeys(256)
				row(r).TopKeys[200].Key = row(r).TopKeys[7].Key
			}},
		{"weighted writes overflow", rejectOverflow, "columns[1].rows[1]:", func(r *api.ReportRequest) { row(r).Writes = math.MaxUint64 / 2 }},
		{"weighted sum overflows", rejectOverflow, "columns[1].rows[1]:", func(r *api.ReportRequest) {
			row(r).Writes = math.MaxUint64 / 4
			row(r).Reads = 8
		}},
		{"weights of the report overflow", rejectOverflow, "columns[1].rows[0]:", func(r *api.ReportRequest) {
			r.Columns[1].ReadWeight = 1 << 20
			r.Columns[1].Rows[0].Reads = 1 << 50
		}},
		{"bucket sum overflows", rejectOverflow, "columns[1].rows[1].buckets:", func(r *api.ReportRequest) {
			row(r).Buckets[0], row(r).Buckets[1] = math.MaxUint64, 1
		}},
		{"top-K count × rate overflows", rejectOverflow, "columns[1].rows[1].top_keys[0].count:", func(r *api.ReportRequest) {
			row(r).TopKeys[0].Count = math.MaxUint64 / 8
		}},
		{"report over 4 MiB", rejectTooLarge, "report: ", func(r *api.ReportRequest) {
			// Five rows of 256 keys of 4 KiB: 5 MiB.
			for id := range uint64(5) {
				row := &api.ReportRow{RouteId: 100 + id, SampleRate: 1}
				for i := range 256 {
					row.TopKeys = append(row.TopKeys, key(fmt.Sprintf("%04096d", i), 1, 0))
				}
				r.Columns[1].Rows = append(r.Columns[1].Rows, row)
			}
		}},
	}
}

func TestValidateReportAcceptsValid(t *testing.T) {
	cat := narrowCatalog(t)
	r := validReport()
	// A dead route's row is checked but not against a layout.
	r.Columns[0].Rows = append(r.Columns[0].Rows, &api.ReportRow{RouteId: 99, Reads: 1, SampleRate: 1, Buckets: make([]uint64, 200)})
	// The narrow route with its own bucket count.
	r.Columns[1].Rows = append(r.Columns[1].Rows, &api.ReportRow{RouteId: 4, Reads: 1, SampleRate: 1, Buckets: make([]uint64, 3)})
	// The last window not too far ahead: [12000, 13000) ends two steps after now.
	r.Columns = append(r.Columns, reportCol(12000))
	if _, rej := validateReport(wireOf(t, r), cat, validateConfig(), validNowMs, new(rowScratch)); rej != nil {
		t.Fatalf("valid report rejected: %s", rej.msg)
	}
}

func TestValidateReportRejects(t *testing.T) {
	cat := narrowCatalog(t)
	for _, tc := range rejectionCases() {
		t.Run(tc.name, func(t *testing.T) {
			r := validReport()
			tc.mutate(r)
			_, rej := validateReport(wireOf(t, r), cat, validateConfig(), validNowMs, new(rowScratch))
			if rej == nil {
				t.Fatalf("accepted")
			}
			if rej.reason != tc.reason || !strings.HasPrefix(rej.msg, tc.field) {
				t.Fatalf("got %s: %q, want %s: %q…", rej.reason, rej.msg, tc.reason, tc.field)
			}
		})
	}
}

// FuzzReportValidation takes arbitrary bytes as a report, in wire form as
// the leader does, against a fixed catalog and config, and holds it to what
// decoding it with protobuf gives: the bytes are refused as malformed
// exactly when proto.Unmarshal refuses them; otherwise they validate and
// merge exactly as the message's own encoding does (the same rejection —
// reason and message naming the field — or the same digests and, at every
// cluster version, the same entry). It never panics, a rejection names a
// field, and an accepted report satisfies every limit and merges into an
// entry the FSM's checks would accept.
func FuzzReportValidation(f *testing.F) {
	seed := func(r *api.ReportRequest) {
		b, err := proto.Marshal(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(validReport())
	for _, tc := range rejectionCases() {
		if tc.reason == rejectTooLarge {
			continue // a 4 MiB seed slows every run; the fuzzer grows inputs itself
		}
		r := validReport()
		tc.mutate(r)
		seed(r)
	}
	f.Add([]byte{})
	cat := narrowCatalog(f)
	cfg := validateConfig()
	// One scratch for every input, as an ingest slot's: nothing of one
	// report may show through in the next.
	var sc rowScratch
	f.Fuzz(func(t *testing.T, b []byte) {
		req := &api.ReportRequest{}
		perr := proto.Unmarshal(b, req)
		if _, cerr := api.CheckReportRequest(b); (perr == nil) != (cerr == nil) {
			t.Fatalf("protobuf says %v, the wire reader %v", perr, cerr)
		}
		// What the leader does with the bytes: bytes protobuf refuses are
		// refused as malformed, whatever else is wrong with them.
		_, _, crej, cerr := checkReport(b, cat, cfg, validNowMs, new(rowScratch))
		if (perr != nil) != (cerr != nil) || (cerr != nil && (!errors.Is(cerr, api.ErrMalformedReport) || crej.reason != rejectMalformed)) {
			t.Fatalf("protobuf says %v; the leader rejects with %+v, %v", perr, crej, cerr)
		}
		if perr != nil {
			return
		}
		canon, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		asSent, err := readReport(b)
		if err != nil {
			t.Fatal(err)
		}
		asMsg, err := readReport(canon)
		if err != nil {
			t.Fatal(err)
		}
		asMsg.size = asSent.size // the limit is on what arrived
		// Through the column heads, as Take validates after its late check.
		asSent.readHeads()
		cols, rej := validateReport(asSent, cat, cfg, validNowMs, &sc)
		mcols, mrej := validateReport(asMsg, cat, cfg, validNowMs, new(rowScratch))
		if (rej == nil) != (crej == nil) || (rej != nil && *rej != *crej) {
			t.Fatalf("validation gives %+v, the leader %+v", rej, crej)
		}
		if (rej == nil) != (mrej == nil) || (rej != nil && *rej != *mrej) {
			t.Fatalf("the bytes give %+v, the message's encoding %+v", rej, mrej)
		}
		if rej != nil {
			if !strings.Contains(rej.msg, ": ") || rej.reason == "" || rej.reason == rejectMalformed {
				t.Fatalf("rejection without field or reason, or malformed: %q (%q)", rej.msg, rej.reason)
			}
			return
		}
		if err := checkLimits(req, cat, cfg); err != nil {
			t.Fatalf("accepted a report that breaks a limit: %v", err)
		}
		dc := detector.DefaultConfig()
		dc.Threshold = 1 // every row keeps its evidence
		for i, c := range cols {
			if c.digest != mcols[i].digest || c.window != req.GetColumns()[i].GetWindowStartMs() {
				t.Fatalf("columns[%d]: digests %x and %x, window %d", i, c.digest, mcols[i].digest, c.window)
			}
			s, m := newColumnSum(c.window, c.step), newColumnSum(c.window, c.step)
			s.claim(asSent.reporter, c.digest)
			s.merge(asSent.reporter, c)
			m.add(req.GetReporterId(), req.GetColumns()[i], cat)
			for _, v := range clusterversion.Versions() {
				e, _ := s.entry(cat, dc, DefaultBelowThresholdRows, v, nil)
				em, _ := m.entry(cat, dc, DefaultBelowThresholdRows, v, nil)
				if !proto.Equal(e, em) {
					t.Fatalf("columns[%d], version %d: the bytes merge into\n%v\nthe message into\n%v", i, v, e, em)
				}
				if err := checkEntry(e); err != nil {
					t.Fatalf("entry from an accepted report: %v", err)
				}
			}
		}
	})
}

// checkReport is what Take does with a report's bytes: read, then
// checkRead.
func checkReport(report []byte, cat *catalog.Catalog, cfg *api.Config, nowMs uint64, sc *rowScratch) (r wireReport, cols []columnInfo, rej *rejection, err error) {
	r, err = readReport(report)
	cols, rej, err = checkRead(report, r, err, cat, cfg, nowMs, sc)
	return r, cols, rej, err
}

// wireOf is req in wire form, as the leader takes it.
func wireOf(t testing.TB, req *api.ReportRequest) wireReport {
	t.Helper()
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	w, err := readReport(b)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checkLimits restates every docs/design.md#the-load-pipeline/§12 limit independently of
// validateReport.
func checkLimits(req *api.ReportRequest, cat *catalog.Catalog, cfg *api.Config) error {
	if proto.Size(req) > 4<<20 {
		return fmt.Errorf("size %d", proto.Size(req))
	}
	if req.GetReporterId() == "" {
		return fmt.Errorf("empty reporter")
	}
	windows := map[uint64]bool{}
	for _, c := range req.GetColumns() {
		w := c.GetWindowStartMs()
		if c.GetStepMs() != cfg.GetStepMs() || w%cfg.GetStepMs() != 0 || windows[w] {
			return fmt.Errorf("column %d: step, alignment or duplicate", w)
		}
		windows[w] = true
		if new(big.Int).SetUint64(w).Cmp(big.NewInt(validNowMs+testStep)) > 0 {
			return fmt.Errorf("column %d too far ahead", w)
		}
		routes := map[uint64]bool{}
		for _, r := range c.GetRows() {
			if routes[r.GetRouteId()] || r.GetSampleRate() == 0 || len(r.GetBuckets()) > 256 || len(r.GetTopKeys()) > 256 {
				return fmt.Errorf("row %d: duplicate, sample rate, buckets or top-K count", r.GetRouteId())
			}
			routes[r.GetRouteId()] = true
			if route, ok := cat.Route(r.GetRouteId()); ok && len(r.GetBuckets()) != catalog.NewLayout(route.Start, route.End, 16).K() {
				return fmt.Errorf("row %d: %d buckets", r.GetRouteId(), len(r.GetBuckets()))
			}
			sum := new(big.Int)
			for _, v := range r.GetBuckets() {
				sum.Add(sum, new(big.Int).SetUint64(v))
			}
			if !sum.IsUint64() {
				return fmt.Errorf("row %d: bucket sum", r.GetRouteId())
			}
			for _, ws := range [][2]uint32{{4, 1}, {c.GetWriteWeight(), c.GetReadWeight()}} {
				x := new(big.Int).Mul(new(big.Int).SetUint64(r.GetWrites()), big.NewInt(int64(ws[0])))
				x.Add(x, new(big.Int).Mul(new(big.Int).SetUint64(r.GetReads()), big.NewInt(int64(ws[1]))))
				if !x.IsUint64() {
					return fmt.Errorf("row %d: weighted sum", r.GetRouteId())
				}
			}
			keys := map[string]bool{}
			for _, k := range r.GetTopKeys() {
				scaled := new(big.Int).Mul(new(big.Int).SetUint64(k.GetCount()), big.NewInt(int64(r.GetSampleRate())))
				if len(k.GetKey()) > 4096 || k.GetError() > k.GetCount() || !scaled.IsUint64() || keys[string(k.GetKey())] {
					return fmt.Errorf("row %d key %q: size, error, scaled count or duplicate", r.GetRouteId(), k.GetKey())
				}
				keys[string(k.GetKey())] = true
			}
		}
	}
	return nil
}

// checkEntry restates what the FSM checks of an ObserveColumn, plus the
// aggregator's own bounds.
func checkEntry(e *api.ObserveColumn) error {
	if e.GetAtMs() != e.GetWindowStartMs()+e.GetStepMs() || e.GetStepMs() == 0 {
		return fmt.Errorf("window [%d, %d) step %d", e.GetWindowStartMs(), e.GetAtMs(), e.GetStepMs())
	}
	for i, r := range e.GetReporters() {
		if r == "" || (i > 0 && r <= e.GetReporters()[i-1]) {
			return fmt.Errorf("reporters %q", e.GetReporters())
		}
	}
	for i, r := range e.GetRows() {
		if i > 0 && r.GetRouteId() <= e.GetRows()[i-1].GetRouteId() {
			return fmt.Errorf("rows out of order")
		}
		if len(r.GetBuckets()) > catalog.MaxBuckets || len(r.GetTopKeys()) > mergedTopKeys {
			return fmt.Errorf("row %d: %d buckets, %d keys", r.GetRouteId(), len(r.GetBuckets()), len(r.GetTopKeys()))
		}
		for _, k := range r.GetTopKeys() {
			if len(k.GetKey()) > catalog.MaxKeyLen || k.GetLower() > k.GetUpper() {
				return fmt.Errorf("row %d key %q: [%d, %d]", r.GetRouteId(), k.GetKey(), k.GetLower(), k.GetUpper())
			}
		}
	}
	return nil
}
