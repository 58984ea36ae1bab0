package columns

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

func (h *aggHarness) windows() []uint64 {
	var out []uint64
	for _, c := range h.prop.columns() {
		out = append(out, c.GetWindowStartMs())
	}
	return out
}

// wantAck checks a report's answer: acknowledged exactly acked, of which
// late are late.
func wantAck(t testing.TB, r reportResult, acked, late []uint64) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("report failed: %v", r.err)
	}
	if !slices.Equal(r.resp.GetAckedWindowStarts(), acked) || !slices.Equal(r.resp.GetLateWindowStarts(), late) {
		t.Fatalf("acked %v late %v, want acked %v late %v", r.resp.GetAckedWindowStarts(), r.resp.GetLateWindowStarts(), acked, late)
	}
	if r.resp.GetConfig().GetStepMs() != testStep {
		t.Fatalf("response carries config %v", r.resp.GetConfig())
	}
}

// wantNotLeader checks the definite-for-the-reporter failure of a report
// whose term ended: Unavailable, NOT_APPLIED, ErrNotLeader.
func wantNotLeader(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotLeader) {
		t.Fatalf("err %v, want ErrNotLeader", err)
	}
	st := status.Convert(err)
	if st.Code() != codes.Unavailable || len(st.Details()) != 1 {
		t.Fatalf("status %v details %v, want Unavailable with an outcome", st.Code(), st.Details())
	}
	if o, ok := st.Details()[0].(*api.ErrorOutcome); !ok || o.GetOutcome() != api.Outcome_OUTCOME_NOT_APPLIED {
		t.Fatalf("detail %v, want NOT_APPLIED", st.Details()[0])
	}
}

// commitTwoReporters commits window w from a and b (a: reads 10, b: 5).
func (h *aggHarness) commitTwoReporters(w uint64) {
	h.t.Helper()
	h.clock.set(w + testStep/2)
	ra := h.report("a", reportCol(w, row(2, 10, 0)))
	rb := h.report("b", reportCol(w, row(2, 5, 0)))
	h.admitted(w, "a", "b")
	h.step()
	if n := len(h.prop.columns()); n != 0 {
		h.t.Fatalf("%d columns committed before the window closed", n)
	}
	h.clock.set(w + testStep)
	h.step()
	wantAck(h.t, h.result(ra), []uint64{w}, nil)
	wantAck(h.t, h.result(rb), []uint64{w}, nil)
	cols := h.prop.columns()
	if len(cols) != 1 || !slices.Equal(cols[0].GetReporters(), []string{"a", "b"}) {
		h.t.Fatalf("committed %v", cols)
	}
}

func TestAggregatorWaitsForRecentlySeenReporters(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	defer h.end()
	h.commitTwoReporters(100_000)

	// Window 101000: a reports, b (seen at 100000) still owes it.
	a1 := h.report("a", reportCol(101_000, row(2, 1, 0)))
	h.admitted(101_000, "a")
	h.clock.set(102_000 + 499) // closed, grace (500 ms) not over
	h.step()
	if w := h.windows(); len(w) != 1 {
		t.Fatalf("committed %v without b, before the grace ended", w)
	}
	b1 := h.report("b", reportCol(101_000, row(2, 2, 0)))
	h.admitted(101_000, "b")
	h.step()
	wantAck(t, h.result(a1), []uint64{101_000}, nil)
	wantAck(t, h.result(b1), []uint64{101_000}, nil)
	cols := h.prop.columns()
	if len(cols) != 2 || !slices.Equal(cols[1].GetReporters(), []string{"a", "b"}) {
		t.Fatalf("columns %v", cols)
	}
	if r, _ := totals(cols[1:]); r != 3 {
		t.Fatalf("window 101000 reads %d, want 3", r)
	}
}

