package columns

import (
	"errors"
	"maps"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// propReporter models a reporter: it closes a column every step and
// resends every unacknowledged column in each report, like keyviz does.
type propReporter struct {
	id      string
	next    uint64          // the next window it will close
	unacked map[uint64]bool // closed, not yet acknowledged
	counted map[uint64]bool // acknowledged as counted (not late)
}

// propReads is the load of reporter r in window w: distinct per
// contribution, so the committed totals show what was counted.
func propReads(r string, w uint64) uint64 {
	return uint64(r[0])*1000 + (w/testStep)%997
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestAggregatorExactlyOnceProperty drives one FSM through random
// interleavings of reports, resends of acknowledged columns, clock
// movement, commit passes, lost proposal answers, refused columns and
// leader changes, and checks:
//   - every column acknowledged as counted is in the committed entry of its
//     window, which lists its reporter;
//   - every committed entry holds exactly the load of the reporters it
//     lists, each once (nothing counted twice, nothing unlisted);
//   - committed windows strictly increase;
//   - once reports stop, every column gets acknowledged (counted or late).
func TestAggregatorExactlyOnceProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		const base = 1_000_000
		h := newAggHarness(t, base)
		h.begin()
		defer h.end()
		now := uint64(base)
		var reporters []*propReporter
		for _, id := range []string{"a", "b", "c"} {
			reporters = append(reporters, &propReporter{id: id, next: base, unacked: map[uint64]bool{}, counted: map[uint64]bool{}})
		}
		closeWindows := func() {
			for _, r := range reporters {
				for ; r.next+testStep <= now; r.next += testStep {
					r.unacked[r.next] = true
				}
			}
		}
		// send is Report without its wait: validate, admit, and keep the
		// tickets; collect answers them once settled, as Report would when
		// woken. This keeps the interleaving in the test's hands.
		type pendingReport struct {
			r       *propReporter
			tickets []ticket
		}
		var pending []pendingReport
		send := func(r *propReporter, resend bool) {
			ws := slices.Collect(maps.Keys(r.unacked))
			if resend {
				ws = slices.AppendSeq(ws, maps.Keys(r.counted))
			}
			if len(ws) == 0 {
				return
			}
			req := &api.ReportRequest{ReporterId: r.id}
			for _, w := range ws {
				req.Columns = append(req.Columns, reportCol(w, row(2, propReads(r.id, w), 0)))
			}
			st := h.f.State()
			cols, rej := validateReport(wireOf(t, req), st.Catalog(), st.Config(), now, new(rowScratch))
			if rej != nil {
				rt.Fatalf("valid report rejected: %s", rej.msg)
			}
			tickets, err := h.a.admit(h.term, req.GetReporterId(), cols, st, nil)
			if err != nil {
				if status.Code(err) != codes.Unavailable || !errors.Is(err, ErrReportBacklog) {
					rt.Fatalf("report %v: %v", ws, err)
				}
				return
			}
			pending = append(pending, pendingReport{r, tickets})
		}
		collect := func() {
			keep := pending[:0]
			for _, p := range pending {
				resp, _ := h.a.answer(&api.ReportResponse{}, p.r.id, p.tickets)
				late := map[uint64]bool{}
				for _, w := range resp.GetLateWindowStarts() {
					late[w] = true
				}
				for _, w := range resp.GetAckedWindowStarts() {
					delete(p.r.unacked, w)
					if !late[w] {
						p.r.counted[w] = true
					}
				}
				if slices.ContainsFunc(p.tickets, func(tk ticket) bool { return tk.col != nil && !isClosed(tk.col.done) }) {
					keep = append(keep, p)
				}
			}
			pending = keep
		}

		events := []string{"advance", "report", "report", "resend", "step", "step", "outcome", "leader change"}
		for range rapid.IntRange(40, 160).Draw(rt, "events") {
			switch rapid.SampledFrom(events).Draw(rt, "event") {
			case "advance":
				now += rapid.SampledFrom([]uint64{1, 250, 499, 500, 999, 1000, 1500, 3000}).Draw(rt, "advance_ms")
				h.clock.set(now)
				closeWindows()
			case "report":
				send(rapid.SampledFrom(reporters).Draw(rt, "reporter"), false)
			case "resend":
				send(rapid.SampledFrom(reporters).Draw(rt, "resender"), true)
			case "step":
				h.step()
			case "outcome":
				h.prop.setScript(rapid.SampledFrom([]proposeOutcome{proposeApply, proposeFailAfter, proposeRefuse}).Draw(rt, "outcome"))
			case "leader change":
				h.end()
				h.a = h.newAggregator(nil)
				h.begin()
			}
			collect()
		}

		// Reporters stop closing columns and resend until they have an
		// answer for everything; each round commits at least one window.
		h.prop.setScript()
		unanswered := func() bool {
			return slices.ContainsFunc(reporters, func(r *propReporter) bool { return len(r.unacked) > 0 })
		}
		for round := 0; unanswered() && round < 1000; round++ {
			now += 2 * testStep
			h.clock.set(now)
			for _, r := range reporters {
				send(r, false)
			}
			h.step()
			collect()
		}

		cols := h.prop.columns()
		byWindow := map[uint64]*api.ObserveColumn{}
		for i, c := range cols {
			if i > 0 && c.GetWindowStartMs() <= cols[i-1].GetWindowStartMs() {
				rt.Fatalf("window %d committed after %d", c.GetWindowStartMs(), cols[i-1].GetWindowStartMs())
			}
			byWindow[c.GetWindowStartMs()] = c
			var want uint64
			for _, r := range c.GetReporters() {
				want += propReads(r, c.GetWindowStartMs())
			}
			if got, _ := totals([]*api.ObserveColumn{c}); got != want {
				rt.Fatalf("window %d with reporters %v holds %d reads, want %d", c.GetWindowStartMs(), c.GetReporters(), got, want)
			}
		}
		for _, r := range reporters {
			if len(r.unacked) > 0 {
				rt.Fatalf("reporter %s never got an answer for %v", r.id, slices.Sorted(maps.Keys(r.unacked)))
			}
			for w := range r.counted {
				c := byWindow[w]
				if _, in := slices.BinarySearch(c.GetReporters(), r.id); c == nil || !in {
					rt.Fatalf("reporter %s was told window %d counted, but it is not in %v", r.id, w, c)
				}
			}
		}
	})
}
