package keyviz

import (
	"github.com/prometheus/client_golang/prometheus"
)

// register exposes the reporter's and its sampler's counters. Every metric
// reads the counters the reporter keeps anyway (see Stats), so there is one
// source of truth and nothing to update twice.
func (r *Reporter) register(reg prometheus.Registerer) error {
	counter := func(name, help string, labels prometheus.Labels, f func() uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "hotsplit", Subsystem: "keyviz", Name: name, Help: help, ConstLabels: labels,
		}, func() float64 { return float64(f()) })
	}
	reason := func(v string) prometheus.Labels { return prometheus.Labels{"reason": v} }
	cs := []prometheus.Collector{
		counter("columns_closed_total", "Columns closed at a step boundary.", nil, r.closed.Load),
		counter("columns_sent_total", "Column transmissions in Report requests, resends included.", nil, r.sent.Load),
		counter("columns_acked_total", "Columns acknowledged by the cluster, late ones included.", nil, r.acked.Load),
		counter("columns_late_total", "Columns acknowledged as late (the cluster had committed that window).", nil, r.late.Load),
		counter("columns_dropped_total", "Columns dropped unacknowledged: pending full, or refused for good.", reason("pending_full"), r.dropped.Load),
		counter("columns_dropped_total", "Columns dropped unacknowledged: pending full, or refused for good.", reason("rejected"), r.rejected.Load),
		counter("report_failures_total", "Report calls that failed and were retried.", nil, r.failures.Load),
		counter("evidence_capped_rows_total", "Rows reported without top keys and samples because the column's evidence reached its bound (api.MaxReportEvidenceBytes); the heaviest rows keep theirs. Routine on a busy node.", nil, r.evidenceCapped.Load),
		counter("rows_trimmed_total", "Row evidence shed to keep a report within its size limit.", prometheus.Labels{"part": "top_keys"}, r.topKeysTrimmed.Load),
		counter("rows_trimmed_total", "Row evidence shed to keep a report within its size limit.", prometheus.Labels{"part": "row"}, r.rowsTrimmed.Load),
		counter("watch_failures_total", "Catalog watches that ended with an error.", nil, r.watchFailures.Load),
		counter("config_rejected_total", "Load configs from the cluster that were out of range.", nil, r.configRejected.Load),
		counter("observations_dropped_total", dropHelp, reason("unknown_route"), r.s.unknownRoute.Load),
		counter("observations_dropped_total", dropHelp, reason("key_too_long"), r.s.keyTooLong.Load),
		counter("routes_striped_total", "Route columns whose counters were striped because several cores contended for them.", nil, r.s.stripedRoutes.Load),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hotsplit", Subsystem: "keyviz", Name: "pending_columns",
			Help: "Closed columns awaiting acknowledgement.",
		}, func() float64 { return float64(r.Stats().Pending) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "hotsplit", Subsystem: "keyviz", Name: "catalog_version",
			Help: "Catalog version of the sampler's route table.",
		}, func() float64 { v, _ := r.s.RoutesVersion(); return float64(v) }),
	}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	return nil
}

const dropHelp = "Observations dropped: route id not in the route table (unknown_route), " +
	"or sampled but not fed to the top-K sketch because the key is too long (key_too_long; still counted)."