func TestAggregatorCommitsOnGraceAndDropsLate(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	defer h.end()
	h.commitTwoReporters(100_000)

	a1 := h.report("a", reportCol(101_000, row(2, 1, 0)))
	h.admitted(101_000, "a")
	h.clock.set(102_000 + 499)
	h.step()
	if len(h.windows()) != 1 {
		t.Fatalf("committed before the grace ended")
	}
	h.clock.set(102_000 + 500)
	h.step()
	wantAck(t, h.result(a1), []uint64{101_000}, nil)
	if cols := h.prop.columns(); len(cols) != 2 || !slices.Equal(cols[1].GetReporters(), []string{"a"}) {
		t.Fatalf("columns %v", cols)
	}

	// b's column comes after its window committed: acknowledged at once
	// as late, and not counted anywhere.
	b1 := h.result(h.report("b", reportCol(101_000, row(2, 50, 0))))
	wantAck(t, b1, []uint64{101_000}, []uint64{101_000})
	if r, _ := totals(h.prop.columns()); r != 15+1 {
		t.Fatalf("reads committed %d, want 16", r)
	}
	if got := h.metric("hotsplit_columns_late_total", ""); got != 1 {
		t.Fatalf("late columns %v, want 1", got)
	}
	if st := h.f.State(); st.LastColumnAtMs() != 102_000 {
		t.Fatalf("last column at %d", st.LastColumnAtMs())
	}
}

func TestAggregatorCommitsInIncreasingWindowOrder(t *testing.T) {
	h := newAggHarness(t, 201_000)
	h.begin()
	defer h.end()
	// c is seen at window 196000 only; its column commits at once.
	c := h.report("c", reportCol(196_000, row(1, 1, 0)))
	h.admitted(196_000, "c")
	h.step()
	wantAck(t, h.result(c), []uint64{196_000}, nil)

	// Window 199000 owes c (seen three steps before it) until its grace
	// ends at term start + 500; window 200000 does not owe c and is
	// complete, but must not commit before 199000.
	a := h.report("a", reportCol(199_000, row(2, 1, 0)), reportCol(200_000, row(2, 2, 0)))
	b := h.report("b", reportCol(200_000, row(2, 3, 0)))
	h.admitted(199_000, "a")
	h.admitted(200_000, "a", "b")
	h.step()
	if w := h.windows(); !slices.Equal(w, []uint64{196_000}) {
		t.Fatalf("committed %v: 200000 overtook 199000", w)
	}
	h.clock.set(201_500)
	h.step()
	// Nobody reported 197000 or 198000: no columns for them.
	if w := h.windows(); !slices.Equal(w, []uint64{196_000, 199_000, 200_000}) {
		t.Fatalf("committed %v", w)
	}
	wantAck(t, h.result(a), []uint64{199_000, 200_000}, nil)
	wantAck(t, h.result(b), []uint64{200_000}, nil)
}

func TestAggregatorNewLeaderWaitsForLastColumnReporters(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	h.commitTwoReporters(100_000)
	h.end()

	// The next leader starts a while after window 101000 closed.
	h.a = h.newAggregator(nil)
	h.clock.set(103_000)
	h.begin()
	defer h.end()
	a1 := h.report("a", reportCol(101_000, row(2, 1, 0)))
	h.admitted(101_000, "a")
	h.step()
	if len(h.windows()) != 1 {
		t.Fatalf("the new leader did not wait for b, a reporter of the last column")
	}
	// The window's own grace is long over, but reporters get one grace
	// period from the term start (103000 + 500) to resend.
	h.clock.set(103_499)
	h.step()
	if len(h.windows()) != 1 {
		t.Fatalf("committed before a grace period from the term start")
	}
	b1 := h.report("b", reportCol(101_000, row(2, 2, 0)))
	h.admitted(101_000, "b")
	h.step()
	wantAck(t, h.result(a1), []uint64{101_000}, nil)
	wantAck(t, h.result(b1), []uint64{101_000}, nil)
}

