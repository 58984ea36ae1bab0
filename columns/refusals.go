package columns

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hotsplit/hotsplit/internal/loglimit"
)

// Refusal sums up the recent refusals of load reports for one reason: how
// many since FirstMs, and the last one (its time, reporter and message).
// Status shows them as warnings; the reason is a rejected-reports metric
// label.
type Refusal struct {
	Reason   string
	Count    uint64
	FirstMs  uint64
	LastMs   uint64
	Reporter string
	Detail   string
}

// refusalLogInterval is the least time between two log lines of one
// refusal reason; refusals in between are counted and summed up in the
// next line.
const refusalLogInterval = 10_000 // ms

// refusalWindowMs is how long a refusal stays recent: a reason with no
// refusal for this long starts counting afresh and drops out of the
// status warnings.
const refusalWindowMs = 10 * 60 * 1000

// refusalLogReasons bounds the reasons the log limiter remembers; the
// reasons are a fixed set, far smaller.
const refusalLogReasons = 64

// refusals remembers recent report refusals by reason and rate-limits
// their log lines: a stream of refused reports (a reporter on the wrong
// step, say) logs one warning per reason per interval, not one per report.
// Safe for concurrent use.
type refusals struct {
	mu  sync.Mutex
	by  map[string]*Refusal
	log *loglimit.Limiter
}

// record notes one refusal at nowMs and logs it unless the reason logged
// less than refusalLogInterval ago.
func (r *refusals) record(log *slog.Logger, nowMs uint64, reason, reporter, detail string) {
	r.mu.Lock()
	if r.by == nil {
		r.by = make(map[string]*Refusal)
		r.log = loglimit.New(refusalLogInterval*time.Millisecond, refusalLogReasons)
	}
	st := r.by[reason]
	if st == nil || nowMs >= st.LastMs+refusalWindowMs {
		st = &Refusal{Reason: reason, FirstMs: nowMs}
		r.by[reason] = st
	}
	st.Count++
	st.LastMs, st.Reporter, st.Detail = nowMs, reporter, detail
	lim := r.log
	r.mu.Unlock()
	if logNow, suppressed := lim.Allow(reason, time.UnixMilli(int64(nowMs))); logNow {
		log.Warn("load report refused", "reason", reason, "reporter", reporter, "detail", detail,
			"suppressed_since_last_log", suppressed)
	}
}

// recent returns the reasons refused within refusalWindowMs before nowMs,
// by reason.
func (r *refusals) recent(nowMs uint64) []Refusal {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Refusal
	for _, st := range r.by {
		if nowMs < st.LastMs+refusalWindowMs {
			out = append(out, *st)
		}
	}
	slices.SortFunc(out, func(a, b Refusal) int { return strings.Compare(a.Reason, b.Reason) })
	return out
}

// RecentRefusals lists the load-report refusals of the last ten minutes on
// this node, by reason (only a leader refuses reports).
func (a *Aggregator) RecentRefusals() []Refusal { return a.refused.recent(a.nowMs()) }
