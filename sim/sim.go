package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/keyviz"
)

// Limits of Config.
const (
	MaxRate     = 1_000_000 // operations per second
	MaxDuration = 24 * time.Hour
	MaxNodes    = 1024
)

// Defaults of Config.
const (
	DefaultTick         = 10 * time.Millisecond
	DefaultStartTimeout = 30 * time.Second
	// The drain waits at most two steps (the column holding the last
	// operation closes at the next boundary, and the cluster commits it
	// within a step and its grace) plus this margin.
	drainMargin = 10 * time.Second
	// batchOps bounds the operations issued between two looks at ctx and
	// at the catalog.
	batchOps = 4096
)

// Sentinel errors.
var (
	// ErrInvalidConfig is wrapped by New when a Config field is missing or
	// out of range; the message names the field.
	ErrInvalidConfig = errors.New("invalid sim config")
	// ErrAlreadyRun: Run was called a second time.
	ErrAlreadyRun = errors.New("sim: Run called twice")
	// ErrNoCatalog: no complete catalog arrived within StartTimeout, so no
	// operation could be routed.
	ErrNoCatalog = errors.New("sim: no catalog from the cluster")
	// ErrNotFlushed: the run issued every operation, but not every column
	// holding them was acknowledged within DrainTimeout. Stats says which
	// nodes are behind.
	ErrNotFlushed = errors.New("sim: columns not acknowledged at the end of the run")
)

// Cluster is what the simulator needs of a hotsplit cluster: the load
// service for its reporters, the catalog watch for routing, and the config
// (for the step its first columns must be aligned to). A *client.Client
// satisfies it; tests supply fakes.
type Cluster interface {
	keyviz.ReportSender
	keyviz.RouteSource
	GetConfig(ctx context.Context, req *api.GetConfigRequest) (*api.GetConfigResponse, error)
}

var _ Cluster = (*client.Client)(nil)

// Config configures a simulation. Cluster, Workload, Nodes, Rate and
// Duration are required; zero values of the others take the defaults.
type Config struct {
	// Cluster receives every node's reports (through one shared client)
	// and publishes the catalog.
	Cluster Cluster
	// Workload generates the operations (see ParseWorkload).
	Workload Workload
	// Nodes is the number of simulated data nodes, 1..MaxNodes. Operation i
	// (from 0) is served by node i mod Nodes — the way a load balancer in
	// front of replicas spreads requests — so every node reports every
	// route it was sent traffic for, and the leader merges N reports per
	// route.
	Nodes int
	// Rate is the number of operations per second, 1..MaxRate.
	Rate int
	// Duration is how long the run issues operations, at most MaxDuration.
	// The run issues exactly floor(Rate × Duration) operations unless ctx
	// ends first; operation i is scheduled at i/Rate seconds.
	Duration time.Duration
	// Seed fixes the operation sequence: the driver draws from
	// Workload.Stream(rand.New(rand.NewPCG(Seed, 0))).
	Seed uint64
	// RunID names the run in reporter ids, "<Identity>/<RunID>-<i>" for
	// node i from 0. Default: 8 random hex digits, so that a second run does
	// not reuse the first run's reporter ids (the cluster deduplicates
	// reports by reporter and column).
	RunID string
	// Identity is the name the simulator's client authenticates as (its
	// certificate CN or token name; default "sim"): a reporter may report
	// only under its own name or a name below it.
	Identity string
	// SampleRate and TopK configure each node's sampler (zero: keyviz's
	// defaults).
	SampleRate uint32
	TopK       int
	// Tick is the pacing interval: each tick issues the operations that
	// have come due since the last one, in one batch (default DefaultTick;
	// 1 ms to 1 s).
	Tick time.Duration
	// StartTimeout bounds the wait for the cluster's config and first
	// catalog, and, plus one step, the wait for the first step boundary
	// (default DefaultStartTimeout).
	StartTimeout time.Duration
	// DrainTimeout bounds the final flush (default two steps plus 10 s).
	DrainTimeout time.Duration
	// Clock is the time source of the pacing, the timeouts and the
	// reporters; Timer is the stoppable timer of the reporters and of the
	// catalog watch's retries. Both are injectable so that tests drive
	// time; defaults time.Now and time.NewTimer. (Pacing and timeouts read
	// Clock on every tick of a real ticker.)
	Clock func() time.Time
	Timer func(time.Duration) (c <-chan time.Time, stop func())
	// Permanent says that a Report error will never succeed, so the
	// reporter drops those columns instead of retrying them. Default: gRPC
	// InvalidArgument or AlreadyExists (the cluster took other content for
	// that reporter and window); ResourceExhausted is retried: the node's
	// report budget frees up.
	Permanent func(error) bool
	// Logger receives start, catalog, and flush events and the reporters'
	// warnings; nil discards them.
	Logger *slog.Logger
}