// TestAggregatorResentColumnCountsOnce resends one column three times —
// while it is open, after it committed, and to the next leader — and
// checks that it is counted once and acknowledged as counted every time.
func TestAggregatorResentColumnCountsOnce(t *testing.T) {
	h := newAggHarness(t, 300_500)
	h.begin()
	col := func() *api.ReportColumn { return reportCol(300_000, row(2, 7, 1)) }
	first := h.report("a", col())
	h.admitted(300_000, "a")
	// A resend while the column is open, whose caller gives up before it
	// commits: merged nowhere, acknowledged nothing.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	resp, err := h.a.Report(ctx, &api.ReportRequest{ReporterId: "a", Columns: []*api.ReportColumn{col()}})
	cancel()
	if err != nil || len(resp.GetAckedWindowStarts()) != 0 {
		t.Fatalf("resend before the commit: %v, %v", resp, err)
	}
	h.clock.set(301_000)
	h.step()
	wantAck(t, h.result(first), []uint64{300_000}, nil)
	// A resend after the commit (its answer was lost): counted already.
	wantAck(t, h.result(h.report("a", col())), []uint64{300_000}, nil)
	h.end()

	// The next leader learns from the FSM that a's column is counted.
	next := h.newAggregator(nil)
	stop := h.run(next)
	defer stop()
	wantAck(t, h.result(h.reportTo(next, "a", col())), []uint64{300_000}, nil)
	if r, w := totals(h.prop.columns()); len(h.prop.columns()) != 1 || r != 7 || w != 1 {
		t.Fatalf("%d columns with reads %d writes %d, want one with 7 and 1", len(h.prop.columns()), r, w)
	}

	// Once a later column committed, the FSM no longer says who was in
	// 300000: a resend is acknowledged as late, and still not counted.
	h.clock.set(302_000)
	later := h.reportTo(next, "a", reportCol(301_000, row(2, 1, 0)))
	wantAck(t, h.result(later), []uint64{301_000}, nil)
	wantAck(t, h.result(h.reportTo(next, "a", col())), []uint64{300_000}, []uint64{300_000})
	if r, _ := totals(h.prop.columns()); r != 8 {
		t.Fatalf("reads %d, want 8", r)
	}
}

func TestAggregatorDayAheadReporterDoesNotBlockOthers(t *testing.T) {
	h := newAggHarness(t, 400_500)
	stop := h.run(h.a)
	defer stop()
	for i := range uint64(3) {
		w := 400_000 + i*testStep
		ahead := h.result(h.report("ahead", reportCol(w+86_400_000, row(2, 1000, 0))))
		if status.Code(ahead.err) != codes.InvalidArgument || !errors.Is(ahead.err, ErrInvalidReport) ||
			!strings.HasPrefix(status.Convert(ahead.err).Message(), "columns[0].window_start_ms:") {
			t.Fatalf("day-ahead report: %v", ahead.err)
		}
		ok := h.report("ok", reportCol(w, row(2, 5, 0)))
		h.clock.set(w + testStep)
		poke(h.a)
		wantAck(t, h.result(ok), []uint64{w}, nil)
	}
	cols := h.prop.columns()
	if len(cols) != 3 {
		t.Fatalf("%d columns, want 3", len(cols))
	}
	for _, c := range cols {
		if !slices.Equal(c.GetReporters(), []string{"ok"}) {
			t.Fatalf("column %d reporters %v", c.GetWindowStartMs(), c.GetReporters())
		}
	}
	if got := h.metric("hotsplit_columns_rejected_reports_total", rejectFuture); got != 3 {
		t.Fatalf("rejected (future) %v, want 3", got)
	}
}

