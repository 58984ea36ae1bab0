package columns

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/detector"
)

// Defaults of Config.
const (
	DefaultBelowThresholdRows = 64
	DefaultSeenSteps          = 3
)

const (
	// maxOpenColumns bounds the windows a term holds open at once. Windows
	// lie between the last committed column and two steps past the wall
	// clock, and any window whose grace has passed commits at once, so only
	// a backlog resent after an outage comes near it; past it the newer
	// columns of a report wait for the reporter's next resend.
	maxOpenColumns = 8
	// recentCommitted is how many of its own committed columns a term
	// remembers, to acknowledge a resend after a lost answer as committed
	// rather than late.
	recentCommitted = 8
	// maxLoopWait caps every sleep of the commit loop, so a jump of the wall
	// clock is noticed within it.
	maxLoopWait = time.Second
	// retryMin and retryMax bound the backoff between proposals of a column
	// whose proposal failed while the term goes on.
	retryMin = 50 * time.Millisecond
	retryMax = time.Second
	// reportMargin is added to step + grace to bound how long Report waits.
	reportMargin = time.Second
)

// Config configures an Aggregator. Zero values take the defaults.
type Config struct {
	Logger *slog.Logger
	// Metrics receives the hotsplit_columns_* metrics; nil records none.
	Metrics prometheus.Registerer
	// Now reads the leader's wall clock (default time.Now). It decides
	// when a window has closed, when its grace has passed and whether a
	// report is too far in the future; tests inject it.
	Now func() time.Time
	// BelowThresholdRows is how many rows under the threshold a committed
	// column keeps for display (default 64).
	BelowThresholdRows int
	// SeenSteps is how many steps a reporter counts as seen recently after
	// the last window it reported (default 3): a column waits for every
	// reporter seen recently before its grace period ends.
	SeenSteps int
}

// Proposer commits a command through the leader's single proposer and
// returns how it applied (the scheduler adapts its proposer).
type Proposer interface {
	Propose(ctx context.Context, cmd *api.Command) (*api.CommandResult, error)
}

// State is the replicated state as the aggregator reads it: one applied
// index's immutable view (*fsm.State satisfies it). The aggregator only
// reads it; what a column does to it is decided when the column applies.
type State interface {
	Bootstrapped() bool
	ClusterVersion() uint32
	// Config is the replicated config: the step, grace and weights a
	// report is checked against.
	Config() *api.Config
	DetectorConfig() detector.Config
	Catalog() *catalog.Catalog
	// Detector and LiveOps tell which hot routes may become candidates,
	// whose evidence a bounded column carries first (candidacyOf).
	Detector() *detector.State
	LiveOps() []*api.Op
	// LastColumnAtMs and LastColumnReporters are the last committed
	// column: the windows that can no longer commit and whom a new leader
	// waits for.
	LastColumnAtMs() uint64
	LastColumnReporters() []string
}