// Phase is where a run is.
type Phase int

// Phases of a run, in order.
const (
	PhaseIdle     Phase = iota // Run not called yet
	PhaseStarting              // reading the config, waiting for the catalog and a step boundary
	PhaseRunning               // issuing operations
	PhaseDraining              // flushing the last columns
	PhaseDone                  // Run returned
)

func (p Phase) String() string {
	switch p {
	case PhaseIdle:
		return "idle"
	case PhaseStarting:
		return "starting"
	case PhaseRunning:
		return "running"
	case PhaseDraining:
		return "draining"
	case PhaseDone:
		return "done"
	}
	return "phase(" + strconv.Itoa(int(p)) + ")"
}

// Sim is one simulation run. Stats may be called from any goroutine at any
// time; Run once.
type Sim struct {
	cfg   Config
	total uint64 // operations the run issues
	log   *slog.Logger

	ran     atomic.Bool
	phase   atomic.Int32
	started atomic.Int64 // Clock at the first operation, Unix ns; 0 before
	ended   atomic.Int64 // Clock when the last operation was issued; 0 before

	// The catalog the driver routes by: set by the watch goroutine, adopted
	// by the driver between batches.
	routing         atomic.Pointer[routing]
	catalogUpdates  atomic.Uint64
	watchFailures   atomic.Uint64
	setRoutesFailed atomic.Uint64

	// Set once in Run before anything reads them through Stats.
	nodesMu sync.Mutex
	nodes   []*node

	reads, writes atomic.Uint64
}

// routing is one catalog version, with its routes listed for
// Sampler.SetRoutes.
type routing struct {
	cat    *catalog.Catalog
	routes []*catalog.RouteDescriptor
}

func newRouting(cat *catalog.Catalog) *routing {
	routes := make([]*catalog.RouteDescriptor, 0, cat.Len())
	cat.Ascend(func(r *catalog.RouteDescriptor) bool {
		routes = append(routes, r)
		return true
	})
	return &routing{cat: cat, routes: routes}
}