// TestAggregatorRejectsInvalidReportsApplyingNothing runs every validation
// rule through Report and proves that nothing of the rejected report was
// applied: a following valid report commits a column that holds only its
// own contribution, as soon as its window closes (the rejected reporter
// is not waited for).
func TestAggregatorRejectsInvalidReportsApplyingNothing(t *testing.T) {
	for _, tc := range rejectionCases() {
		t.Run(tc.name, func(t *testing.T) {
			h := newAggHarness(t, validNowMs)
			// Route 4 = [p, narrowKey), 3 buckets, as in narrowCatalog.
			res := h.prop.apply(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: 3, SplitKey: []byte(narrowKey), Actor: "test"}}})
			if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
				t.Fatalf("split: %v", res)
			}
			h.begin()
			defer h.end()
			bad := validReport()
			tc.mutate(bad)
			_, err := h.a.Report(context.Background(), bad)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !errors.Is(err, ErrInvalidReport) || !strings.HasPrefix(st.Message(), tc.field) {
				t.Fatalf("got %v %q, want InvalidArgument %q…", st.Code(), st.Message(), tc.field)
			}
			if got := h.metric("hotsplit_columns_rejected_reports_total", tc.reason); got != 1 {
				t.Fatalf("rejected{%s} = %v", tc.reason, got)
			}

			ok := h.report("ok", reportCol(10_000, row(1, 1, 0)))
			h.admitted(10_000, "ok")
			h.step()
			wantAck(t, h.result(ok), []uint64{10_000}, nil)
			cols := h.prop.columns()
			if len(cols) != 1 || cols[0].GetWindowStartMs() != 10_000 || !slices.Equal(cols[0].GetReporters(), []string{"ok"}) {
				t.Fatalf("committed %v", cols)
			}
			if r, w := totals(cols); r != 1 || w != 0 {
				t.Fatalf("totals reads %d writes %d: the rejected report leaked in", r, w)
			}
		})
	}
}

func TestAggregatorTermEndFailsWaitingReports(t *testing.T) {
	h := newAggHarness(t, 500_500)
	h.begin()
	p := h.report("a", reportCol(500_000, row(2, 9, 0)))
	h.admitted(500_000, "a")
	h.end()
	wantNotLeader(t, h.result(p).err)
	if n := len(h.prop.columns()); n != 0 {
		t.Fatalf("%d columns committed", n)
	}
	_, err := h.a.Report(context.Background(), &api.ReportRequest{ReporterId: "a", Columns: []*api.ReportColumn{reportCol(500_000)}})
	wantNotLeader(t, err)

	// The reporter resends to the next leader: counted once.
	h.a = h.newAggregator(nil)
	h.clock.set(501_000)
	h.begin()
	defer h.end()
	p2 := h.report("a", reportCol(500_000, row(2, 9, 0)))
	h.admitted(500_000, "a")
	h.step()
	wantAck(t, h.result(p2), []uint64{500_000}, nil)
	if r, _ := totals(h.prop.columns()); len(h.prop.columns()) != 1 || r != 9 {
		t.Fatalf("columns %v", h.prop.columns())
	}
}

// TestAggregatorUnknownOutcomeCountsOnce: the proposal applies but its
// answer is lost. The aggregator does not take the failure as "not
// applied": the FSM's last column is that window and lists the reporter,
// so it is acknowledged as counted, and nothing is proposed again.
func TestAggregatorUnknownOutcomeCountsOnce(t *testing.T) {
	h := newAggHarness(t, 600_500)
	h.prop.setScript(proposeFailAfter)
	h.begin()
	defer h.end()
	p := h.report("a", reportCol(600_000, row(2, 9, 0)))
	h.admitted(600_000, "a")
	h.clock.set(601_000)
	var r reportResult
	testutil.WaitFor(t, waitFor, "the answer", func() bool {
		h.step()
		select {
		case r = <-p:
			return true
		default:
			return false
		}
	})
	wantAck(t, r, []uint64{600_000}, nil)
	if r, _ := totals(h.prop.columns()); len(h.prop.columns()) != 1 || r != 9 || h.prop.proposals() != 1 {
		t.Fatalf("%d proposals, columns %v", h.prop.proposals(), h.prop.columns())
	}
}

// TestAggregatorStaleColumnAcksPerReporter: another leader's entry for the
// same window, holding only a, applies just before this leader's (which
// holds a and b) and makes it STALE_COLUMN: a is acknowledged as counted,
// b as late, and nothing is counted twice.
func TestAggregatorStaleColumnAcksPerReporter(t *testing.T) {
	h := newAggHarness(t, 650_500)
	h.prop.setScript(proposeRaced)
	h.begin()
	defer h.end()
	pa := h.report("a", reportCol(650_000, row(2, 3, 0)))
	pb := h.report("b", reportCol(650_000, row(2, 4, 0)))
	h.admitted(650_000, "a", "b")
	h.clock.set(651_000)
	h.step()
	wantAck(t, h.result(pa), []uint64{650_000}, nil)
	wantAck(t, h.result(pb), []uint64{650_000}, []uint64{650_000})
	cols := h.prop.columns()
	if len(cols) != 1 || !slices.Equal(cols[0].GetReporters(), []string{"a"}) {
		t.Fatalf("columns %v", cols)
	}
}

