package detector

import (
	"bytes"
	"fmt"
	"slices"
	"sort"

	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// How long routes have been cold (RuleMerge; docs/design.md "Merges").
//
// A route is warm in a column when it scores at least MergeThresholdBP of
// the threshold, cold otherwise; a route without a row in a complete column
// had no load and is cold. Only complete columns count, and only in a run:
// consecutive complete columns, each starting where the last one ended. A
// gap, an incomplete column or a SetConfig starts a new run in which no
// route has been cold yet.
//
// The state must not cost a counter per live route: merges matter exactly
// when a cluster holds many idle routes, and an idle route is in no column.
// So the state records the exceptions, not the rule. It keeps the run's
// length and the window starts of its last MergeWindows columns, and an
// entry only for a route that was warm within the last MergeWindows
// columns or had load in the current or previous epoch (MergeWindows run
// columns each). A live route without an entry has been cold, without
// load, since the run began or since it was created, whichever is later:
// the recent window starts tell how many of the run's columns began after
// its creation. So an idle route costs nothing, the entries never outnumber
// the routes of the last 2·MergeWindows columns, and a column's work is
// proportional to its rows and the entries, never to the catalog.
//
// Each entry keeps the highest cold score of the current epoch and of the
// previous one: a route's recent peak, over the last MergeWindows to
// 2·MergeWindows columns of its cold streak. The merged estimate of a pair
// adds both peaks (merge.go).

// ColdEntry is one route's exception to "cold without load since the run
// began or it was created".
type ColdEntry struct {
	RouteID uint64
	// WarmColumn is the run column (from 1) in which the route was last
	// warm; 0: not in this run.
	WarmColumn uint64
	// Peak is the highest cold score in epoch PeakEpoch (run column /
	// MergeWindows), PreviousPeak in epoch PeakEpoch-1.
	Peak, PreviousPeak uint64
	PeakEpoch          uint64
}

// Cold is the cold state in its replicated form (api.ColdState).
type Cold struct {
	// RunColumns is the number of complete columns in the current run.
	RunColumns uint64
	// RecentStarts are the window starts of the run's last columns, oldest
	// first, at most MergeWindows of them.
	RecentStarts []uint64
	// ScanCursor is the start key where the next bounded pair scan begins
	// (empty: the first route).
	ScanCursor []byte
	// Entries in route-id order.
	Entries []ColdEntry
}

// coldState is the cold state inside State. Immutable: its slices are
// never modified once built.
type coldState struct {
	run     uint64
	starts  []uint64
	cursor  []byte
	entries []ColdEntry
}

// restart is c with a new, empty run (the scan position is kept).
func (c *coldState) restart() *coldState {
	if c == nil || len(c.cursor) == 0 {
		return nil
	}
	return &coldState{cursor: c.cursor}
}

// Cold returns the cold state (the zero Cold when there is none). The
// slices are shared with the State and must not be modified.
func (s *State) Cold() Cold {
	if s == nil || s.cold == nil {
		return Cold{}
	}
	c := s.cold
	return Cold{RunColumns: c.run, RecentStarts: c.starts, ScanCursor: c.cursor, Entries: c.entries}
}

// WithCold returns s with the cold state c (e.g. from a snapshot), after
// checking it: the recent starts strictly increasing, no more of them than
// MaxMergeWindows nor than the run's columns, entries in strictly
// increasing non-zero route-id order with warm columns and epochs inside
// the run. c is copied. s is not modified.
func (s *State) WithCold(c Cold) (*State, error) {
	bad := func(format string, args ...any) (*State, error) {
		return nil, fmt.Errorf("%w: cold: %s", ErrInvalidState, fmt.Sprintf(format, args...))
	}
	if len(c.RecentStarts) > MaxMergeWindows || uint64(len(c.RecentStarts)) > c.RunColumns {
		return bad("%d recent starts with %d run columns (at most %d)", len(c.RecentStarts), c.RunColumns, MaxMergeWindows)
	}
	for i := 1; i < len(c.RecentStarts); i++ {
		if c.RecentStarts[i] <= c.RecentStarts[i-1] {
			return bad("recent_starts[%d] %d not above %d", i, c.RecentStarts[i], c.RecentStarts[i-1])
		}
	}
	if len(c.ScanCursor) > catalog.MaxBoundaryLen {
		return bad("scan cursor of %d bytes", len(c.ScanCursor))
	}
	for i, e := range c.Entries {
		switch {
		case e.RouteID == 0 || (i > 0 && e.RouteID <= c.Entries[i-1].RouteID):
			return bad("entries[%d]: route_id %d zero, unsorted or repeated", i, e.RouteID)
		case e.WarmColumn > c.RunColumns || e.PeakEpoch > c.RunColumns:
			return bad("entries[%d]: warm column %d or epoch %d beyond the run's %d columns", i, e.WarmColumn, e.PeakEpoch, c.RunColumns)
		}
	}
	out := &State{base: nil, lastColumnAtMs: 0}
	if s != nil {
		out = &State{base: s.base, patch: s.patch, lastColumnAtMs: s.lastColumnAtMs, cloneMu: s.cloneMu}
	}
	if c.RunColumns == 0 && len(c.Entries) == 0 && len(c.ScanCursor) == 0 {
		return out, nil
	}
	out.cold = &coldState{run: c.RunColumns, starts: slices.Clone(c.RecentStarts),
		cursor: bytes.Clone(c.ScanCursor), entries: slices.Clone(c.Entries)}
	return out, nil
}

// isWarm reports whether score is at least MergeThresholdBP of the
// threshold: score·10000 >= threshold·bp, in 128 bits.
func isWarm(cfg Config, score uint64) bool {
	return saturate.Mul64(score, fullShareBP).Cmp(saturate.Mul64(cfg.Threshold, uint64(cfg.MergeThresholdBP))) >= 0
}

// mergeThreshold is the cold threshold in weighted operations per minute
// (display: isWarm decides exactly).
func mergeThreshold(cfg Config) uint64 {
	return saturate.Mul64(cfg.Threshold, uint64(cfg.MergeThresholdBP)).DivSat(fullShareBP)
}

// mergesOn reports whether the merge rule runs at all: the rule is on and
// the settings allow merges.
func mergesOn(in Input) bool {
	return in.Rules.Has(RuleMerge) && in.Config.MaxMergesPerCycle > 0 && in.Config.MergeWindows > 0
}

// observeCold returns the cold state after column col (rows in route-id
// order through order): a new run when there was none, the column follows
// a gap or is incomplete (then nothing counts); else the run grows by the
// column, every entry rolls into the column's epoch, a warm route restarts
// its streak, a cold one raises its peak, and entries that say nothing
// beyond the default go. Routes that are gone lose their entries. (Whether
// a route is ACTIVE is asked when a pair is chosen, not here.)
func (o *observation) observeCold(order []int) *coldState {
	prev := o.prevCold
	if !o.col.Complete {
		return prev.restart()
	}
	// Clamped so that an unvalidated config cannot grow the state: with
	// more windows than that no pair is ever cold long enough anyway.
	w := uint64(min(o.cfg.MergeWindows, MaxMergeWindows))
	next := &coldState{run: 1}
	var old []ColdEntry
	if prev != nil {
		next.cursor = prev.cursor
		if !o.gap && prev.run > 0 {
			next.run = prev.run + 1
			next.starts = prev.starts[len(prev.starts)-min(len(prev.starts), int(w)-1):]
			old = prev.entries
		}
	}
	next.starts = append(slices.Clip(next.starts), o.col.WindowStartMs)
	epoch := next.run / w
	rows := o.col.Rows
	out := make([]ColdEntry, 0, len(old)+len(order))
	visit := func(e ColdEntry, row *Row) {
		route := o.route(e.RouteID)
		if route == nil {
			return // split or merged away, or never existed
		}
		e.roll(epoch)
		if row != nil {
			if score := Score(row.Reads, row.Writes, o.cfg, o.durMs); isWarm(o.cfg, score) {
				e.WarmColumn, e.Peak, e.PreviousPeak = next.run, 0, 0
			} else {
				e.Peak = max(e.Peak, score)
			}
		}
		if (e.WarmColumn > 0 && saturate.Add(e.WarmColumn, w) > next.run) || e.Peak > 0 || e.PreviousPeak > 0 {
			out = append(out, e)
		}
	}
	i, j := 0, 0
	for i < len(old) || j < len(order) {
		switch {
		case j == len(order) || (i < len(old) && old[i].RouteID < rows[order[j]].RouteID):
			visit(old[i], nil)
			i++
		case i == len(old) || rows[order[j]].RouteID < old[i].RouteID:
			visit(ColdEntry{RouteID: rows[order[j]].RouteID, PeakEpoch: epoch}, &rows[order[j]])
			j++
		default:
			visit(old[i], &rows[order[j]])
			i++
			j++
		}
	}
	next.entries = slices.Clip(out)
	return next
}

// roll moves e's peaks into epoch: the current peak becomes the previous
// one when epoch is the next, and both are forgotten when it is later.
func (e *ColdEntry) roll(epoch uint64) {
	switch {
	case e.PeakEpoch >= epoch:
	case e.PeakEpoch+1 == epoch:
		e.PreviousPeak, e.Peak = e.Peak, 0
	default:
		e.PreviousPeak, e.Peak = 0, 0
	}
	e.PeakEpoch = max(e.PeakEpoch, epoch)
}

// entry returns routeID's entry, or the default (no load since the run
// began) when there is none.
func (c *coldState) entry(routeID uint64) ColdEntry {
	i, ok := slices.BinarySearchFunc(c.entries, routeID, func(e ColdEntry, id uint64) int { return cmpID(e.RouteID, id) })
	if !ok {
		return ColdEntry{RouteID: routeID}
	}
	return c.entries[i]
}

// coldColumns is how many of the run's recent columns e's route has been
// cold in a row, counting only columns that started at or after the route
// was created (createdMs): at most len(starts), so at most MergeWindows.
func (c *coldState) coldColumns(e ColdEntry, createdMs uint64) uint64 {
	n := uint64(len(c.starts))
	if e.WarmColumn > 0 {
		n = min(n, c.run-e.WarmColumn)
	}
	born := sort.Search(len(c.starts), func(i int) bool { return c.starts[i] >= createdMs })
	return min(n, uint64(len(c.starts)-born))
}

// recentPeak is e's highest cold score over the current and the previous
// epoch (e is rolled into the state's current epoch by observeCold).
func (e ColdEntry) recentPeak() uint64 { return max(e.Peak, e.PreviousPeak) }

// Warm returns s with the cold streaks of the given routes restarted, as
// if they had been warm in the last column: an aborted merge op sticks,
// its pair needs MergeWindows more cold columns before it is planned
// again. Without a run nothing changes. s is not modified; the cost is
// O(entries), which aborts, being rare, can afford.
func (s *State) Warm(ids ...uint64) *State {
	if s == nil || s.cold == nil || s.cold.run == 0 || len(ids) == 0 {
		return s
	}
	c := *s.cold
	entries := slices.Clone(c.entries)
	for _, id := range ids {
		e := c.entry(id)
		e.WarmColumn, e.Peak, e.PreviousPeak = c.run, 0, 0
		i, found := slices.BinarySearchFunc(entries, id, func(x ColdEntry, id uint64) int { return cmpID(x.RouteID, id) })
		if found {
			entries[i] = e
		} else {
			entries = slices.Insert(entries, i, e)
		}
	}
	c.entries = entries
	out := *s
	out.cold = &c
	return &out
}

func cmpID(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