// New validates cfg and returns a simulation ready to Run.
func New(cfg Config) (*Sim, error) {
	bad := func(format string, args ...any) (*Sim, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case cfg.Cluster == nil:
		return bad("Cluster is nil: give a *client.Client")
	case cfg.Workload == nil:
		return bad("Workload is nil: see ParseWorkload")
	case cfg.Nodes < 1 || cfg.Nodes > MaxNodes:
		return bad("Nodes %d: want 1 to %d", cfg.Nodes, MaxNodes)
	case cfg.Rate < 1 || cfg.Rate > MaxRate:
		return bad("Rate %d: want 1 to %d operations per second", cfg.Rate, MaxRate)
	case cfg.Duration <= 0 || cfg.Duration > MaxDuration:
		return bad("Duration %v: want more than 0 and at most %v", cfg.Duration, MaxDuration)
	case cfg.Tick != 0 && (cfg.Tick < time.Millisecond || cfg.Tick > time.Second):
		return bad("Tick %v: want 1ms to 1s", cfg.Tick)
	case cfg.StartTimeout < 0 || cfg.DrainTimeout < 0:
		return bad("StartTimeout or DrainTimeout is negative")
	}
	total := mulDiv(uint64(cfg.Duration), uint64(cfg.Rate), uint64(time.Second))
	if total == 0 {
		return bad("Rate %d × Duration %v is less than one operation", cfg.Rate, cfg.Duration)
	}
	if cfg.Identity == "" {
		cfg.Identity = DefaultIdentity
	}
	if cfg.RunID == "" {
		cfg.RunID = fmt.Sprintf("%08x", rand.Uint32())
	}
	if cfg.Tick == 0 {
		cfg.Tick = DefaultTick
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.Timer == nil {
		cfg.Timer = keyviz.SystemTimer
	}
	if cfg.Permanent == nil {
		cfg.Permanent = permanent
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Check the sampler settings now rather than fail in Run.
	if _, err := keyviz.NewSampler(keyviz.SamplerConfig{SampleRate: cfg.SampleRate, TopK: cfg.TopK}); err != nil {
		return bad("SampleRate or TopK: %v", err)
	}
	return &Sim{cfg: cfg, total: total, log: log.With("run_id", cfg.RunID)}, nil
}

// permanent is the default Config.Permanent: only a report the cluster can
// never take (InvalidArgument, e.g. oversized or from a clock far ahead).
// ResourceExhausted means the node's report budget is full for now: the
// reporter backs off and sends the columns again.
func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.AlreadyExists:
		return true
	}
	return false
}

// DefaultIdentity is the identity the simulator reports under by default.
const DefaultIdentity = "sim"

// ReporterID is the reporter id of node i.
func (s *Sim) ReporterID(i int) string {
	return s.cfg.Identity + "/" + s.cfg.RunID + "-" + strconv.Itoa(i)
}

// Planned is the number of operations the run issues unless ctx ends first.
func (s *Sim) Planned() uint64 { return s.total }

// Run reads the cluster's load config, follows the catalog, waits for the
// first complete catalog and for the next step boundary (so that the first
// operation opens a whole column), then issues the workload in real time — every
// Tick, one batch of the operations that have come due — for Duration,
// routing each to the route that holds its key and counting it on its node's
// sampler, while the reporters send closed columns to the cluster.
//
// When every operation has been issued, Run flushes: it waits until each
// node's column holding its last operation has closed at its step boundary
// and every column up to it is settled (acknowledged, or refused for good),
// which takes up to one step plus the cluster's commit. So when Run returns
// nil, every operation is in exactly one column that was settled: committed
// by the cluster, unless Stats counts columns acknowledged late, refused for
// good, or dropped from a full pending queue. Columns are not cut short at
// the end: a column is a step-long window, and a partial one sent early
// would be taken by the cluster for the whole step.
//
// Run returns ctx.Err() if ctx ends first (the operations issued so far
// stay counted in Stats; columns not yet acknowledged are lost with the
// reporters), ErrNoCatalog, ErrNotFlushed, or an error reading the config.
func (s *Sim) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	s.phase.Store(int32(PhaseStarting))
	defer s.phase.Store(int32(PhaseDone))

	lc, err := s.loadConfig(ctx)
	if err != nil {
		return err
	}
	nodes, err := s.newNodes(lc)
	if err != nil {
		return err
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	ready := make(chan struct{})
	wg.Go(func() { s.watch(watchCtx, ready) })
	repCtx, stopReporters := context.WithCancel(ctx)
	defer stopReporters()
	for _, n := range nodes {
		wg.Go(func() { _ = n.reporter.Run(repCtx) })
	}

	if err := s.waitCatalog(ctx, ready); err != nil {
		return err
	}
	if err := s.waitWindows(ctx, nodes); err != nil {
		return err
	}
	s.log.Info("sim: running", "workload", s.cfg.Workload.String(), "nodes", len(nodes), "rate", s.cfg.Rate,
		"duration", s.cfg.Duration, "seed", s.cfg.Seed, "catalog_version", s.routing.Load().cat.Version())
	s.phase.Store(int32(PhaseRunning))
	d := newDriver(s.cfg.Workload, s.cfg.Seed, s.cfg.Rate, nodes, s.adopt)
	if err := s.drive(ctx, d); err != nil {
		return err
	}
	s.phase.Store(int32(PhaseDraining))
	return s.drain(ctx, nodes)
}