// TestAggregatorWindowCommittedElsewhere: while this leader holds window
// 660000 open with a and b, an entry for it holding only a applies (a
// deposed leader's, say). The open column can no longer commit: a is
// acknowledged as counted, b as late, and nothing is proposed.
func TestAggregatorWindowCommittedElsewhere(t *testing.T) {
	h := newAggHarness(t, 660_500)
	h.begin()
	defer h.end()
	pa := h.report("a", reportCol(660_000, row(2, 3, 0)))
	pb := h.report("b", reportCol(660_000, row(2, 4, 0)))
	h.admitted(660_000, "a", "b")
	other := &api.ObserveColumn{WindowStartMs: 660_000, AtMs: 661_000, StepMs: testStep, Reporters: []string{"a"}}
	if res := h.prop.apply(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: other}}); res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		t.Fatalf("other leader's column: %v", res)
	}
	h.clock.set(661_000)
	h.step()
	wantAck(t, h.result(pa), []uint64{660_000}, nil)
	wantAck(t, h.result(pb), []uint64{660_000}, []uint64{660_000})
	if n := h.prop.proposals(); n != 0 {
		t.Fatalf("%d proposals for a window already committed", n)
	}
}

func TestAggregatorDefiniteFailureRetries(t *testing.T) {
	h := newAggHarness(t, 700_500)
	h.prop.setScript(proposeFailBefore, proposeFailBefore)
	h.begin()
	defer h.end()
	p := h.report("a", reportCol(700_000, row(2, 4, 0)))
	h.admitted(700_000, "a")
	h.clock.set(701_000)
	testutil.WaitFor(t, waitFor, "the column to commit", func() bool {
		h.step()
		return len(h.prop.columns()) == 1
	})
	wantAck(t, h.result(p), []uint64{700_000}, nil)
	if n := h.prop.proposals(); n != 3 {
		t.Fatalf("%d proposals, want 3", n)
	}
}

// TestAggregatorProposalInFlightAtTermEnd: the entry applies but the term
// ends before its answer: the reporter gets ErrNotLeader, resends to the
// next leader and is acknowledged as counted, without a second entry.
func TestAggregatorProposalInFlightAtTermEnd(t *testing.T) {
	h := newAggHarness(t, 800_500)
	h.prop.setScript(proposeHang)
	h.begin()
	p := h.report("a", reportCol(800_000, row(2, 6, 0)))
	h.admitted(800_000, "a")
	h.clock.set(801_000)
	stepped := make(chan struct{})
	go func() {
		defer close(stepped)
		h.step()
	}()
	testutil.WaitFor(t, waitFor, "the proposal to apply", func() bool { return len(h.prop.columns()) == 1 })
	h.cancel()
	<-stepped
	h.a.endTerm(h.term)
	wantNotLeader(t, h.result(p).err)

	next := h.newAggregator(nil)
	stop := h.run(next)
	defer stop()
	wantAck(t, h.result(h.reportTo(next, "a", reportCol(800_000, row(2, 6, 0)))), []uint64{800_000}, nil)
	if r, _ := totals(h.prop.columns()); len(h.prop.columns()) != 1 || r != 6 {
		t.Fatalf("columns %v", h.prop.columns())
	}
}

func TestAggregatorRefusedColumnIsDropped(t *testing.T) {
	h := newAggHarness(t, 900_500)
	h.prop.setScript(proposeRefuse)
	h.begin()
	defer h.end()
	p := h.report("a", reportCol(900_000, row(2, 6, 0), row(3, 1, 0)))
	h.admitted(900_000, "a")
	h.clock.set(901_000)
	h.step()
	wantAck(t, h.result(p), []uint64{900_000}, []uint64{900_000})
	// The window is skipped: a resend cannot rebuild it.
	wantAck(t, h.result(h.report("a", reportCol(900_000, row(2, 6, 0), row(3, 1, 0)))), []uint64{900_000}, []uint64{900_000})
	if n := len(h.prop.columns()); n != 0 || h.prop.proposals() != 1 {
		t.Fatalf("%d columns, %d proposals", n, h.prop.proposals())
	}
	if got := h.metric("hotsplit_columns_leader_dropped_rows_total", dropInvalid); got != 2 {
		t.Fatalf("dropped invalid rows %v, want 2", got)
	}
}

