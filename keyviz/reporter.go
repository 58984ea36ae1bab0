package keyviz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// ReportSender sends a reporter's closed columns to the cluster. A
// *client.Client satisfies it; it follows leader hints itself.
type ReportSender interface {
	Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error)
}

// RouteSource is the data node's view of the catalog. A *client.Client
// satisfies it.
type RouteSource interface {
	// Watch calls fn for every catalog event from fromVersion on until ctx
	// ends.
	Watch(ctx context.Context, fromVersion uint64, fn func(*api.WatchRoutesResponse) error) error
}

// Reporter defaults.
const (
	DefaultMaxPending    = 32
	DefaultMinBackoff    = 50 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultReportTimeout = 10 * time.Second
	minResendInterval    = 100 * time.Millisecond
)

// ErrInvalidReporterConfig is wrapped by NewReporter when a required field is
// missing or a value is out of range; the message names the field.
var ErrInvalidReporterConfig = errors.New("invalid reporter config")

// ReporterConfig configures a Reporter. Zero fields take the defaults.
type ReporterConfig struct {
	// ReporterID names this reporter to the cluster (one per data node);
	// required.
	ReporterID string
	// Sampler is the sampler whose columns are reported; required.
	Sampler *Sampler
	// Sender delivers reports; required.
	Sender ReportSender
	// Routes, if set, is followed to keep the sampler's route table current.
	// Without it the caller keeps the table current with SetRoutes.
	Routes RouteSource
	// Clock and Timer are the time source and a stoppable timer, injectable
	// so that tests drive time. Every timer the reporter starts is stopped
	// once it is no longer awaited, so a test can count the waits in
	// progress. Default time.Now and time.NewTimer.
	Clock func() time.Time
	Timer func(time.Duration) (c <-chan time.Time, stop func())
	// MaxPending bounds the closed columns kept until acknowledged; when a
	// new column finds it full, the oldest is dropped and counted.
	MaxPending int
	// MaxReportBytes bounds one request (default and at most
	// api.MaxReportBytes).
	MaxReportBytes int
	// MinBackoff and MaxBackoff bound the jittered wait after a failure.
	MinBackoff, MaxBackoff time.Duration
	// ReportTimeout bounds one Report call.
	ReportTimeout time.Duration
	// ResendInterval is how long sent, unacknowledged columns wait before
	// they are sent again when no new column comes first. Default: half
	// the open column's step, at least 100 ms.
	ResendInterval time.Duration
	// Permanent, if set, says that an error means the cluster refused the
	// request for good (e.g. gRPC InvalidArgument, or AlreadyExists:
	// another report of this reporter and window was taken; not
	// ResourceExhausted, which means "later"): its
	// columns are then dropped and counted instead of retried, so that a
	// column the cluster will never take (say, from a clock a day ahead)
	// cannot hold up the ones after it. Default: every error is retried.
	Permanent func(error) bool
	// Logger receives warnings and state changes; nil discards them.
	Logger *slog.Logger
	// Metrics, if set, gets the reporter's and the sampler's metrics. To run
	// several reporters on one registry, give each the registry wrapped with
	// the same label name and its own value, e.g.
	// prometheus.WrapRegistererWith(prometheus.Labels{"reporter": id}, reg).
	Metrics prometheus.Registerer
}

// ReporterStats are a reporter's counters since it was created.
type ReporterStats struct {
	ColumnsClosed   uint64 // closed at a step boundary
	ColumnsSent     uint64 // column transmissions, resends included
	ColumnsAcked    uint64 // acknowledged (late ones included)
	ColumnsLate     uint64 // acknowledged as late: dropped by the cluster
	ColumnsDropped  uint64 // dropped unacknowledged: pending was full
	ColumnsRejected uint64 // dropped unacknowledged: refused for good
	ReportFailures  uint64 // Report calls that failed
	EvidenceCapped  uint64 // rows sent without evidence: the column's evidence bound
	TopKeysTrimmed  uint64 // rows whose top keys were shed to fit a report
	RowsTrimmed     uint64 // rows shed to fit a report
	WatchFailures   uint64 // catalog watches that ended with an error
	ConfigRejected  uint64 // configs from the cluster that were out of range
	Pending         int    // columns awaiting acknowledgement
}