// loadConfig reads the cluster's load config: the samplers start with its
// step, so their first columns are aligned to the cluster's windows.
func (s *Sim) loadConfig(ctx context.Context) (keyviz.LoadConfig, error) {
	cctx, cancel := context.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	resp, err := s.cfg.Cluster.GetConfig(cctx, &api.GetConfigRequest{})
	if err != nil {
		return keyviz.LoadConfig{}, fmt.Errorf("sim: reading the cluster's load config: %w", err)
	}
	return keyviz.LoadConfigFromProto(resp.GetConfig()), nil
}

func (s *Sim) newNodes(lc keyviz.LoadConfig) ([]*node, error) {
	nodes := make([]*node, s.cfg.Nodes)
	for i := range nodes {
		sm, err := keyviz.NewSampler(keyviz.SamplerConfig{Load: lc, SampleRate: s.cfg.SampleRate, TopK: s.cfg.TopK})
		if err != nil {
			return nil, fmt.Errorf("sim: the cluster's load config: %w", err)
		}
		n := &node{id: s.ReporterID(i), sampler: sm, acks: newAckTracker(s.cfg.Cluster, s.cfg.Permanent)}
		n.reporter, err = keyviz.NewReporter(keyviz.ReporterConfig{
			ReporterID: n.id,
			Sampler:    sm,
			Sender:     n.acks,
			Clock:      s.cfg.Clock,
			Timer:      s.cfg.Timer,
			Permanent:  s.cfg.Permanent,
			Logger:     s.cfg.Logger,
		})
		if err != nil {
			return nil, fmt.Errorf("sim: node %d: %w", i, err)
		}
		nodes[i] = n
	}
	s.nodesMu.Lock()
	s.nodes = nodes
	s.nodesMu.Unlock()
	return nodes, nil
}

