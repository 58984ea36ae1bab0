package webauth

import "github.com/prometheus/client_golang/prometheus"

// metrics of the HTTP port's door. Labels are fixed sets: an endpoint
// class, a status, a login result; never a path, a name or a code.
type metrics struct {
	refused *prometheus.CounterVec
	logins  *prometheus.CounterVec
}

// Endpoint classes of hotsplit_http_refused_total.
const (
	EndpointPage    = "page"    // GET /{$} and /assets/*
	EndpointAPI     = "api"     // /api/v1/*
	EndpointLogin   = "login"   // GET /login
	EndpointMetrics = "metrics" // /metrics
	EndpointPprof   = "pprof"   // /debug/pprof/*
)

func newMetrics(reg prometheus.Registerer, sessions func() float64) *metrics {
	m := &metrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_http_refused_total",
			Help: "HTTP requests refused for want of credentials (status 401) or of the role (403), by endpoint class (page, api, login, metrics, pprof)."},
			[]string{"endpoint", "status"}),
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_ui_logins_total",
			Help: "Browser logins to the key visualizer: codes minted, sessions opened, codes refused (unknown, used or expired)."},
			[]string{"result"}),
	}
	for _, e := range []string{EndpointPage, EndpointAPI, EndpointLogin, EndpointMetrics, EndpointPprof} {
		for _, st := range []string{"401", "403"} {
			m.refused.WithLabelValues(e, st)
		}
	}
	for _, r := range []string{"minted", "opened", "refused"} {
		m.logins.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.refused, m.logins, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotsplit_ui_sessions",
			Help: "Browser sessions of the key visualizer open on this node (expired ones until they are next looked at)."}, sessions))
	}
	return m
}
