package columns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// waitFor is how long a test waits for a condition before failing.
const waitFor = 5 * time.Second

// stateOf reads f's applied state as the aggregator does on a node.
func stateOf(f *fsm.FSM) func() State { return func() State { return f.State() } }

// fakeClock is the leader's wall clock in the aggregator tests.
type fakeClock struct {
	mu sync.Mutex
	ms int64
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.UnixMilli(c.ms)
}

func (c *fakeClock) set(ms uint64) {
	c.mu.Lock()
	c.ms = int64(ms)
	c.mu.Unlock()
}

// proposeOutcome scripts one ObserveColumn proposal of fsmProposer.
type proposeOutcome int

const (
	proposeApply      proposeOutcome = iota // apply and answer, like a healthy leader
	proposeFailBefore                       // definite failure: nothing applied
	proposeFailAfter                        // applied, but the answer is lost (unknown outcome)
	proposeRefuse                           // the FSM answers INVALID_ARGUMENT (nothing applied)
	proposeHang                             // applied, and the answer never comes before ctx ends
	// proposeRaced: another leader's entry for the same window, holding
	// only the first reporter's rows, applies first; then this one.
	proposeRaced
)

// fsmProposer is the Proposer of the tests: it stamps and encodes a
// command like the real proposer and applies it to a real FSM through
// Apply(&raft.Log{…}), so the real ObserveColumn path runs. ObserveColumn
// proposals follow script (then proposeApply).
type fsmProposer struct {
	t testing.TB
	f *fsm.FSM

	mu      sync.Mutex
	index   uint64
	lastMs  uint64
	script  []proposeOutcome
	calls   int                  // ObserveColumn proposals
	applied []*api.ObserveColumn // ObserveColumn entries applied with OK, in log order
}

func (p *fsmProposer) Propose(ctx context.Context, cmd *api.Command) (*api.CommandResult, error) {
	p.mu.Lock()
	out := proposeApply
	if _, ok := cmd.GetBody().(*api.Command_ObserveColumn); ok {
		p.calls++
		if len(p.script) > 0 {
			out, p.script = p.script[0], p.script[1:]
		}
	}
	switch out {
	case proposeFailBefore:
		p.mu.Unlock()
		return nil, errors.New("scripted: raft enqueue timeout (nothing applied)")
	case proposeRefuse:
		p.mu.Unlock()
		return &api.CommandResult{Code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, Message: "scripted refusal"}, nil
	}
	if out == proposeRaced {
		p.applyLocked(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: onlyFirstReporter(cmd.GetObserveColumn())}})
	}
	res := p.applyLocked(cmd).CommandResult
	p.mu.Unlock()
	switch out {
	case proposeFailAfter:
		return nil, errors.New("scripted: leadership lost after enqueue (outcome unknown)")
	case proposeHang:
		<-ctx.Done()
		return nil, fmt.Errorf("outcome unknown: %w", ctx.Err())
	}
	return res, nil
}

// onlyFirstReporter is c as a leader that heard only c's first reporter
// would have built it (with no rows: the counts do not matter here).
func onlyFirstReporter(c *api.ObserveColumn) *api.ObserveColumn {
	return &api.ObserveColumn{WindowStartMs: c.GetWindowStartMs(), AtMs: c.GetAtMs(), StepMs: c.GetStepMs(), Reporters: c.GetReporters()[:1]}
}

func (p *fsmProposer) apply(cmd *api.Command) *fsm.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.applyLocked(cmd)
}

func (p *fsmProposer) applyLocked(cmd *api.Command) *fsm.Result {
	p.lastMs++
	cmd.Hlc = hlc.Make(p.lastMs, 0)
	b, err := fsm.EncodeCommand(cmd)
	if err != nil {
		p.t.Errorf("encode: %v", err)
		return nil
	}
	p.index++
	res, _ := p.f.Apply(&raft.Log{Index: p.index, Term: 1, Type: raft.LogCommand, Data: b}).(*fsm.Result)
	if oc := cmd.GetObserveColumn(); oc != nil && res.GetCode() == api.ResultCode_RESULT_CODE_OK {
		p.applied = append(p.applied, oc)
	}
	return res
}

func (p *fsmProposer) setScript(s ...proposeOutcome) {
	p.mu.Lock()
	p.script = s
	p.mu.Unlock()
}

// columns returns the ObserveColumn entries applied with OK so far.
func (p *fsmProposer) columns() []*api.ObserveColumn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*api.ObserveColumn(nil), p.applied...)
}

func (p *fsmProposer) proposals() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// aggHarness is one aggregator over a bootstrapped real FSM. Tests drive a
// term by hand (begin, step, end) so that every decision happens at a
// point they choose, or run the real loop with run.
type aggHarness struct {
	t     testing.TB
	f     *fsm.FSM
	clock *fakeClock
	prop  *fsmProposer
	reg   *prometheus.Registry
	a     *Aggregator

	ctx    context.Context
	cancel context.CancelFunc
	term   *aggTerm
}