// waitCatalog waits for the first complete catalog, polling on a ticker.
func (s *Sim) waitCatalog(ctx context.Context, ready <-chan struct{}) error {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	start := s.cfg.Clock()
	for {
		select {
		case <-ready:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if s.cfg.Clock().Sub(start) >= s.cfg.StartTimeout {
			return fmt.Errorf("%w within %v (%d failed watches)", ErrNoCatalog, s.cfg.StartTimeout, s.watchFailures.Load())
		}
	}
}

// waitWindows waits until every node's reporter has closed its first column
// (at the first step boundary after it started), so that the first
// operation lands in a column that starts at a step boundary. A node's first
// column would otherwise be a part of a window reported as the whole window,
// and, as the leader expects no reporter it has not heard from yet, the
// first node to report it would complete that window for the cluster and the
// other nodes' first columns would come late and be dropped.
func (s *Sim) waitWindows(ctx context.Context, nodes []*node) error {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	start := s.cfg.Clock()
	for {
		ready, step := true, uint64(0)
		for _, n := range nodes {
			_, st, started := n.sampler.Window()
			ready = ready && started
			step = max(step, st)
		}
		if ready {
			return nil
		}
		if limit := time.Duration(step)*time.Millisecond + s.cfg.StartTimeout; s.cfg.Clock().Sub(start) >= limit {
			return fmt.Errorf("sim: the reporters opened no column within %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// adopt is the driver's hook between batches: it moves every node's
// sampler to the newest catalog before the driver routes by it, on the
// driver's goroutine, so that no operation is routed to a route its
// sampler does not know yet (it would be dropped as unknown).
func (s *Sim) adopt(cur *routing, nodes []*node) *routing {
	next := s.routing.Load()
	if next == cur {
		return cur
	}
	for _, n := range nodes {
		if err := n.sampler.SetRoutes(next.routes, next.cat.Version()); err != nil {
			s.setRoutesFailed.Add(1)
			s.log.Warn("sim: sampler refused a catalog", "reporter_id", n.id, "catalog_version", next.cat.Version(), "error", err)
		}
	}
	return next
}

// drive issues the workload in real time until every operation is out.
func (s *Sim) drive(ctx context.Context, d *driver) error {
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	start := s.cfg.Clock()
	s.started.Store(start.UnixNano())
	defer func() { s.ended.Store(s.cfg.Clock().UnixNano()) }()
	for {
		due := s.total
		if el := s.cfg.Clock().Sub(start); el < s.cfg.Duration {
			due = min(mulDiv(uint64(max(el, 0)), uint64(s.cfg.Rate), uint64(time.Second)), s.total)
		}
		for d.issued < due {
			if err := ctx.Err(); err != nil {
				return err
			}
			d.issue(min(due-d.issued, batchOps))
			s.publish(d)
		}
		if d.issued == s.total {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// publish makes the driver's counts visible to Stats.
func (s *Sim) publish(d *driver) {
	var reads, writes uint64
	for i, n := range d.nodes {
		n.reads.Store(d.reads[i])
		n.writes.Store(d.writes[i])
		reads += d.reads[i]
		writes += d.writes[i]
	}
	s.reads.Store(reads)
	s.writes.Store(writes)
}

// drain waits until every node's columns up to the one holding its last
// operation are settled.
func (s *Sim) drain(ctx context.Context, nodes []*node) error {
	type target struct {
		last    uint64
		started bool
	}
	targets := make([]target, len(nodes))
	var step uint64
	for i, n := range nodes {
		// Every operation of n is in the open column or an earlier one:
		// Window waits out a close in progress.
		last, st, started := n.sampler.Window()
		targets[i] = target{last, started}
		step = max(step, st)
	}
	timeout := s.cfg.DrainTimeout
	if timeout == 0 {
		timeout = 2*time.Duration(step)*time.Millisecond + drainMargin
	}
	t := time.NewTicker(s.cfg.Tick)
	defer t.Stop()
	start := s.cfg.Clock()
	for {
		behind := 0
		for i, n := range nodes {
			if !n.acks.settledThrough(targets[i].last, targets[i].started) {
				behind++
			}
		}
		if behind == 0 {
			s.log.Info("sim: every column acknowledged", "ops", s.reads.Load()+s.writes.Load())
			return nil
		}
		if s.cfg.Clock().Sub(start) >= timeout {
			return fmt.Errorf("%w: %d of %d nodes still waiting after %v", ErrNotFlushed, behind, len(nodes), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}

// watch follows the catalog until ctx ends, publishing each complete
// version for the driver; it resumes after the last version it applied
// whenever a watch ends, and starts over from a snapshot after a gap.
func (s *Sim) watch(ctx context.Context, ready chan<- struct{}) {
	var f follower
	const minDelay, maxDelay = 50 * time.Millisecond, 2 * time.Second
	delay := minDelay
	isReady := false
	for {
		from := f.from()
		err := s.cfg.Cluster.Watch(ctx, from, func(ev *api.WatchRoutesResponse) error {
			changed, err := f.apply(ev)
			if err != nil || !changed {
				return err
			}
			s.install(f.cat)
			delay = minDelay
			if !isReady {
				isReady = true
				close(ready)
			}
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		gap := errors.Is(err, errCatalogGap)
		f.restart(gap)
		if err != nil {
			s.watchFailures.Add(1)
			s.log.Warn("sim: catalog watch ended", "error", err, "catalog_version", f.from(), "from_version", from, "resync", gap)
		}
		wait, stop := s.cfg.Timer(delay)
		select {
		case <-ctx.Done():
			stop()
			return
		case <-wait:
		}
		delay = min(2*delay, maxDelay)
	}
}

// install publishes cat for the driver.
func (s *Sim) install(cat *catalog.Catalog) {
	s.routing.Store(newRouting(cat))
	s.catalogUpdates.Add(1)
	s.log.Info("sim: catalog", "catalog_version", cat.Version(), "routes", cat.Len())
}