// TestAggregatorBacklogDrainsOldestFirst: with maxOpenColumns windows
// open, a report's columns are taken oldest first while they fit; a report
// of which nothing fits fails with ErrReportBacklog and changes nothing.
func TestAggregatorBacklogDrainsOldestFirst(t *testing.T) {
	h := newAggHarness(t, 998_500)
	h.begin()
	defer h.end()
	for i := range uint64(maxOpenColumns) {
		w := 990_000 + i*testStep
		h.report("a", reportCol(w, row(2, 1, 0)))
		h.admitted(w, "a")
	}
	_, err := h.a.Report(context.Background(), &api.ReportRequest{ReporterId: "x", Columns: []*api.ReportColumn{reportCol(998_000, row(2, 1, 0))}})
	if !errors.Is(err, ErrReportBacklog) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v, want ErrReportBacklog (Unavailable)", err)
	}
	seen := func() (uint64, bool) {
		h.a.mu.Lock()
		defer h.a.mu.Unlock()
		w, ok := h.term.lastWindow["x"]
		return w, ok
	}
	if w, ok := seen(); ok {
		t.Fatalf("refused report applied: x seen at %d", w)
	}
	if got := h.metric("hotsplit_columns_rejected_reports_total", rejectBacklog); got != 1 {
		t.Fatalf("rejected{backlog} = %v", got)
	}

	// x's backlog: the open window is taken, the new one waits.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	resp, err := h.a.Report(ctx, &api.ReportRequest{ReporterId: "x", Columns: []*api.ReportColumn{
		reportCol(998_000, row(2, 100, 0)), reportCol(990_000, row(2, 100, 0))}})
	if err != nil || len(resp.GetAckedWindowStarts()) != 0 {
		t.Fatalf("partial admission: %v %v", resp, err)
	}
	h.admitted(990_000, "x")
	if w, _ := seen(); w != 990_000 {
		t.Fatalf("x seen at %d, want 990000 (998000 was not taken)", w)
	}
	// Once the older windows commit, the resend is taken whole.
	h.clock.set(1_000_000)
	h.step()
	p := h.report("x", reportCol(990_000, row(2, 100, 0)), reportCol(998_000, row(2, 100, 0)))
	h.admitted(998_000, "x")
	h.step()
	wantAck(t, h.result(p), []uint64{990_000, 998_000}, nil)
	if r, _ := totals(h.prop.columns()); len(h.prop.columns()) != maxOpenColumns+1 || r != maxOpenColumns+200 {
		t.Fatalf("%d columns, %d reads", len(h.prop.columns()), r)
	}
}

