package columns

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
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
	h.a = NewAggregator(Config{Logger: slog.New(logs), Metrics: h.reg, Now: h.clock.Now}, h.prop, stateOf(h.f))
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
