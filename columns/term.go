package columns

// The bookkeeping of one leadership term: its open columns, the reporters
// it waits for and the columns it committed, guarded by Aggregator.mu.

import (
	"slices"
	"sync"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// aggTerm is the state of one leadership term; it dies with the term.
type aggTerm struct {
	wake    chan struct{} // capacity 1: something changed, re-check the head column
	startMs uint64        // wall clock at the start of the term

	// Guarded by Aggregator.mu.
	open map[uint64]*openColumn // by window start
	// lastWindow is the highest window each reporter reported, seeded with
	// the FSM's last column reporters: whom a column waits for.
	lastWindow map[string]uint64
	// doneAtMs is the end of the last window this term settled by commit
	// or refusal: a window starting before it can no longer be committed.
	doneAtMs uint64
	// arriving counts, by window, the reports received before that
	// window's grace ended that are still waiting for an ingest slot or
	// being validated (not yet claimed): the column waits for them (see
	// due).
	arriving map[uint64]int
	recent   []committedColumn // this term's last commits, oldest first
}

type committedColumn struct {
	windowStartMs uint64
	reporters     []string // sorted
	digests       []uint64 // of reporters[i]'s contribution
}

// openColumn is one window being assembled. done is closed once the column
// is settled; result is written before that and read only after it.
type openColumn struct {
	window uint64
	// sum is dropped (nil) once the column is settled, so the reports
	// still waiting for their answer do not keep it alive.
	sum      *columnSum
	sealed   bool           // handed to the committer: no more claims
	merging  sync.WaitGroup // merges claimed and not finished
	attempts int
	retryAt  time.Time
	done     chan struct{}
	result   columnResult
}

// columnResult is how a column was settled. With err set it failed and
// nobody is acknowledged; otherwise every reporter of the column's
// tickets is acknowledged, as counted when listed in counted (sorted),
// as late otherwise.
type columnResult struct {
	counted []string
	err     error
}

// ticket is one column of one report: settled at admission (col nil), or
// waiting for col.
type ticket struct {
	window uint64
	col    *openColumn
	late   bool // settled at admission: acknowledged as late
}

// arrival is a report counted as arriving for its windows until it is
// released: when admit claims its columns, or when it leaves Take.
type arrival struct {
	t       *aggTerm
	windows []uint64 // nil once released
}

// releaseLocked uncounts the report once, and says whether it did. Must
// hold Aggregator.mu.
func (arr *arrival) releaseLocked() bool {
	if arr == nil || arr.windows == nil {
		return false
	}
	for _, w := range arr.windows {
		if arr.t.arriving[w]--; arr.t.arriving[w] <= 0 {
			delete(arr.t.arriving, w)
		}
	}
	arr.windows = nil
	return true
}

// headLocked is the open column with the lowest window. There are at most
// maxOpenColumns.
func (t *aggTerm) headLocked() *openColumn {
	var h *openColumn
	for w, oc := range t.open {
		if h == nil || w < h.window {
			h = oc
		}
	}
	return h
}

// dueLocked reports whether the open, unsealed column oc may commit now, or how
// long to wait. A column commits once its window has closed by the
// leader's clock, either every reporter seen recently has reported it (or
// a later window) or its grace period has passed, and no report received
// before the grace ended is still waiting to be validated and claimed
// (arriving): the grace is how long reporters get to send, not how long
// the leader gets to validate. Grace counts from the window's end but never from before
// the term started, so that after a leader change the reporters get one
// grace period to resend.
func (t *aggTerm) dueLocked(oc *openColumn, nowMs uint64, cfg *api.Config, seenSteps uint64) (time.Duration, bool) {
	w, step := oc.sum.windowStartMs, oc.sum.stepMs
	closeAt := w + step
	if nowMs < closeAt {
		return waitMs(closeAt - nowMs), false
	}
	graceAt := t.graceAt(w, step, cfg)
	switch {
	case nowMs < graceAt && !t.completeLocked(w, seenSteps*step):
		return waitMs(graceAt - nowMs), false
	case t.arriving[w] > 0: // a poke follows each release
		return maxLoopWait, false
	}
	return 0, true
}

// graceAt is when window w's grace period ends.
func (t *aggTerm) graceAt(w, step uint64, cfg *api.Config) uint64 {
	return saturate.Add(max(saturate.Add(w, step), t.startMs), graceMs(cfg, step))
}

// completeLocked reports whether no reporter seen within horizon before window w
// still owes it: every reporter whose last window lies in [w-horizon, w)
// blocks it. A reporter that reported w or a later window has sent
// everything it will send for w (reporters send all their unacknowledged
// columns at once).
func (t *aggTerm) completeLocked(w, horizon uint64) bool {
	for _, last := range t.lastWindow {
		if last < w && w-last <= horizon {
			return false
		}
	}
	return true
}

func (t *aggTerm) sawLocked(reporter string, w uint64) {
	if last, ok := t.lastWindow[reporter]; !ok || w > last {
		t.lastWindow[reporter] = w
	}
}

// forgetLocked drops the reporters no window after w can wait for.
func (t *aggTerm) forgetLocked(w, horizon uint64) {
	for r, last := range t.lastWindow {
		if last < w && w-last > horizon {
			delete(t.lastWindow, r)
		}
	}
}

func (t *aggTerm) rememberLocked(w uint64, reporters []string, sum *columnSum) {
	if len(t.recent) == recentCommitted {
		t.recent = slices.Delete(t.recent, 0, 1)
	}
	digests := make([]uint64, len(reporters))
	for i, r := range reporters {
		digests[i], _ = sum.digestOf(r)
	}
	t.recent = append(t.recent, committedColumn{windowStartMs: w, reporters: reporters, digests: digests})
}

// conflictLocked returns ErrConflictingReport if reporter's contribution to
// window w is already known — merged into an open column, or committed by
// this term — with a digest other than d. Must hold Aggregator.mu.
func (t *aggTerm) conflictLocked(reporter string, w, d uint64) error {
	if oc := t.open[w]; oc != nil {
		if got, ok := oc.sum.digestOf(reporter); ok && got != d {
			return conflictingReport(reporter, w)
		}
		return nil
	}
	for _, c := range t.recent {
		if c.windowStartMs != w {
			continue
		}
		if i, ok := slices.BinarySearch(c.reporters, reporter); ok && c.digests[i] != d {
			return conflictingReport(reporter, w)
		}
	}
	return nil
}

// countedLocked reports whether reporter's contribution to window w is known to
// be in an applied column: one this term committed, or the FSM's last.
func (t *aggTerm) countedLocked(st State, reporter string, w, step uint64) bool {
	for _, c := range t.recent {
		if c.windowStartMs == w {
			_, ok := slices.BinarySearch(c.reporters, reporter)
			return ok
		}
	}
	_, ok := slices.BinarySearch(lastCounted(st, w, step), reporter)
	return ok
}

func (t *aggTerm) poke() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// lastCounted returns the reporters of the FSM's last column if that
// column is window [w, w+step), else nil: whose contribution to w is known
// applied.
func lastCounted(st State, w, step uint64) []string {
	if st.LastColumnAtMs() == w+step {
		return st.LastColumnReporters()
	}
	return nil
}

// graceMs is the replicated grace period, half a step when unset.
func graceMs(cfg *api.Config, step uint64) uint64 {
	if g := cfg.GetGraceMs(); g > 0 {
		return g
	}
	return step / 2
}