// Aggregator assembles the cluster-wide load columns on the leader
// (docs/design.md#the-load-pipeline): it takes every reporter's closed columns
// through Report, merges one column per window, and commits it as an
// ObserveColumn entry through the single proposer, in increasing window order.
//
// Exactly once. A reporter's contribution to a window, (reporter, window),
// is merged at most once per term (the open column records its reporters;
// a resend only waits for the outcome), and at most one ObserveColumn per
// window ever applies: the FSM refuses a column that does not start at or
// after the last committed column's end (STALE_COLUMN). A contribution is
// acknowledged as counted only when an entry holding it is known to have
// applied: this term's proposal returned OK for it, or the FSM's last column
// is that window and lists the reporter. Everything else that can no longer
// be counted — a window already committed without it, a column the FSM
// refused — is acknowledged as late (dropped). Nothing else is
// acknowledged: after a failed or unknown proposal the column stays open
// and is settled from the FSM's state if the entry did apply, or proposed
// again; and when the term ends every waiting contribution fails with
// ErrNotLeader: the reporter resends to the next leader, whose state after
// its barrier says what happened.
//
// Concurrency: Report and Take are safe for concurrent use and may be
// called at any time; they answer ErrNotLeader while no term runs. RunTerm
// runs one term; calls must not overlap (the scheduler runs one term at a
// time). The running term and everything of it that reports share — open
// columns, the reporters seen, each column's contributors — are guarded by
// mu, held only for the bookkeeping of a report; methods that need it held
// end in Locked. A contribution is claimed under mu (once per (reporter,
// window)) and then merged outside it, into the column's sum, whose shards
// have their own locks — so reporters merge in parallel and never wait for
// one another's merge under mu. The committer seals a column under mu (no
// claim after that) and waits for the merges claimed before the seal to
// finish before it reads the sum, which is read-only from then on. At most
// GOMAXPROCS reports are validated and merged at once (ingest); the others
// wait their turn in Take, holding only the bytes that arrived.
type Aggregator struct {
	prop      Proposer
	state     func() State
	log       *slog.Logger
	m         *aggregatorMetrics
	now       func() time.Time
	belowRows int
	seenSteps uint64

	refused refusals
	// ingest holds a slot per report that may be validated and merged at
	// once, each with the scratch its rows are read into. More reports at
	// once than CPUs cannot finish sooner: fifty 4 MiB reports at once
	// convoyed on the sum's shard locks and left the CPUs idle while their
	// columns went late.
	ingest chan *rowScratch

	mu struct {
		sync.Mutex
		term *aggTerm // nil while no term runs
	}
}

// NewAggregator returns an aggregator that proposes through p and reads
// the replicated state, as of the last applied entry, from state.
func NewAggregator(cfg Config, p Proposer, state func() State) *Aggregator {
	a := &Aggregator{
		prop:      p,
		state:     state,
		log:       cfg.Logger,
		m:         newAggregatorMetrics(cfg.Metrics),
		now:       cfg.Now,
		belowRows: cfg.BelowThresholdRows,
		seenSteps: uint64(cfg.SeenSteps),
		ingest:    make(chan *rowScratch, runtime.GOMAXPROCS(0)),
	}
	for range cap(a.ingest) {
		a.ingest <- new(rowScratch)
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.belowRows <= 0 {
		a.belowRows = DefaultBelowThresholdRows
	}
	if cfg.SeenSteps <= 0 {
		a.seenSteps = DefaultSeenSteps
	}
	return a
}

func (a *Aggregator) nowMs() uint64 {
	return uint64(max(a.now().UnixMilli(), 0))
}

// Report is the Load.Report handler on the leader for an in-process
// caller: Take of the encoded request, then wait for the answer.
func (a *Aggregator) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, invalidReport(reject(rejectMalformed, "report: %v", err))
	}
	wait, err := a.Take(ctx, b)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// Take takes an encoded ReportRequest as it arrived. It validates the whole