// TestAggregatorReportTimeout: Report answers with what is acknowledged
// when its context ends first.
func TestAggregatorReportTimeout(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	defer h.end()
	h.commitTwoReporters(100_000)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	resp, err := h.a.Report(ctx, &api.ReportRequest{ReporterId: "c", Columns: []*api.ReportColumn{
		reportCol(100_000, row(2, 1, 0)), reportCol(101_000, row(2, 1, 0))}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.GetAckedWindowStarts(), []uint64{100_000}) || !slices.Equal(resp.GetLateWindowStarts(), []uint64{100_000}) {
		t.Fatalf("acked %v late %v", resp.GetAckedWindowStarts(), resp.GetLateWindowStarts())
	}
}

// TestAggregatorIngestWaitsForASlot: with every ingest slot taken, a
// report waits for one; one whose call ends first is answered with the
// call's own status and nothing of it is merged; once a slot frees, the
// next report goes through.
func TestAggregatorIngestWaitsForASlot(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	defer h.end()
	h.clock.set(100_500)
	var held []*rowScratch
	for range cap(h.a.ingest) {
		held = append(held, <-h.a.ingest)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := h.a.Report(ctx, &api.ReportRequest{ReporterId: "a", Columns: []*api.ReportColumn{reportCol(100_000, row(2, 1, 0))}})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err %v, want DeadlineExceeded while every slot is taken", err)
	}
	h.a.mu.Lock()
	oc := h.term.open[100_000]
	h.a.mu.Unlock()
	if oc != nil {
		t.Fatalf("a report that never got a slot opened window %d", oc.window)
	}
	ch := h.report("a", reportCol(100_000, row(2, 1, 0)))
	h.a.ingest <- held[0] // one slot frees
	h.admitted(100_000, "a")
	h.clock.set(101_000)
	h.step()
	if res := h.result(ch); res.err != nil || !slices.Equal(res.resp.GetAckedWindowStarts(), []uint64{100_000}) {
		t.Fatalf("after a slot freed: %v %v", res.resp, res.err)
	}
}

// TestAggregatorCountsAReportReceivedInTime: a report received before
// its window's grace ended still counts when the leader's ingest slots are
// busy past it — the column waits for it — and one that fails validation
// then holds nothing back; a report received after the grace is not
// waited for.
func TestAggregatorCountsAReportReceivedInTime(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	defer h.end()
	h.commitTwoReporters(100_000)
	h.clock.set(102_000 + 100) // window 101000 closed, in its grace
	a := h.report("a", reportCol(101_000, row(2, 1, 0)))
	h.admitted(101_000, "a")
	var held []*rowScratch
	for range cap(h.a.ingest) {
		held = append(held, <-h.a.ingest)
	}
	bad := row(2, 50, 0)
	bad.Buckets = []uint64{1, 2, 3}
	b := h.report("b", reportCol(101_000, row(2, 2, 0)))
	d := h.report("d", reportCol(101_000, bad))
	arriving := func() int {
		h.a.mu.Lock()
		defer h.a.mu.Unlock()
		return h.term.arriving[101_000]
	}
	testutil.WaitFor(t, waitFor, "b and d waiting for a slot", func() bool { return arriving() == 2 })

	h.clock.set(102_000 + 600) // the grace is over
	h.step()
	if w := h.windows(); len(w) != 1 {
		t.Fatalf("committed %v while reports received in time waited for a slot", w)
	}
	encoded, err := proto.Marshal(&api.ReportRequest{ReporterId: "c", Columns: []*api.ReportColumn{reportCol(101_000, row(2, 3, 0))}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := readReport(encoded)
	if err != nil {
		t.Fatal(err)
	}
	r.readHeads()
	if arr := h.a.arrive(h.term, r, testConfig()); arr != nil || arriving() != 2 {
		t.Fatalf("a report received after the grace was counted as arriving: %d in all", arriving())
	}

	for _, sc := range held {
		h.a.ingest <- sc
	}
	if res := h.result(d); status.Code(res.err) != codes.InvalidArgument {
		t.Fatalf("d: %v, want InvalidArgument", res.err)
	}
	testutil.WaitFor(t, waitFor, "b through", func() bool { return arriving() == 0 })
	h.step()
	wantAck(t, h.result(a), []uint64{101_000}, nil)
	wantAck(t, h.result(b), []uint64{101_000}, nil)
	if cols := h.prop.columns(); len(cols) != 2 || !slices.Equal(cols[1].GetReporters(), []string{"a", "b"}) {
		t.Fatalf("columns %v", cols)
	}
}

// TestAggregatorLateReportTakesNoSlot: a report whose every window is
// settled, from a reporter not counted in them, is answered late at once —
// without an ingest slot or validation (here every slot is held and the
// row's bucket count is wrong) — and counts nowhere; a counted reporter's
// resend of a settled window still takes the full path.
func TestAggregatorLateReportTakesNoSlot(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	defer h.end()
	h.commitTwoReporters(100_000)
	var held []*rowScratch
	for range cap(h.a.ingest) {
		held = append(held, <-h.a.ingest)
	}
	bad := row(2, 50, 0)
	bad.Buckets = []uint64{1, 2, 3}
	wantAck(t, h.result(h.report("c", reportCol(100_000, bad))), []uint64{100_000}, []uint64{100_000})
	if got := h.metric("hotsplit_columns_late_total", ""); got != 1 {
		t.Fatalf("late columns %v, want 1", got)
	}
	// a was counted in 100000: its resend needs the digest, so a slot.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := h.a.Report(ctx, &api.ReportRequest{ReporterId: "a", Columns: []*api.ReportColumn{reportCol(100_000, row(2, 10, 0))}}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a counted reporter's resend: %v, want to wait for a slot", err)
	}
	for _, sc := range held {
		h.a.ingest <- sc
	}
	wantAck(t, h.result(h.report("a", reportCol(100_000, row(2, 10, 0)))), []uint64{100_000}, nil)
	if r, _ := totals(h.prop.columns()); r != 15 {
		t.Fatalf("reads committed %d, want 15: nothing late may count", r)
	}
}

func TestAggregatorNotLeaderOrNotBootstrapped(t *testing.T) {
	h := newAggHarness(t, 0)
	_, err := h.a.Report(context.Background(), &api.ReportRequest{ReporterId: "a"})
	wantNotLeader(t, err)

	empty := fsm.New(fsm.Options{})
	a := NewAggregator(Config{Now: h.clock.Now}, h.prop, stateOf(empty))
	stop := h.run(a)
	defer stop()
	_, err = a.Report(context.Background(), &api.ReportRequest{ReporterId: "a"})
	if !errors.Is(err, ErrNotReady) || status.Code(err) != codes.Unavailable {
		t.Fatalf("err %v, want ErrNotReady (Unavailable)", err)
	}
}

// TestAggregatorEntryScoresLikeDetector commits a hot row and a dead one
// and checks the FSM's view of the entry: the detector's score equals the
// aggregator's, and the dead route is dropped and counted.
func TestAggregatorEntryScoresLikeDetector(t *testing.T) {
	h := newAggHarness(t, 0)
	h.begin()
	defer h.end()
	h.clock.set(1_001_000)
	hot := row(2, 123, 4567)
	p := h.report("a", reportCol(1_000_000, hot, row(99, 1, 1)))
	h.admitted(1_000_000, "a")
	h.step()
	wantAck(t, h.result(p), []uint64{1_000_000}, nil)
	want := detector.Score(123, 4567, detector.Config{WriteWeight: 4, ReadWeight: 1}, testStep)
	tracked, ok := h.f.State().Detector().Get(2)
	if !ok || tracked.LastScore != want || want < 50000 {
		t.Fatalf("detector score %+v (tracked %v), aggregator %d", tracked.LastScore, ok, want)
	}
	cols := h.prop.columns()
	if cols[0].GetDroppedRows() != 1 || h.metric("hotsplit_columns_leader_dropped_rows_total", dropDeadRoute) != 1 {
		t.Fatalf("dead row: entry %d", cols[0].GetDroppedRows())
	}
	if len(cols[0].GetRows()[0].GetBuckets()) != 16 {
		t.Fatalf("hot row without its bucket evidence")
	}
}

// TestAggregatorMetricsBesideFSM registers the aggregator's metrics next
// to the FSM's on one registry (no name clash) and checks the commit
// metrics.
func TestAggregatorMetricsBesideFSM(t *testing.T) {
	h := newAggHarness(t, 0)
	fsm.NewMetrics(h.reg)
	h.begin()
	defer h.end()
	h.commitTwoReporters(100_000)
	for name, want := range map[string]float64{
		"hotsplit_columns_leader_committed_total": 1,
		"hotsplit_columns_reporters":              1,
		"hotsplit_columns_commit_lag_seconds":     1,
		"hotsplit_columns_open":                   0,
	} {
		if got := h.metric(name, ""); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
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
		req := &api.ReportRequest{ReporterId: "a", Columns: []*api.ReportColumn{tc.col}}
		_, r := validateReport(wireOf(t, req), cat, cfg, at, new(rowScratch))
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
