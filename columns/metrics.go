package columns

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Dropped-row reasons, the fixed label values of the dropped-rows metric.
const (
	dropDeadRoute = "dead_route" // the route split or vanished before the column committed
	dropInvalid   = "invalid"    // the row came in a rejected report, or its column was refused
)

// aggregatorMetrics are the leader-side column metrics (docs/design.md#observability). The
// apply side (hotsplit_columns_committed_total and
// hotsplit_column_dropped_rows_total, counted on every replica) belongs to
// the fsm package; these count what this node did as leader. Labels take
// fixed values only. A nil *aggregatorMetrics records nothing.
type aggregatorMetrics struct {
	committed   prometheus.Counter
	late        prometheus.Counter
	droppedRows *prometheus.CounterVec // reason
	rejected    *prometheus.CounterVec // reason
	reporters   prometheus.Histogram
	commitLag   prometheus.Histogram
	open        prometheus.Gauge
	noEvidence  prometheus.Counter
}

func newAggregatorMetrics(reg prometheus.Registerer) *aggregatorMetrics {
	if reg == nil {
		return nil
	}
	m := &aggregatorMetrics{
		committed: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_columns_leader_committed_total",
			Help: "Load columns this node committed as leader (ObserveColumn applied with OK)."}),
		late: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_columns_late_total",
			Help: "Reported columns acknowledged as late and dropped: their window was already committed without them."}),
		droppedRows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_columns_leader_dropped_rows_total",
			Help: "Reported rows the leader dropped, by reason (dead_route: the route no longer exists; invalid: rejected report or refused column)."},
			[]string{"reason"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_columns_rejected_reports_total",
			Help: "Load reports rejected as a whole, by reason."}, []string{"reason"}),
		reporters: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hotsplit_columns_reporters",
			Help:    "Reporters that contributed to each committed column.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		commitLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hotsplit_columns_commit_lag_seconds",
			Help:    "Time from a column's window end to its commit, by the leader's wall clock.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		open: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_columns_open",
			Help: "Load columns open on this leader (reported, not yet committed)."}),
		noEvidence: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_columns_rows_without_evidence_total",
			Help: "Hot rows this leader committed with their counts only, their evidence over the column's evidence budget (cluster version 3, bounded_evidence)."}),
	}
	m.droppedRows.WithLabelValues(dropDeadRoute)
	m.droppedRows.WithLabelValues(dropInvalid)
	for _, r := range rejectReasons {
		m.rejected.WithLabelValues(r)
	}
	reg.MustRegister(m.committed, m.late, m.droppedRows, m.rejected, m.reporters, m.commitLag, m.open, m.noEvidence)
	return m
}

func (m *aggregatorMetrics) columnCommitted(reporters int, lag time.Duration) {
	if m == nil {
		return
	}
	m.committed.Inc()
	m.reporters.Observe(float64(reporters))
	m.commitLag.Observe(max(lag, 0).Seconds())
}

func (m *aggregatorMetrics) lateColumn() {
	if m != nil {
		m.late.Inc()
	}
}

func (m *aggregatorMetrics) dropped(reason string, rows uint64) {
	if m != nil && rows > 0 {
		m.droppedRows.WithLabelValues(reason).Add(float64(rows))
	}
}

func (m *aggregatorMetrics) rejectedReport(reason string) {
	if m != nil {
		m.rejected.WithLabelValues(reason).Inc()
	}
}

func (m *aggregatorMetrics) openColumns(n int) {
	if m != nil {
		m.open.Set(float64(n))
	}
}

func (m *aggregatorMetrics) withoutEvidence(rows int) {
	if m != nil && rows > 0 {
		m.noEvidence.Add(float64(rows))
	}
}
