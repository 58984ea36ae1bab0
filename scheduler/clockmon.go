package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
)

// ClockConfig configures a ClockMonitor. Zero durations take the defaults.
type ClockConfig struct {
	Self string
	// MaxOffset is --maxClockOffset: a node whose clock differs from a
	// majority of the members' by more than this must not lead. 0 turns the
	// monitor off.
	MaxOffset time.Duration
	// Interval between rounds of pings (default 500 ms).
	Interval time.Duration
	// MaxRTT: a sample whose round trip took longer is discarded, so a
	// paused or overloaded peer does not count as offset (default
	// MaxOffset/2, at most 1 s: the uncertainty RTT/2 stays well below the
	// bound).
	MaxRTT time.Duration
	// HaltAfter: a node off for this long without a break stops (default
	// 30 s; negative: never).
	HaltAfter time.Duration
	// Ping returns a member's physical clock in ms (the ClockPing RPC).
	Ping       func(ctx context.Context, m *api.Member) (int64, error)
	Halt       func(error)
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// ClockMonitor measures this node's clock against every other member's,
// NTP-style (CockroachDB's remote clock monitor): offset = remote reading −
// the midpoint of the local readings around the round trip, uncertainty
// RTT/2, samples with an RTT above MaxRTT discarded. The node is "off" when
// a strict majority of the members (itself included in the count, never in
// the vote) shows an offset beyond MaxOffset by more than the uncertainty;
// the verdict changes only when fresh samples of a majority make one, and
// stands while they do not. An off node refuses to lead (the scheduler asks
// Off), and one that stays off for HaltAfter, and is still measured off,
// stops. It reads the same hlc.Source the HLC issues from. Safe for
// concurrent use.
type ClockMonitor struct {
	cfg   ClockConfig
	clock *hlc.Clock
	fsm   *fsm.FSM

	offGauge, maxGauge prometheus.Gauge
	refusals           prometheus.Counter
	now                func() time.Time // the wall clock of samples and the halt timer (tests step it)

	mu       sync.Mutex // guards the fields below
	samples  map[string]clockSample
	off      bool
	offSince time.Time
	offPeers []string
}

type clockSample struct {
	offset, uncertainty time.Duration
	at                  time.Time
}

// NewClockMonitor returns a monitor of clock (the node's HLC, whose
// physical source it samples) against the members in f; Run starts it.
func NewClockMonitor(cfg ClockConfig, f *fsm.FSM, clock *hlc.Clock) *ClockMonitor {
	if cfg.Interval <= 0 {
		cfg.Interval = 500 * time.Millisecond
	}
	if cfg.MaxRTT <= 0 {
		cfg.MaxRTT = min(cfg.MaxOffset/2, time.Second)
	}
	if cfg.HaltAfter == 0 {
		cfg.HaltAfter = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	m := &ClockMonitor{cfg: cfg, clock: clock, fsm: f, samples: map[string]clockSample{}, now: time.Now}
	if reg := cfg.Registerer; reg != nil {
		m.offGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_clock_offset_exceeded",
			Help: "1 while this node's clock is off by more than --maxClockOffset from a majority of the members (it refuses to lead)."})
		m.maxGauge = prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_clock_offset_max_seconds",
			Help: "The largest absolute clock offset measured to another member (fresh samples only), in seconds."})
		m.refusals = prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_clock_leadership_refusals_total",
			Help: "Terms this node won while its clock was off and gave away without establishing the fence."})
		reg.MustRegister(m.offGauge, m.maxGauge, m.refusals)
	}
	return m
}

// Enabled reports whether the monitor runs at all.
func (m *ClockMonitor) Enabled() bool { return m != nil && m.cfg.MaxOffset > 0 }

// Off reports whether this node's clock is off from a majority now.
func (m *ClockMonitor) Off() bool {
	if !m.Enabled() {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.off
}

// Run pings every other member each Interval until ctx ends.
func (m *ClockMonitor) Run(ctx context.Context) {
	if !m.Enabled() {
		return
	}
	tick := time.NewTicker(m.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		members := m.fsm.State().Members()
		var wg sync.WaitGroup
		for _, mem := range members {
			if mem.GetNodeId() == m.cfg.Self || mem.GetGrpcAddr() == "" {
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); m.measure(ctx, mem) }()
		}
		wg.Wait()
		m.evaluate(members)
	}
}