// report first (a rejected report changes nothing and fails with
// ErrInvalidReport, status InvalidArgument, naming the field; bytes that
// protobuf would not decode fail with an error wrapping
// api.ErrMalformedReport, whatever else is wrong with them, so the caller
// can refuse them as it refuses any request that does not decode) and
// merges each column not yet
// counted, straight from the encoding. It returns a function that waits
// until every column of the report is committed or found late, at most
// until its ctx ends or step + grace + 1 s have passed since Take, and then
// answers with the columns acknowledged so far; a report that was waiting
// when the term ended, with nothing acknowledged, fails with ErrNotLeader
// (status Unavailable): the reporter resends.
//
// Neither Take, once it has returned, nor the wait function refers to
// report: the caller may reuse or free its buffer, and release what its
// admission charged for it, as soon as Take returns — acknowledgement
// needs only the windows. The size limit is checked against len(report).
func (a *Aggregator) Take(ctx context.Context, report []byte) (func(context.Context) (*api.ReportResponse, error), error) {
	a.mu.Lock()
	t := a.mu.term
	a.mu.Unlock()
	if t == nil {
		// Checked before validating: a node that does not lead may hold a
		// stale config and must not reject a report by it.
		return nil, notLeaderReport("no leadership term running")
	}
	st := a.state()
	if !st.Bootstrapped() || st.Config().GetStepMs() == 0 {
		return nil, notReadyReport()
	}
	cfg := st.Config()
	r, rerr := readReport(report)
	if rerr == nil {
		r.readHeads()
	}
	late := func() (func(context.Context) (*api.ReportResponse, error), bool) {
		tickets := a.lateOnly(t, r, cfg)
		if tickets == nil {
			return nil, false
		}
		resp := &api.ReportResponse{Config: cfg}
		return func(context.Context) (*api.ReportResponse, error) { return a.answer(resp, r.reporter, tickets) }, true
	}
	if answer, ok := late(); ok {
		return answer, nil
	}
	arr := a.arrive(t, r, cfg)
	defer a.release(arr)
	sc, err := a.takeSlot(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { a.ingest <- sc }()
	if answer, ok := late(); ok { // its windows settled while it waited
		return answer, nil
	}
	cols, rej, err := checkRead(report, r, rerr, st.Catalog(), cfg, a.nowMs(), sc)
	if rej != nil {
		a.m.rejectedReport(rej.reason)
		a.m.dropped(dropInvalid, reportRows(r))
		a.refused.record(a.log, a.nowMs(), rej.reason, r.reporter, rej.msg)
		if err != nil {
			return nil, malformedReport(err)
		}
		return nil, invalidReport(rej)
	}
	resp := &api.ReportResponse{Config: cfg}
	if len(cols) == 0 {
		return func(context.Context) (*api.ReportResponse, error) { return resp, nil }, nil
	}
	tickets, err := a.admit(t, r.reporter, cols, st, arr)
	if err != nil {
		return nil, err
	}
	reporter := r.reporter
	deadline := time.Now().Add(time.Duration(cfg.GetStepMs()+graceMs(cfg, cfg.GetStepMs()))*time.Millisecond + reportMargin)
	return func(ctx context.Context) (*api.ReportResponse, error) {
		awaitTickets(ctx, tickets, time.Until(deadline))
		return a.answer(resp, reporter, tickets)
	}, nil
}

// lateOnly answers a report that can only be late without validating or
// merging it: every one of its columns is for a window already settled, to
// which the reporter is not known to have contributed (so neither a
// counted resend nor a conflict can be at stake), under the replicated
// step. It returns the late tickets, or nil when the report takes the full
// path. A leader that fell behind — after a stall, or under more reports
// than it can merge in a step — then spends nothing on reports that cannot
// count any more, instead of validating each (a third of a merge's work)
// and falling further behind. The report is not checked beyond its
// columns' windows and steps: nothing of it is applied either way, and a
// late window is dropped by the reporter whatever else is wrong with it.
func (a *Aggregator) lateOnly(t *aggTerm, r wireReport, cfg *api.Config) []ticket {
	if r.heads == nil || r.reporter == "" || len(r.heads) == 0 || r.size > api.MaxReportBytes {
		return nil
	}
	for _, c := range r.heads {
		if c.StepMs == 0 || c.StepMs != cfg.StepAt(c.WindowStartMs) {
			return nil
		}
	}
	if _, _, dup := firstDuplicate(len(r.heads), func(i int) uint64 { return r.heads[i].WindowStartMs }); dup {
		return nil // validation refuses a duplicate column
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.term != t {
		return nil
	}
	fresh := a.state()
	mark := max(t.doneAtMs, fresh.LastColumnAtMs())
	for _, c := range r.heads {
		w := c.WindowStartMs
		if w >= mark || t.open[w] != nil || t.countedLocked(fresh, r.reporter, w, c.StepMs) {
			return nil
		}
	}
	tickets := make([]ticket, len(r.heads))
	for i, c := range r.heads {
		t.sawLocked(r.reporter, c.WindowStartMs)
		tickets[i] = ticket{window: c.WindowStartMs, late: true}
	}
	return tickets
}

// arrive counts report r as arriving for each of its windows whose grace
// has not ended yet: a report received in time is not made late by the
// reports queued ahead of it for the leader's CPUs. The windows are the
// report's own, not yet validated, so arrive opens no column; a window's
// count only holds its column back until the report is claimed or leaves
// Take, and a report received after the grace is not counted, so no
// column waits for ever. It returns nil when nothing was counted.
func (a *Aggregator) arrive(t *aggTerm, r wireReport, cfg *api.Config) *arrival {
	nowMs := a.nowMs()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.term != t {
		return nil
	}
	var windows []uint64
	for _, c := range r.heads {
		w := c.WindowStartMs
		step := cfg.StepAt(w)
		if step == 0 || nowMs >= t.graceAt(w, step, cfg) {
			continue
		}
		t.arriving[w]++
		windows = append(windows, w)
	}
	if windows == nil {
		return nil
	}
	return &arrival{t: t, windows: windows}
}

// release uncounts the report if admit has not, and wakes the committer.
func (a *Aggregator) release(arr *arrival) {
	a.mu.Lock()
	released := arr.releaseLocked()
	a.mu.Unlock()
	if released {
		arr.t.poke()
	}
}

// takeSlot takes an ingest slot and its scratch, waiting for one while the
// call lasts. A free slot is taken whatever ctx says, so a report whose
// caller is about to give up still counts when nothing is queued ahead
// of it: only waiting ends with the call.
func (a *Aggregator) takeSlot(ctx context.Context) (*rowScratch, error) {
	select {
	case sc := <-a.ingest:
		return sc, nil
	default:
	}
	select {
	case sc := <-a.ingest:
		return sc, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// checkRead validates an encoded report whose top level was read already
// (r, or the error reading it) with validateReport. A report that
// protobuf would not decode is rejected as malformed, with err wrapping
// api.ErrMalformedReport, whatever else is wrong with it — as if decoding
// came first; validation reads every row, so it finds out.
func checkRead(report []byte, r wireReport, err error, cat *catalog.Catalog, cfg *api.Config, nowMs uint64, sc *rowScratch) (cols []columnInfo, rej *rejection, _ error) {
	if err == nil {
		cols, rej = validateReport(r, cat, cfg, nowMs, sc)
		switch {
		case rej == nil:
			return cols, nil, nil
		case rej.reason == rejectMalformed:
			err = fmt.Errorf("%w: %s", api.ErrMalformedReport, rej.msg)
		default:
			// Validation stopped at its first problem; the bytes may not
			// decode further on.
			_, err = api.CheckReportRequest(report)
		}
	}
	if err != nil {
		return nil, reject(rejectMalformed, "report: %v", err), err
	}
	return nil, rej, nil
}

// admit merges the validated columns of reporter's report into term t,
// oldest window first. A window not yet open needs one of maxOpenColumns
// slots; when none is left, that window and every later one of the report
// are left out — not merged, not acknowledged, and not counted as seen
// (the reporter resends them) — so a long backlog drains oldest first
// instead of being refused as a whole forever. A report of which nothing
// could be taken fails with ErrReportBacklog, having changed nothing. st is
// the state the report was validated against: its catalog decides which
// rows are dead.
//
// A report that contradicts one already taken — the same (reporter, window)
// with other content — is refused as a whole with ErrConflictingReport
// (AlreadyExists), changing nothing; an identical resend only waits for
// its column.
//
// The bookkeeping — conflicts, claims, the reporters seen, releasing the
// report's arrival arr (may be nil) — happens under a.mu; the merges of
// the claimed columns after it is released.
func (a *Aggregator) admit(t *aggTerm, reporter string, cols []columnInfo, st State, arr *arrival) ([]ticket, error) {
	cols = slices.Clone(cols)
	slices.SortFunc(cols, func(x, y columnInfo) int { return cmp.Compare(x.window, y.window) })
	type claimed struct {
		oc  *openColumn
		sum *columnSum // read under mu: settling drops oc.sum
		col columnInfo
	}
	var claims []claimed
	a.mu.Lock()
	if a.mu.term != t {
		a.mu.Unlock()
		return nil, notLeaderReport("leadership term ended")
	}
	// The freshest state: a column that committed since validation makes
	// its window late.
	fresh := a.state()
	mark := max(t.doneAtMs, fresh.LastColumnAtMs())
	for _, c := range cols {
		if err := t.conflictLocked(reporter, c.window, c.digest); err != nil {
			a.mu.Unlock()
			a.m.rejectedReport(rejectConflict)
			a.refused.record(a.log, a.nowMs(), rejectConflict, reporter, err.Error())
			return nil, err
		}
	}
	tickets := make([]ticket, 0, len(cols))
	for _, c := range cols {
		w, step := c.window, c.step
		if w < mark {
			t.sawLocked(reporter, w)
			tickets = append(tickets, ticket{window: w, late: !t.countedLocked(fresh, reporter, w, step)})
			continue
		}
		oc := t.open[w]
		if oc == nil {
			if len(t.open) >= maxOpenColumns {
				break
			}
			oc = &openColumn{window: w, sum: newColumnSum(w, step), done: make(chan struct{})}
			t.open[w] = oc
		}
		t.sawLocked(reporter, w)
		// A resend (the reporter is already in the column) only waits. A
		// contribution that arrives once the column is sealed, or under a
		// step that changed since the column opened, is not merged: it is
		// acknowledged as late when the column settles.
		if _, merged := oc.sum.digestOf(reporter); !merged && !oc.sealed && oc.sum.stepMs == step {
			oc.sum.claim(reporter, c.digest)
			oc.merging.Add(1)
			claims = append(claims, claimed{oc, oc.sum, c})
		}
		tickets = append(tickets, ticket{window: w, col: oc})
	}
	if len(tickets) == 0 {
		open := len(t.open)
		a.mu.Unlock()
		a.m.rejectedReport(rejectBacklog)
		err := backlogReport(open)
		a.refused.record(a.log, a.nowMs(), rejectBacklog, reporter, err.Error())
		return nil, err
	}
	a.m.openColumns(len(t.open))
	// Claimed, its columns wait for its merges (merging): it need not be
	// counted as arriving any more.
	arr.releaseLocked()
	a.mu.Unlock()
	for _, c := range claims {
		a.m.dropped(dropDeadRoute, c.sum.merge(reporter, c.col))
		c.oc.merging.Done()
	}
	t.poke()
	return tickets, nil
}

// awaitTickets waits until every ticket is settled, ctx ends or wait has
// passed.
func awaitTickets(ctx context.Context, tickets []ticket, wait time.Duration) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for _, tk := range tickets {
		if tk.col == nil {
			continue
		}
		select {
		case <-tk.col.done:
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// answer builds the response from the settled tickets. With nothing
// acknowledged and a column failed (the term ended), it returns that
// failure instead.
func (a *Aggregator) answer(resp *api.ReportResponse, reporter string, tickets []ticket) (*api.ReportResponse, error) {
	var failure error
	for _, tk := range tickets {
		late := tk.late
		if tk.col != nil {
			select {
			case <-tk.col.done:
			default:
				continue // still open: not acknowledged
			}
			if err := tk.col.result.err; err != nil {
				failure = err
				continue
			}
			_, counted := slices.BinarySearch(tk.col.result.counted, reporter)
			late = !counted
		}
		resp.AckedWindowStarts = append(resp.AckedWindowStarts, tk.window)
		if late {
			resp.LateWindowStarts = append(resp.LateWindowStarts, tk.window)
			a.m.lateColumn()
		}
	}
	if len(resp.AckedWindowStarts) == 0 && failure != nil {
		return nil, failure
	}
	slices.Sort(resp.AckedWindowStarts)
	slices.Sort(resp.LateWindowStarts)
	return resp, nil
}

// RunTerm runs the column duty for one leadership term: the scheduler
// calls it once the term's fence has applied (so every earlier entry has
// applied too) and cancels ctx when the term ends. It commits due columns
// in increasing window order until ctx ends, then fails every waiting
// report with ErrNotLeader and drops all open state.
func (a *Aggregator) RunTerm(ctx context.Context) {
	t := a.beginTerm()
	defer a.endTerm(t)
	timer := time.NewTimer(maxLoopWait)
	defer timer.Stop()
	for {
		wait := a.commitDue(ctx, t)
		if ctx.Err() != nil {
			return
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.wake:
		case <-timer.C:
		}
	}
}

// beginTerm starts a term. The reporters of the last committed column are
// the ones a new leader waits for (docs/design.md#the-load-pipeline): they count as seen at that
// window.
func (a *Aggregator) beginTerm() *aggTerm {
	st := a.state()
	t := &aggTerm{
		wake:       make(chan struct{}, 1),
		startMs:    a.nowMs(),
		open:       make(map[uint64]*openColumn),
		lastWindow: make(map[string]uint64),
		arriving:   make(map[uint64]int),
		doneAtMs:   st.LastColumnAtMs(),
	}
	if step := st.Config().GetStepMs(); step > 0 && st.LastColumnAtMs() >= step {
		for _, r := range st.LastColumnReporters() {
			t.lastWindow[r] = st.LastColumnAtMs() - step
		}
	}
	a.mu.Lock()
	a.mu.term = t
	a.mu.Unlock()
	a.log.Info("load aggregation started", "last_column_at_ms", st.LastColumnAtMs(), "expected_reporters", len(t.lastWindow))
	return t
}

func (a *Aggregator) endTerm(t *aggTerm) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.mu.term == t {
		a.mu.term = nil
	}
	open := len(t.open)
	for _, oc := range t.open {
		a.settleLocked(t, oc, columnResult{err: notLeaderReport("leadership term ended before the column committed")})
	}
	a.m.openColumns(0)
	a.log.Info("load aggregation stopped", "open_columns_dropped", open)
}

// commitDue commits every column that is due, in window order, and returns
// how long to wait before looking again.
func (a *Aggregator) commitDue(ctx context.Context, t *aggTerm) time.Duration {
	for ctx.Err() == nil {
		oc, wait := a.nextDue(t)
		if oc == nil {
			return wait
		}
		a.commit(ctx, t, oc)
	}
	return 0
}

// nextDue returns the lowest open window, sealed, if it is due, or how
// long to wait. Only the lowest window is ever considered: columns commit
// strictly in increasing window order. A lowest window that can no longer
// commit (a later or equal column applied) is settled on the way.
func (a *Aggregator) nextDue(t *aggTerm) (*openColumn, time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(t.open) > 0 {
		oc := t.headLocked()
		w, step := oc.sum.windowStartMs, oc.sum.stepMs
		st := a.state()
		if w < max(t.doneAtMs, st.LastColumnAtMs()) {
			a.settleLocked(t, oc, columnResult{counted: lastCounted(st, w, step)})
			continue
		}
		if oc.sealed { // a proposal failed: retry after the backoff
			if d := time.Until(oc.retryAt); d > 0 {
				return nil, min(d, maxLoopWait)
			}
			return oc, 0
		}
		wait, due := t.dueLocked(oc, a.nowMs(), st.Config(), a.seenSteps)
		if !due {
			return nil, wait
		}
		oc.sealed = true
		return oc, 0
	}
	return nil, maxLoopWait
}

// commit proposes a sealed column once and settles it by the outcome. It
// first waits for the merges claimed before the seal: they run without
// blocking, so the wait is as long as the slowest report's merge.
func (a *Aggregator) commit(ctx context.Context, t *aggTerm, oc *openColumn) {
	oc.merging.Wait()
	a.mu.Lock()
	sum := oc.sum // nil once the term's end settled it
	a.mu.Unlock()
	if sum == nil {
		return
	}
	st := a.state()
	entry, stats := sum.entry(st.Catalog(), st.DetectorConfig(), a.belowRows, st.ClusterVersion(),
		candidacyOf(st, sum.windowStartMs, sum.windowStartMs+sum.stepMs))
	w, step := entry.WindowStartMs, entry.StepMs
	res, err := a.prop.Propose(ctx, &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: entry}})

	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err != nil || res == nil:
		if ctx.Err() != nil {
			return // the term is over: endTerm fails the waiters
		}
		// Not known to have applied: nobody is acknowledged. The same
		// reporters are proposed again; if the first attempt did apply,
		// the FSM answers STALE_COLUMN and its last column says who was
		// counted.
		oc.attempts++
		oc.retryAt = time.Now().Add(backoff(oc.attempts))
		a.log.Warn("load column proposal failed; retrying", "window_start_ms", w, "attempt", oc.attempts, "reason", proposalFailure(err))
	case res.GetCode() == api.ResultCode_RESULT_CODE_OK:
		t.doneAtMs = max(t.doneAtMs, entry.AtMs)
		t.rememberLocked(w, entry.Reporters, sum)
		t.forgetLocked(w, a.seenSteps*step)
		a.m.dropped(dropDeadRoute, stats.deadRows-sum.deadRows.Load()) // the rest were counted on admission
		a.settleLocked(t, oc, columnResult{counted: entry.Reporters})
		a.m.columnCommitted(len(entry.Reporters), time.Duration(int64(a.nowMs())-int64(entry.AtMs))*time.Millisecond)
		a.m.withoutEvidence(stats.withoutEvidence)
		a.log.Debug("load column committed", "window_start_ms", w, "reporters", len(entry.Reporters),
			"rows", len(entry.Rows), "dropped_rows", entry.DroppedRows, "evidence_bytes", stats.evidenceBytes,
			"hot_rows_without_evidence", stats.withoutEvidence)
	case res.GetCode() == api.ResultCode_RESULT_CODE_STALE_COLUMN:
		a.settleLocked(t, oc, columnResult{counted: lastCounted(a.state(), w, step)})
		a.log.Warn("load column already committed past; its reports are acknowledged as late unless the last column counted them",
			"window_start_ms", w, "reason", res.GetMessage())
	default:
		// The FSM refused the entry: it never applies, and resending the
		// same reports would rebuild it. Skip the window; its reports are
		// acknowledged as dropped.
		t.doneAtMs = max(t.doneAtMs, entry.AtMs)
		a.settleLocked(t, oc, columnResult{})
		a.m.dropped(dropInvalid, stats.inputs)
		a.log.Error("load column refused by the state machine; its reports are dropped",
			"window_start_ms", w, "reason", res.GetCode().String()+": "+res.GetMessage())
	}
}

// settleLocked removes oc from the open columns, drops its sum and wakes
// its waiters.
func (a *Aggregator) settleLocked(t *aggTerm, oc *openColumn, res columnResult) {
	if t.open[oc.window] == oc {
		delete(t.open, oc.window)
	}
	oc.sum = nil
	oc.result = res
	close(oc.done)
	a.m.openColumns(len(t.open))
}

func waitMs(ms uint64) time.Duration {
	return time.Duration(min(ms, uint64(maxLoopWait.Milliseconds()))) * time.Millisecond
}

func backoff(attempt int) time.Duration {
	d := retryMin
	for i := 1; i < attempt && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

func proposalFailure(err error) string {
	if err != nil {
		return err.Error()
	}
	return "proposer returned no result"
}

// reportRows counts the rows of a report's columns that decode.
func reportRows(r wireReport) uint64 {
	var n uint64
	for i := range r.columns {
		if c, err := r.head(i); err == nil {
			n += uint64(c.NumRows)
		}
	}
	return n
}
