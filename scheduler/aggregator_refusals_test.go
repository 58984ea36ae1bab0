package scheduler

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/fsm"
)

// A second report for one (reporter, window) with other content is
// refused as a whole — AlreadyExists naming both, counted — while the
// first stands; an identical resend stays an idempotent success. Before
// and after the window commits.
func TestAggregatorConflictingReportRefused(t *testing.T) {
	h := newAggHarness(t, 300_500)
	h.begin()
	defer h.end()
	first := h.report("a", reportCol(300_000, row(2, 7, 1)))
	h.admitted(300_000, "a")
	refused := func(when string, cols ...*api.ReportColumn) {
		t.Helper()
		_, err := h.a.Report(context.Background(), &api.ReportRequest{ReporterId: "a", Columns: cols})
		st := status.Convert(err)
		if st.Code() != codes.AlreadyExists || !errors.Is(err, ErrConflictingReport) ||
			!strings.Contains(st.Message(), `"a"`) || !strings.Contains(st.Message(), "300000") {
			t.Fatalf("%s: %v %q, want AlreadyExists naming reporter a and window 300000", when, st.Code(), st.Message())
		}
	}
	// Other content, alone or beside a new window: nothing of it is taken.
	refused("open", reportCol(300_000, row(2, 8, 1)))
	refused("open, with a new window", reportCol(300_000, row(2, 8, 1)), reportCol(301_000, row(2, 100, 0)))
	if got := h.metric("hotsplit_columns_rejected_reports_total", "conflict"); got != 2 {
		t.Fatalf("rejected{conflict} = %v", got)
	}
	h.clock.set(301_000)
	h.step()
	wantAck(t, h.result(first), []uint64{300_000}, nil)
	refused("committed", reportCol(300_000, row(2, 8, 1)))
	// The identical resend is acknowledged as counted, and counts once.
	wantAck(t, h.result(h.report("a", reportCol(300_000, row(2, 7, 1)))), []uint64{300_000}, nil)
	if r, w := totals(h.prop.columns()); r != 7 || w != 1 || len(h.prop.columns()) != 1 {
		t.Fatalf("committed reads %d writes %d in %d columns, want the first report alone", r, w, len(h.prop.columns()))
	}
	if refs := h.a.RecentRefusals(); len(refs) != 1 || refs[0].Reason != "conflict" || refs[0].Count != 3 || refs[0].Reporter != "a" {
		t.Fatalf("recent refusals %+v", refs)
	}
}

// A scheduled step change: windows before the boundary keep the old step,
// the window at it takes the new one; a reporter still on the old step at
// the boundary is refused (the reason it must hear of the change ahead).
func TestAggregatorStepChangeWindows(t *testing.T) {
	h := newAggHarness(t, 400_000)
	res := h.prop.apply(&api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Actor: "t",
		Patch: &api.ConfigPatch{StepMs: proto.Uint64(2 * testStep)}}}})
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		t.Fatalf("set config: %v", res)
	}
	cfg := h.f.State().Config()
	at := cfg.GetNextStepAtMs()
	if at == 0 || cfg.GetStepMs() != testStep {
		t.Fatalf("config %v", cfg)
	}
	old := func(w uint64) *api.ReportColumn { return reportCol(w, row(2, 1, 0)) }
	nu := func(w uint64) *api.ReportColumn {
		c := reportCol(w, row(2, 1, 0))
		c.StepMs = 2 * testStep
		return c
	}
	cat := h.f.State().Catalog()
	for _, tc := range []struct {
		name string
		col  *api.ReportColumn
		ok   bool
	}{
		{"old step before the boundary", old(at - testStep), true},
		{"new step before the boundary", nu(at - 2*testStep), false},
		{"new step at the boundary", nu(at), true},
		{"old step at the boundary", old(at), false},
	} {
		r := validateReport(&api.ReportRequest{ReporterId: "a", Columns: []*api.ReportColumn{tc.col}}, cat, cfg, at)
		if (r == nil) != tc.ok || (r != nil && r.reason != rejectStep) {
			t.Errorf("%s: rejection %+v", tc.name, r)
		}
	}
	// Through the aggregator: the last old window, then the first new one.
	h.clock.set(at - testStep/2)
	h.begin()
	defer h.end()
	first := h.report("a", old(at-testStep))
	h.admitted(at-testStep, "a")
	h.clock.set(at + testStep/2)
	h.step()
	wantAck(t, h.result(first), []uint64{at - testStep}, nil)
	next := h.report("a", nu(at))
	h.admitted(at, "a")
	h.clock.set(at + 2*testStep)
	h.step()
	if r := h.result(next); r.err != nil || !slices.Equal(r.resp.GetAckedWindowStarts(), []uint64{at}) || len(r.resp.GetLateWindowStarts()) != 0 {
		t.Fatalf("first window of the new step: %+v %v", r.resp, r.err)
	}
	if c := h.f.State().Config(); c.GetStepMs() != 2*testStep || c.GetNextStepAtMs() != 0 {
		t.Fatalf("config after the boundary %v", c)
	}
}