// measure takes one sample of mem's offset.
func (m *ClockMonitor) measure(ctx context.Context, mem *api.Member) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.MaxRTT)
	defer cancel()
	t0, l0 := time.Now(), m.clock.PhysicalNow()
	remote, err := m.cfg.Ping(ctx, mem)
	rtt, l1 := time.Since(t0), m.clock.PhysicalNow()
	if err != nil || rtt > m.cfg.MaxRTT {
		return // a lost or slow sample says nothing: pauses must not count
	}
	mid := (int64(l0) + int64(l1)) / 2
	s := clockSample{offset: time.Duration(remote-mid) * time.Millisecond, uncertainty: rtt/2 + time.Millisecond, at: m.now()}
	m.mu.Lock()
	m.samples[mem.GetNodeId()] = s
	m.mu.Unlock()
}

// evaluate decides whether this node is off, from the fresh samples.
func (m *ClockMonitor) evaluate(members []*api.Member) {
	now := m.now()
	fresh := 5 * m.cfg.Interval
	n := len(members)
	if !slices.ContainsFunc(members, func(x *api.Member) bool { return x.GetNodeId() == m.cfg.Self }) {
		n++
	}
	m.mu.Lock()
	var offPeers []string
	var maxAbs time.Duration
	judged := 0 // peers with a fresh sample
	for id, s := range m.samples {
		if now.Sub(s.at) > fresh || !slices.ContainsFunc(members, func(x *api.Member) bool { return x.GetNodeId() == id }) {
			delete(m.samples, id)
			continue
		}
		judged++
		abs := s.offset
		if abs < 0 {
			abs = -abs
		}
		maxAbs = max(maxAbs, abs)
		if abs-s.uncertainty > m.cfg.MaxOffset {
			offPeers = append(offPeers, id+" "+signed(s.offset))
		}
	}
	slices.Sort(offPeers)
	// No verdict without evidence: while too few peers answered in time to
	// make a majority either way (an overloaded machine, a peer down), the
	// last verdict stands, so an off node does not lead merely because its
	// pings went stale, and halts only on fresh evidence.
	evidence := judged > n/2
	was, since := m.off, m.offSince
	off := was
	if evidence {
		off = len(offPeers) > n/2
		m.off, m.offPeers = off, offPeers
	}
	if off && !was {
		m.offSince = now
		since = now
	}
	m.mu.Unlock()
	if m.maxGauge != nil {
		m.maxGauge.Set(maxAbs.Seconds())
		if off {
			m.offGauge.Set(1)
		} else {
			m.offGauge.Set(0)
		}
	}
	switch {
	case off && !was:
		m.cfg.Logger.Warn("clock: this node's clock is off from a majority of the members; it refuses to lead",
			"max_clock_offset", m.cfg.MaxOffset.String(), "offsets", strings.Join(offPeers, ", "))
	case !off && was:
		m.cfg.Logger.Info("clock: back within --maxClockOffset of a majority")
	}
	if off && evidence && m.cfg.HaltAfter > 0 && now.Sub(since) >= m.cfg.HaltAfter && m.cfg.Halt != nil {
		m.cfg.Halt(fmt.Errorf("clock: this node's clock has been off by more than --maxClockOffset %v from a majority of the members for %v (offsets of the others: %s)",
			m.cfg.MaxOffset, now.Sub(since).Round(time.Second), strings.Join(offPeers, ", ")))
	}
}

// refused counts a term given away because the clock is off.
func (m *ClockMonitor) refused() {
	if m != nil && m.refusals != nil {
		m.refusals.Inc()
	}
}

// Warnings name this node's and its peers' clock problems (for the status
// warnings): peers offset beyond the bound from this node, and this node
// itself when it is off from a majority.
func (m *ClockMonitor) Warnings() []string {
	if !m.Enabled() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	if m.off {
		out = append(out, fmt.Sprintf("clock: node %s is off by more than --maxClockOffset %v from a majority (%s); it refuses to lead",
			m.cfg.Self, m.cfg.MaxOffset, strings.Join(m.offPeers, ", ")))
	}
	ids := make([]string, 0, len(m.samples))
	for id := range m.samples {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s := m.samples[id]
		if abs := max(s.offset, -s.offset); abs-s.uncertainty > m.cfg.MaxOffset {
			out = append(out, fmt.Sprintf("clock: node %s is %s off this node %s (--maxClockOffset %v)", id, signed(s.offset), m.cfg.Self, m.cfg.MaxOffset))
		}
	}
	return out
}

// signed renders an offset with its sign: "+2.5s", "-700ms".
func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + d.String()
	}
	return d.String()
}
