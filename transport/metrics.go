package transport

import (
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics are the transport's Prometheus metrics; nil records nothing.
// Labels are the gRPC method name and status code: both fixed sets.
type Metrics struct {
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	refused      *prometheus.CounterVec
	connsRefused *prometheus.CounterVec
	connsOpen    *prometheus.GaugeVec
}

// Listener names, the label values of the connection metrics.
var listenerNames = []string{"grpc", "http", "raft"}

// Reasons a call is refused before its handler runs (the label values of
// hotsplit_grpc_refused_total; docs/security.md lists them).
const (
	refusedBadRequest      = "bad_request"
	refusedUnauthenticated = "unauthenticated"
	refusedPermission      = "permission_denied"
	refusedRateLimited     = "rate_limited"
	refusedReportBudget    = "report_budget"
)

var refusedReasons = []string{refusedBadRequest, refusedUnauthenticated, refusedPermission, refusedRateLimited, refusedReportBudget}

// NewMetrics registers the transport metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hotsplit_grpc_requests_total",
			Help: "gRPC requests served by this node, by method and status code.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hotsplit_grpc_request_seconds",
			Help:    "gRPC request latency on this node, by method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"method"}),
	}
	m.refused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hotsplit_grpc_refused_total",
		Help: "gRPC calls refused before their handler ran, by reason: bad_request (did not decode), unauthenticated, permission_denied, rate_limited, report_budget.",
	}, []string{"reason"})
	for _, r := range refusedReasons {
		m.refused.WithLabelValues(r)
	}
	m.connsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hotsplit_connections_refused_total",
		Help: "Connections closed at accept because their listener was at its cap, by listener (grpc, http, raft).",
	}, []string{"listener"})
	m.connsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "hotsplit_connections_open",
		Help: "Connections open through each listener (grpc, http, raft).",
	}, []string{"listener"})
	for _, l := range listenerNames {
		m.connsRefused.WithLabelValues(l)
		m.connsOpen.WithLabelValues(l)
	}
	// Every method's success series and latency exist from the start, so
	// a rate over them is 0, not absent, before the first call.
	for method := range authzTable {
		m.requests.WithLabelValues(path.Base(method), codes.OK.String())
		m.latency.WithLabelValues(path.Base(method))
	}
	reg.MustRegister(m.requests, m.latency, m.refused, m.connsRefused, m.connsOpen)
	return m
}

func (m *Metrics) observe(fullMethod string, start time.Time, err error) {
	if m == nil {
		return
	}
	method := path.Base(fullMethod)
	m.requests.WithLabelValues(method, status.Code(err).String()).Inc()
	m.latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
}

func (m *Metrics) refuse(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

func (m *Metrics) refuseConn(listener string) {
	if m != nil {
		m.connsRefused.WithLabelValues(listener).Inc()
	}
}

func (m *Metrics) connOpened(listener string, delta float64) {
	if m != nil {
		m.connsOpen.WithLabelValues(listener).Add(delta)
	}
}