// Reporter closes the sampler's columns at step boundaries and reports them
// until the cluster acknowledges them (docs/design.md#the-load-pipeline). Run it once.
type Reporter struct {
	cfg    ReporterConfig
	s      *Sampler
	log    *slog.Logger
	base   int // encoded size of a report without columns
	budget int // largest column that fits a report alone
	wake   chan struct{}

	mu      sync.Mutex
	pending []*pendingColumn // oldest first
	lastCfg LoadConfig       // last config staged from a response

	closed, sent, acked, late, dropped, rejected atomic.Uint64
	failures, topKeysTrimmed, rowsTrimmed        atomic.Uint64
	evidenceCapped                               atomic.Uint64
	watchFailures, configRejected                atomic.Uint64
}

type pendingColumn struct {
	col  *api.ReportColumn
	size int  // encoded size as a field of the request
	sent bool // sent in the current round
}

// NewReporter validates cfg and registers the metrics (if any).
func NewReporter(cfg ReporterConfig) (*Reporter, error) {
	switch {
	case cfg.ReporterID == "":
		return nil, fmt.Errorf("%w: ReporterID is empty", ErrInvalidReporterConfig)
	case cfg.Sampler == nil:
		return nil, fmt.Errorf("%w: Sampler is nil", ErrInvalidReporterConfig)
	case cfg.Sender == nil:
		return nil, fmt.Errorf("%w: Sender is nil", ErrInvalidReporterConfig)
	case cfg.MaxPending < 0:
		return nil, fmt.Errorf("%w: MaxPending %d is negative", ErrInvalidReporterConfig, cfg.MaxPending)
	case cfg.MaxReportBytes < 0 || cfg.MaxReportBytes > api.MaxReportBytes:
		return nil, fmt.Errorf("%w: MaxReportBytes %d not in [0, %d]", ErrInvalidReporterConfig, cfg.MaxReportBytes, api.MaxReportBytes)
	case cfg.MinBackoff < 0 || cfg.MaxBackoff < 0 || cfg.ReportTimeout < 0 || cfg.ResendInterval < 0:
		return nil, fmt.Errorf("%w: negative duration", ErrInvalidReporterConfig)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Timer == nil {
		cfg.Timer = SystemTimer
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.MaxReportBytes == 0 {
		cfg.MaxReportBytes = api.MaxReportBytes
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	cfg.MaxBackoff = max(cfg.MaxBackoff, cfg.MinBackoff)
	if cfg.ReportTimeout == 0 {
		cfg.ReportTimeout = DefaultReportTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Reporter{
		cfg:    cfg,
		s:      cfg.Sampler,
		log:    log.With("reporter_id", cfg.ReporterID),
		base:   proto.Size(&api.ReportRequest{ReporterId: cfg.ReporterID}),
		budget: columnBudget(cfg.ReporterID, cfg.MaxReportBytes),
		wake:   make(chan struct{}, 1),
	}
	if r.budget < 64 {
		return nil, fmt.Errorf("%w: MaxReportBytes %d leaves no room for a column", ErrInvalidReporterConfig, cfg.MaxReportBytes)
	}
	if cfg.Metrics != nil {
		if err := r.register(cfg.Metrics); err != nil {
			return nil, fmt.Errorf("keyviz: registering metrics: %w", err)
		}
	}
	return r, nil
}

// Run closes columns, reports them and follows the catalog until ctx ends,
// then returns ctx.Err(). Columns still unacknowledged then are lost.
func (r *Reporter) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { r.closeLoop(ctx) })
	wg.Go(func() { r.sendLoop(ctx) })
	if r.cfg.Routes != nil {
		wg.Go(func() { r.watchLoop(ctx) })
	}
	wg.Wait()
	return ctx.Err()
}

// Stats returns the reporter's counters.
func (r *Reporter) Stats() ReporterStats {
	r.mu.Lock()
	pending := len(r.pending)
	r.mu.Unlock()
	return ReporterStats{
		ColumnsClosed:   r.closed.Load(),
		ColumnsSent:     r.sent.Load(),
		ColumnsAcked:    r.acked.Load(),
		ColumnsLate:     r.late.Load(),
		ColumnsDropped:  r.dropped.Load(),
		ColumnsRejected: r.rejected.Load(),
		ReportFailures:  r.failures.Load(),
		EvidenceCapped:  r.evidenceCapped.Load(),
		TopKeysTrimmed:  r.topKeysTrimmed.Load(),
		RowsTrimmed:     r.rowsTrimmed.Load(),
		WatchFailures:   r.watchFailures.Load(),
		ConfigRejected:  r.configRejected.Load(),
		Pending:         pending,
	}
}

func (r *Reporter) nowMs() uint64 {
	return uint64(max(r.cfg.Clock().UnixMilli(), 0))
}

// SystemTimer is the default Timer: a time.Timer and its Stop.
func SystemTimer(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTimer(d)
	return t.C, func() { t.Stop() }
}

// sleep waits d on the injected timer; false if ctx ended first.
func (r *Reporter) sleep(ctx context.Context, d time.Duration) bool {
	c, stop := r.cfg.Timer(d)
	defer stop()
	select {
	case <-ctx.Done():
		return false
	case <-c:
		return true
	}
}

// closeLoop closes the open column at each step boundary. The boundary is
// fixed before waiting: recomputed after the wait it would move on for a
// column not yet started (which has no boundary of its own).
func (r *Reporter) closeLoop(ctx context.Context) {
	for {
		b := r.s.NextBoundary(r.nowMs())
		for now := r.nowMs(); now < b; now = r.nowMs() {
			if !r.sleep(ctx, time.Duration(b-now)*time.Millisecond) {
				return
			}
		}
		r.enqueue(r.s.CloseColumn(r.nowMs()))
	}
}

// enqueue makes a closed column pending, dropping the oldest when full.
func (r *Reporter) enqueue(col *api.ReportColumn) {
	t := TrimColumn(col, r.budget)
	r.evidenceCapped.Add(uint64(t.EvidenceCapped))
	if t.EvidenceStripped+t.RowsDropped > 0 {
		r.topKeysTrimmed.Add(uint64(t.EvidenceStripped))
		r.rowsTrimmed.Add(uint64(t.RowsDropped))
		r.log.Warn("keyviz: column trimmed to fit a report", "window_start_ms", col.WindowStartMs,
			"reason", "size_limit", "top_keys_stripped", t.EvidenceStripped, "rows_dropped", t.RowsDropped)
	}
	p := &pendingColumn{col: col, size: fieldSize(reportColumnsField, t.Size)}
	r.mu.Lock()
	r.pending = append(r.pending, p)
	// Counted with the column in pending, so that Stats never shows a
	// closed column that is neither pending nor sent.
	r.closed.Add(1)
	var lost []*pendingColumn
	if n := len(r.pending) - r.cfg.MaxPending; n > 0 {
		lost = r.pending[:n:n]
		r.pending = r.pending[n:]
	}
	// A new column starts a new round: every unacknowledged column goes
	// out again with it, oldest first.
	for _, q := range r.pending {
		q.sent = false
	}
	r.mu.Unlock()
	for _, q := range lost {
		r.dropped.Add(1)
		r.log.Warn("keyviz: pending columns full, oldest dropped", "window_start_ms", q.col.WindowStartMs,
			"reason", "pending_full", "max_pending", r.cfg.MaxPending)
	}
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// batch returns the oldest pending columns not yet sent in this round that
// fit in one report (at least one).
func (r *Reporter) batch() []*pendingColumn {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*pendingColumn
	size := r.base
	for _, p := range r.pending {
		if p.sent {
			continue
		}
		if len(out) > 0 && size+p.size > r.cfg.MaxReportBytes {
			break
		}
		out = append(out, p)
		size += p.size
	}
	return out
}

// sendLoop reports pending columns: in rounds, each new column starting
// one, every unacknowledged column sent oldest first in as many reports as
// the size limit needs; unacknowledged ones are sent again after the resend
// interval; failures back off.
func (r *Reporter) sendLoop(ctx context.Context) {
	bo := newBackoff(r.cfg.MinBackoff, r.cfg.MaxBackoff)
	for {
		batch := r.batch()
		if len(batch) == 0 {
			if !r.idle(ctx) {
				return
			}
			continue
		}
		req := &api.ReportRequest{ReporterId: r.cfg.ReporterID, Columns: make([]*api.ReportColumn, len(batch))}
		for i, p := range batch {
			req.Columns[i] = p.col
		}
		rctx, cancel := context.WithTimeout(ctx, r.cfg.ReportTimeout)
		resp, err := r.cfg.Sender.Report(rctx, req)
		cancel()
		r.sent.Add(uint64(len(batch)))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			// A refusal carries the replicated config: adopted like an
			// answer's, or a reporter on another step (started after a
			// step change) would be refused for good.
			if c := refusalConfig(err); c != nil {
				r.stageConfig(LoadConfigFromProto(c))
			}
			if r.cfg.Permanent != nil && r.cfg.Permanent(err) {
				r.reject(batch, err)
				continue
			}
			r.failures.Add(1)
			d := bo.next()
			r.log.Warn("keyviz: report failed", "error", err, "columns", len(batch), "retry_in", d)
			if !r.sleep(ctx, d) {
				return
			}
			continue
		}
		bo.reset()
		r.settle(batch, resp)
	}
}

// idle waits for a new column or, if columns await acknowledgement, for the
// resend interval; false if ctx ended.
func (r *Reporter) idle(ctx context.Context) bool {
	r.mu.Lock()
	waiting := len(r.pending) > 0
	r.mu.Unlock()
	var resend <-chan time.Time
	if waiting {
		// Stopped when a new column comes first: a wake must not leave a
		// resend timer behind for every idle round.
		c, stop := r.cfg.Timer(r.resendInterval())
		defer stop()
		resend = c
	}
	select {
	case <-ctx.Done():
		return false
	case <-r.wake:
	case <-resend:
		r.mu.Lock()
		for _, p := range r.pending {
			p.sent = false
		}
		r.mu.Unlock()
	}
	return true
}

func (r *Reporter) resendInterval() time.Duration {
	if r.cfg.ResendInterval > 0 {
		return r.cfg.ResendInterval
	}
	_, step, _ := r.s.Window()
	return max(time.Duration(step)*time.Millisecond/2, minResendInterval)
}

// settle applies a response: acknowledged columns leave pending, the rest
// of the batch is marked sent for this round, and the cluster's config is
// staged for the next boundary.
func (r *Reporter) settle(batch []*pendingColumn, resp *api.ReportResponse) {
	late := make(map[uint64]bool, len(resp.GetLateWindowStarts()))
	acked := make(map[uint64]bool, len(resp.GetAckedWindowStarts())+len(late))
	for _, w := range resp.GetLateWindowStarts() {
		late[w], acked[w] = true, true
	}
	for _, w := range resp.GetAckedWindowStarts() {
		acked[w] = true
	}
	// Staged before the acknowledgement shows in Stats: whoever sees the
	// column acknowledged sees the config that came with it staged.
	if c := resp.GetConfig(); c != nil {
		r.stageConfig(LoadConfigFromProto(c))
	}
	r.mu.Lock()
	for _, p := range batch {
		p.sent = true
	}
	kept := r.pending[:0]
	for _, p := range r.pending {
		w := p.col.WindowStartMs
		if !acked[w] {
			kept = append(kept, p)
			continue
		}
		r.acked.Add(1)
		if late[w] {
			r.late.Add(1)
			r.log.Info("keyviz: column acknowledged late, dropped by the cluster", "window_start_ms", w, "reason", "late")
		}
	}
	clear(r.pending[len(kept):])
	r.pending = kept
	r.mu.Unlock()
}

// refusalConfig is the replicated config the cluster adds to the status
// of a refused report, nil if err carries none.
func refusalConfig(err error) *api.Config {
	st, _ := status.FromError(err) // also when err wraps the status
	for _, d := range st.Details() {
		if c, ok := d.(*api.Config); ok {
			return c
		}
	}
	return nil
}

// stageConfig hands the cluster's load config to the sampler, which adopts
// it at the next boundary.
func (r *Reporter) stageConfig(lc LoadConfig) {
	r.mu.Lock()
	same := lc == r.lastCfg
	r.lastCfg = lc
	r.mu.Unlock()
	if same {
		return
	}
	if err := r.s.SetConfig(lc); err != nil {
		r.configRejected.Add(1)
		r.log.Warn("keyviz: cluster config out of range, keeping the current one", "error", err, "reason", "invalid_config")
		return
	}
	r.log.Info("keyviz: cluster config staged for the next boundary", "step_ms", lc.StepMs, "buckets", lc.Buckets,
		"write_weight", lc.WriteWeight, "read_weight", lc.ReadWeight)
}

// reject drops the columns of a request the cluster refused for good.
func (r *Reporter) reject(batch []*pendingColumn, err error) {
	gone := make(map[*pendingColumn]bool, len(batch))
	for _, p := range batch {
		gone[p] = true
	}
	r.mu.Lock()
	kept := r.pending[:0]
	for _, p := range r.pending {
		if !gone[p] {
			kept = append(kept, p)
		}
	}
	clear(r.pending[len(kept):])
	r.pending = kept
	r.mu.Unlock()
	r.rejected.Add(uint64(len(batch)))
	r.log.Warn("keyviz: report refused, its columns dropped", "error", err, "columns", len(batch),
		"window_start_ms", batch[0].col.WindowStartMs, "reason", "rejected")
}