// testConfig is a 1 s step with a 500 ms grace and the defaults else.
func testConfig() *api.Config {
	c := fsm.DefaultConfig()
	c.StepMs, c.GraceMs = testStep, testStep/2
	return c
}

// newAggHarness bootstraps an FSM with routes 1 = ["", g), 2 = [g, p),
// 3 = [p, +inf) (group 7) and the test config, with the clock at nowMs.
func newAggHarness(t testing.TB, nowMs uint64) *aggHarness {
	t.Helper()
	return newAggHarnessSplits(t, nowMs, [][]byte{[]byte("g"), []byte("p")})
}

// newAggHarnessSplits is newAggHarness with the given initial split keys.
func newAggHarnessSplits(t testing.TB, nowMs uint64, splits [][]byte) *aggHarness {
	t.Helper()
	var halts []error
	f := fsm.New(fsm.Options{Logger: slog.New(slog.DiscardHandler), Halt: func(err error) { halts = append(halts, err) }})
	t.Cleanup(func() {
		if len(halts) > 0 {
			t.Errorf("fsm halted: %v", halts)
		}
	})
	h := &aggHarness{t: t, f: f, clock: &fakeClock{}, prop: &fsmProposer{t: t, f: f}, reg: prometheus.NewRegistry()}
	h.clock.set(nowMs)
	res := h.prop.apply(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "c1", InitialSplits: splits, GroupId: 7, Config: testConfig(), ClusterVersion: clusterversion.Supported}}})
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		t.Fatalf("bootstrap: %v", res)
	}
	h.a = h.newAggregator(h.reg)
	return h
}

// newAggregator is another aggregator over the same FSM and proposer: the
// next leader.
func (h *aggHarness) newAggregator(reg prometheus.Registerer) *Aggregator {
	return NewAggregator(Config{Logger: slog.New(slog.DiscardHandler), Metrics: reg, Now: h.clock.Now}, h.prop, stateOf(h.f))
}

// begin starts a term by hand: nothing commits until step.
func (h *aggHarness) begin() {
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.term = h.a.beginTerm()
}

// step commits whatever is due now, as one pass of the term's loop does.
func (h *aggHarness) step() {
	h.a.commitDue(h.ctx, h.term)
}

// end ends the hand-run term.
func (h *aggHarness) end() {
	h.cancel()
	h.a.endTerm(h.term)
}

// run runs the real term loop until the returned stop is called.
func (h *aggHarness) run(a *Aggregator) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.RunTerm(ctx)
	}()
	testutil.WaitFor(h.t, waitFor, "the term to start", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		return a.mu.term != nil
	})
	return func() {
		cancel()
		<-done
	}
}

// poke wakes a's running term, as a report would.
func poke(a *Aggregator) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.term != nil {
		a.mu.term.poke()
	}
}

type reportResult struct {
	resp *api.ReportResponse
	err  error
}

func (h *aggHarness) reportTo(a *Aggregator, reporter string, cols ...*api.ReportColumn) <-chan reportResult {
	ch := make(chan reportResult, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*waitFor)
		defer cancel()
		resp, err := a.Report(ctx, &api.ReportRequest{ReporterId: reporter, Columns: cols})
		ch <- reportResult{resp, err}
	}()
	return ch
}

func (h *aggHarness) report(reporter string, cols ...*api.ReportColumn) <-chan reportResult {
	return h.reportTo(h.a, reporter, cols...)
}

func (h *aggHarness) result(ch <-chan reportResult) reportResult {
	h.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(waitFor):
		h.t.Fatalf("no answer to the report within %v", waitFor)
	}
	return reportResult{}
}

// admitted waits until reporter's contribution to window w is merged into
// the hand-run term's open column.
func (h *aggHarness) admitted(w uint64, reporters ...string) {
	h.t.Helper()
	testutil.WaitFor(h.t, waitFor, fmt.Sprintf("%v merged into window %d", reporters, w), func() bool {
		h.a.mu.Lock()
		defer h.a.mu.Unlock()
		oc := h.term.open[w]
		if oc == nil {
			return false
		}
		for _, r := range reporters {
			if _, ok := oc.sum.digestOf(r); !ok {
				return false
			}
		}
		return true
	})
}

// metric returns the value of a counter or gauge (with the given label
// value, if any), or a histogram's sample count.
func (h *aggHarness) metric(name, label string) float64 {
	h.t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	h.t.Fatalf("metric %s{%s} not found", name, label)
	return 0
}

// row is a report row of route id with the test layout (16 buckets).
func row(id, reads, writes uint64) *api.ReportRow {
	return &api.ReportRow{RouteId: id, Reads: reads, Writes: writes, ReadBytes: reads * 10, WriteBytes: writes * 10,
		SampleRate: 1, Buckets: buckets16(reads + 4*writes)}
}

// totals sums the group totals of the committed columns.
func totals(cols []*api.ObserveColumn) (reads, writes uint64) {
	for _, c := range cols {
		for _, g := range c.GetGroupTotals() {
			reads += g.GetReads()
			writes += g.GetWrites()
		}
	}
	return reads, writes
}
