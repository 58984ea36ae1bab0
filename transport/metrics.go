package transport

import (
	"context"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Metrics are the transport's Prometheus metrics; nil records nothing.
// Labels are the gRPC method name and status code: both fixed sets.
type Metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

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
	reg.MustRegister(m.requests, m.latency)
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

// UnaryInterceptor records every unary call.
func (s *Server) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		s.cfg.Metrics.observe(info.FullMethod, start, err)
		return resp, err
	}
}

// StreamInterceptor records every stream when it ends.
func (s *Server) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		s.cfg.Metrics.observe(info.FullMethod, start, err)
		return err
	}
}
