package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's Prometheus metrics; a nil *Metrics records
// nothing.
type Metrics struct {
	leader          prometheus.Gauge
	ceilingRenewals *prometheus.CounterVec
}

// NewMetrics registers the scheduler metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hotsplit_leader",
			Help: "1 while this node leads and runs the leader duties.",
		}),
		ceilingRenewals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hotsplit_ceiling_renewals_total",
			Help: "Fence renewals (AdvanceCeiling) by result.",
		}, []string{"result"}),
	}
	for _, r := range []string{"ok", "error"} {
		m.ceilingRenewals.WithLabelValues(r) // every series exists from the start
	}
	reg.MustRegister(m.leader, m.ceilingRenewals)
	return m
}

func (s *Scheduler) metricsLeader(on bool) {
	if m := s.cfg.Metrics; m != nil {
		if on {
			m.leader.Set(1)
		} else {
			m.leader.Set(0)
		}
	}
}

func (s *Scheduler) metricsRenewal(ok bool) {
	if m := s.cfg.Metrics; m != nil {
		result := "ok"
		if !ok {
			result = "error"
		}
		m.ceilingRenewals.WithLabelValues(result).Inc()
	}
}
