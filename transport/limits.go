package transport

import (
	"context"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Limits bound what one node takes in (docs/design.md#trust-and-integrity, docs/security.md). Zero
// fields take the defaults below.
type Limits struct {
	// MaxConcurrentStreams per gRPC connection (default 256).
	MaxConcurrentStreams uint32
	// MaxConnections per listener, gRPC and HTTP (default 4096): a
	// connection over it is closed at once and counted.
	MaxConnections int
	// ReportBudgetBytes bounds the Load.Report bytes this node holds in
	// flight (default 64 MiB). A report that would exceed it is refused
	// with ResourceExhausted before its body is read; its reporter backs
	// off and sends it again.
	ReportBudgetBytes int64
	// MaxMessageBytes is the largest gRPC message (default
	// api.MaxMessageBytes, a full report plus framing): a report that
	// declares no size is charged this much.
	MaxMessageBytes int
	// KeepaliveMinTime is the shortest ping interval a client may use
	// (default 5 s); more frequent pings close the connection.
	KeepaliveMinTime time.Duration
	// IdleTimeout closes a connection with no RPC for this long (default
	// 10 min).
	IdleTimeout time.Duration
	// Rate are the per-identity rate limits: DefaultRateLimits when nil; a
	// zero rate turns its class off.
	Rate *RateLimits
}

// Defaults of Limits.
const (
	DefaultMaxConcurrentStreams = 256
	DefaultMaxConnections       = 4096
	DefaultReportBudgetBytes    = 64 << 20
	DefaultKeepaliveMinTime     = 5 * time.Second
	DefaultIdleTimeout          = 10 * time.Minute
)

// WithDefaults returns l with every zero field at its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if l.MaxConnections == 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.ReportBudgetBytes == 0 {
		l.ReportBudgetBytes = DefaultReportBudgetBytes
	}
	if l.MaxMessageBytes == 0 {
		l.MaxMessageBytes = api.MaxMessageBytes
	}
	if l.KeepaliveMinTime == 0 {
		l.KeepaliveMinTime = DefaultKeepaliveMinTime
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.Rate == nil {
		r := DefaultRateLimits()
		l.Rate = &r
	}
	return l
}

// Flow-control windows of a node's gRPC server (see limitOptions).
const (
	streamWindowBytes = api.MaxMessageBytes
	connWindowBytes   = 4 * api.MaxMessageBytes
)

// minReportCharge is the least a report is charged (decoding costs more
// memory than its wire bytes).
const minReportCharge = 16 << 10

// reportBudget counts the Load.Report bytes in flight.
//
// Concurrency: lock-free; used from gRPC's transport goroutines.
type reportBudget struct {
	limit int64
	used  atomic.Int64
}

func (b *reportBudget) acquire(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *reportBudget) release(n int64) { b.used.Add(-n) }

// reportCharge is what admission charged one report: given back once, when
// the report has been merged (the handler calls release) or when the call
// ends, whichever comes first.
type reportCharge struct {
	b        *reportBudget
	n        int64
	released atomic.Bool
}

func (c *reportCharge) release() {
	if c.released.CompareAndSwap(false, true) {
		c.b.release(c.n)
	}
}

// releaseReportCharge gives back the charge of the report whose call ctx
// belongs to, if it has one and has not given it back yet: the handler
// calls it once the report is merged and its request no longer held.
func releaseReportCharge(ctx context.Context) {
	if c, ok := ctx.Value(reportChargeKey{}).(*reportCharge); ok {
		c.release()
	}
}

// tapHandle runs when a call's headers arrive, before any of its body is
// read: it refuses callers without credentials or without the role the
// method needs, and admits Load.Report calls against the byte budget. The
// charge is released once the report is merged (releaseReportCharge), or
// when the call ends, however it ends.
func (s *Server) tapHandle(ctx context.Context, info *tap.Info) (context.Context, error) {
	p, _, err := s.caller(ctx)
	if err != nil {
		s.cfg.Metrics.refuse(refusedUnauthenticated)
		return ctx, err
	}
	if err := authorize(p, info.FullMethodName, nil); err != nil {
		s.cfg.Metrics.refuse(refusedPermission)
		return ctx, err
	}
	if info.FullMethodName != api.Load_Report_FullMethodName {
		return ctx, nil
	}
	charge := &reportCharge{b: s.budget, n: chargeOf(info.Header, s.lim.MaxMessageBytes)}
	if !s.budget.acquire(charge.n) {
		s.cfg.Metrics.refuse(refusedReportBudget)
		return ctx, status.Errorf(codes.ResourceExhausted, "node %s holds %d bytes of reports, its budget is %d: back off and send this report again", s.cfg.NodeID, s.budget.used.Load(), s.budget.limit)
	}
	context.AfterFunc(ctx, charge.release)
	return context.WithValue(ctx, reportChargeKey{}, charge), nil
}

type reportChargeKey struct{}

// reportWireKey carries a report's bytes from the interceptor to the
// handler.
type reportWireKey struct{}

// reportWireOf is the bytes the report of the call ctx belongs to arrived
// as, or nil.
func reportWireOf(ctx context.Context) *reportWire {
	w, _ := ctx.Value(reportWireKey{}).(*reportWire)
	return w
}

// chargeOf is what a report is charged: its declared size, within
// [minReportCharge, maxBytes], or maxBytes when it declares none.
func chargeOf(md metadata.MD, maxBytes int) int64 {
	if v := md.Get(api.ReportBytesHeader); len(v) > 0 {
		if n, err := strconv.ParseInt(v[0], 10, 64); err == nil && n >= 0 {
			return min(max(n, minReportCharge), int64(maxBytes))
		}
	}
	return int64(maxBytes)
}

// checkReportSize refuses a report larger than admission charged it for.
func checkReportSize(ctx context.Context, size int) error {
	charge, ok := ctx.Value(reportChargeKey{}).(*reportCharge)
	if ok && int64(size) > charge.n {
		return status.Errorf(codes.InvalidArgument, "report of %d bytes exceeds the %d it declared in %s", size, charge.n, api.ReportBytesHeader)
	}
	return nil
}

// serverOptions are the limits as gRPC server options.
func (s *Server) limitOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InTapHandle(s.tapHandle),
		grpc.MaxConcurrentStreams(s.lim.MaxConcurrentStreams),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: s.lim.KeepaliveMinTime, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: s.lim.IdleTimeout}),
		// Fixed flow-control windows of a whole report per stream and
		// several per connection. gRPC's default (64 KiB, grown by its
		// bandwidth-delay estimate) stays near 64 KiB on loopback and fast
		// LANs, where the round trip is short: a 4 MiB report then waits for
		// some 60 window updates, each a scheduling delay on a busy leader,
		// and 50 reporters' reports took seconds to arrive while the CPU
		// idled. Memory stays bounded by the report budget: admitted
		// reports are read at once whatever the window.
		grpc.InitialWindowSize(streamWindowBytes),
		grpc.InitialConnWindowSize(connWindowBytes),
		grpc.MaxRecvMsgSize(s.lim.MaxMessageBytes),
		grpc.MaxSendMsgSize(s.lim.MaxMessageBytes),
	}
}