// logCounter counts log records by message.
type logCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (l *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (l *logCounter) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n[r.Message]++
	return nil
}
func (l *logCounter) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logCounter) WithGroup(string) slog.Handler      { return l }
func (l *logCounter) count(msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n[msg]
}

// Refused reports are logged at most once per reason per 10 s, counted
// all the same, and listed with their reason for Status.
func TestRefusalsLoggedRateLimited(t *testing.T) {
	h := newAggHarness(t, validNowMs)
	logs := &logCounter{n: map[string]int{}}
	h.reg = prometheus.NewRegistry()
	h.a = NewAggregator(AggregatorConfig{Logger: slog.New(logs), Metrics: h.reg, Now: h.clock.Now}, h.prop, h.f)
	h.begin()
	defer h.end()
	wrongStep := func() *api.ReportRequest {
		r := validReport()
		r.Columns[0].StepMs = 2 * testStep
		return r
	}
	for range 50 {
		if _, err := h.a.Report(context.Background(), wrongStep()); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("wrong step accepted: %v", err)
		}
	}
	if got := logs.count("load report refused"); got != 1 {
		t.Fatalf("%d log lines for 50 refusals within 10 s, want 1", got)
	}
	h.clock.set(validNowMs + refusalLogInterval)
	h.a.Report(context.Background(), wrongStep())
	if got := logs.count("load report refused"); got != 2 {
		t.Fatalf("%d log lines after the interval, want 2", got)
	}
	refs := h.a.RecentRefusals()
	if len(refs) != 1 || refs[0].Reason != rejectStep || refs[0].Count != 51 || !strings.Contains(refs[0].Detail, "step_ms") {
		t.Fatalf("recent refusals %+v", refs)
	}
	if got := h.metric("hotsplit_columns_rejected_reports_total", rejectStep); got != 51 {
		t.Fatalf("rejected{step} = %v", got)
	}
	h.clock.set(validNowMs + refusalLogInterval + refusalWindowMs)
	if refs := h.a.RecentRefusals(); len(refs) != 0 {
		t.Fatalf("refusals older than the window still listed: %+v", refs)
	}
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
		entries = append(entries, MergeColumn(order, cat, detector.DefaultConfig(), fsm.Version2))
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
	v1 := findRow(t, MergeColumn([]Contribution{{"a", a}, {"b", b}}, cat, detector.DefaultConfig(), fsm.Version1), 2)
	if len(v1.GetSamples()) != 0 || v1.GetSampleRate() != 0 || v1.GetTopKeys()[0].GetVariance() != 0 || v1.GetTopKeys()[0].GetSampledWrites() != 0 {
		t.Fatalf("version 1 entry carries version 2 evidence: %v", v1)
	}
}

// Thinning keeps at most the limit, keeps the cumulative weight at every
// kept key within W/limit of the original's, and is deterministic.
func TestThinSamples(t *testing.T) {
	var in []*api.WeightedKey
	var total uint64
	for i := range 1000 {
		w := uint64(1 + i%7)
		in = append(in, &api.WeightedKey{Key: []byte(fmt.Sprintf("k%04d", i)), Weight: w})
		total += w
	}
	out := thinSamples(in, mergedSamples)
	if len(out) > mergedSamples || len(out) < mergedSamples/2 {
		t.Fatalf("%d samples kept", len(out))
	}
	cumIn := map[string]uint64{}
	var c uint64
	for _, s := range in {
		c += s.Weight
		cumIn[string(s.Key)] = c
	}
	var cumOut uint64
	for _, s := range out {
		cumOut += s.Weight
		d := int64(cumOut) - int64(cumIn[string(s.Key)])
		if d < 0 {
			d = -d
		}
		if uint64(d) > total/mergedSamples+1 {
			t.Fatalf("at %s the thinned cumulative weight is %d, the original %d (tolerance %d)", s.Key, cumOut, cumIn[string(s.Key)], total/mergedSamples)
		}
	}
	again := thinSamples(in, mergedSamples)
	for i := range out {
		if !proto.Equal(out[i], again[i]) {
			t.Fatal("thinning is not deterministic")
		}
	}
}
