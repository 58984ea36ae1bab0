package scheduler

import (
	"context"
	"errors"
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

// ErrNoVerdict: a state check reached no verdict on this node (its capture
// was dropped, or the collection was cut short).
var ErrNoVerdict = errors.New("state check reached no verdict")

// StateCheckConfig configures a StateChecker. Zero durations take the
// defaults.
type StateCheckConfig struct {
	Self string
	// PeerHash asks a member for its report at index (the StateHash RPC).
	PeerHash func(ctx context.Context, m *api.Member, index uint64) (*api.StateReport, error)
	// Diverged is called (once per check) when a majority of the members
	// holds another state hash than this node's at index; the node dumps st
	// and stops.
	Diverged func(index uint64, st *fsm.State, verdict *api.CheckStateResponse)
	// CollectTimeout bounds the wait for the members' reports (default 30 s).
	CollectTimeout time.Duration
	// MaxAge: a marker whose HLC is older than this on this node's clock
	// (replayed after a restart) is hashed but not judged: its peers have
	// long forgotten their hashes (default 2 min).
	MaxAge     time.Duration
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// keptChecks is how many recent markers a node keeps hashes of.
const keptChecks = 8

// StateChecker is one node's part in the cross-replica state check
// (docs/design.md#cross-replica-state-checks). The FSM hands it the state at
// each CheckState marker through its StateCaptures; Run hashes it on its own
// goroutine. Peers read the hash through Report. Once its own hash is known the
// node judges: it collects every member's hash at that index, decides by
// majority within one hash format (judgeReports), exports the outcome, and if
// it is the one that diverged it calls Diverged. The leader answers `cluster
// check` with its own judgement (Result). Safe for concurrent use.
type StateChecker struct {
	cfg      StateCheckConfig
	captures *StateCaptures
	fsm      *fsm.FSM
	clock    *hlc.Clock
	gauge    *prometheus.GaugeVec

	mu   sync.Mutex // guards last
	last *api.CheckStateResponse
}

// StateCaptures carries the states at CheckState markers from the FSM to
// the StateChecker. It exists before both: its Capture is the FSM's
// Options.OnCheckState, and the checker, built with the FSM, reads it.
// Safe for concurrent use.
type StateCaptures struct {
	work chan *checkRecord

	mu     sync.Mutex // guards checks
	checks []*checkRecord
}

// NewStateCaptures returns an empty set of captures.
func NewStateCaptures() *StateCaptures {
	return &StateCaptures{work: make(chan *checkRecord, keptChecks)}
}

type checkRecord struct {
	index uint64
	st    *fsm.State
	// hashed is closed once hash (or dropped) is set; judged once verdict
	// is (nil when not judged).
	hashed, judged chan struct{}
	dropped        bool
	hash           [32]byte
	verdict        *api.CheckStateResponse
}

// NewStateChecker returns the checker of the states f hands to captures,
// judging their age on clock; Run starts it.
func NewStateChecker(cfg StateCheckConfig, captures *StateCaptures, f *fsm.FSM, clock *hlc.Clock) *StateChecker {
	if cfg.CollectTimeout <= 0 {
		cfg.CollectTimeout = 30 * time.Second
	}
	if cfg.MaxAge <= 0 {
		cfg.MaxAge = 2 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &StateChecker{cfg: cfg, captures: captures, fsm: f, clock: clock}
	if cfg.Registerer != nil {
		c.gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hotsplit_state_mismatch",
			Help: "Members per outcome (agrees, diverged, skipped, unreachable, undecided) at the latest cross-replica state check this node judged.",
		}, []string{"outcome"})
		cfg.Registerer.MustRegister(c.gauge)
	}
	return c
}

// Capture records the state right after a CheckState marker at index. The
// FSM calls it inside Apply, before publishing st: it never blocks (a
// capture that finds the hashing queue full is dropped and reported as
// skipped).
func (c *StateCaptures) Capture(index uint64, st *fsm.State) {
	rec := &checkRecord{index: index, st: st, hashed: make(chan struct{}), judged: make(chan struct{})}
	c.mu.Lock()
	c.checks = append(c.checks, rec)
	if len(c.checks) > keptChecks {
		c.checks = slices.Delete(c.checks, 0, len(c.checks)-keptChecks)
	}
	c.mu.Unlock()
	select {
	case c.work <- rec:
	default:
		rec.dropped = true
		close(rec.hashed)
		close(rec.judged)
	}
}

// Run hashes captured states and judges fresh ones until ctx ends.
func (c *StateChecker) Run(ctx context.Context) {
	var judges sync.WaitGroup
	defer judges.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case rec := <-c.captures.work:
			rec.hash = rec.st.Hash()
			close(rec.hashed)
			if age := time.Duration(int64(c.clock.PhysicalNow())-int64(hlc.Physical(rec.st.LastHLC()))) * time.Millisecond; age > c.cfg.MaxAge {
				close(rec.judged) // a replayed old marker: nobody else keeps its hash
				continue
			}
			judges.Add(1)
			go func() { defer judges.Done(); c.judge(ctx, rec) }()
		}
	}
}

func (c *StateCaptures) find(index uint64) *checkRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.checks {
		if r.index == index {
			return r
		}
	}
	return nil
}

// Report is this node's raw report at index (the StateHash RPC): its hash,
// once it has applied index and hashed the state; SKIPPED when it reached
// index without applying the marker (a snapshot) or no longer keeps it.
func (c *StateChecker) Report(ctx context.Context, index uint64) (*api.StateReport, error) {
	if _, err := c.fsm.WaitIndex(ctx, index); err != nil {
		return nil, fmt.Errorf("waiting to apply index %d: %w", index, err)
	}
	rep := &api.StateReport{NodeId: c.cfg.Self, Index: index}
	rec := c.captures.find(index)
	if rec == nil {
		rep.Outcome, rep.Detail = api.StateOutcome_STATE_OUTCOME_SKIPPED, "reached the index through a snapshot, or no longer keeps its hash"
		return rep, nil
	}
	select {
	case <-rec.hashed:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if rec.dropped {
		rep.Outcome, rep.Detail = api.StateOutcome_STATE_OUTCOME_SKIPPED, "too many checks at once: the hash was not computed"
		return rep, nil
	}
	rep.Hash, rep.HashFormat = rec.hash[:], fsm.StateHashFormat
	return rep, nil
}

// judge collects the members' reports at rec's index and decides.
func (c *StateChecker) judge(ctx context.Context, rec *checkRecord) {
	defer close(rec.judged)
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CollectTimeout)
	defer cancel()
	members := rec.st.Members()
	reports := make([]*api.StateReport, len(members))
	var wg sync.WaitGroup
	self := false
	for i, m := range members {
		if m.GetNodeId() == c.cfg.Self {
			self = true
			reports[i] = &api.StateReport{NodeId: c.cfg.Self, Index: rec.index, Hash: rec.hash[:], HashFormat: fsm.StateHashFormat}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.cfg.PeerHash(ctx, m, rec.index)
			if err != nil || r.GetIndex() != rec.index || r.GetNodeId() != m.GetNodeId() {
				detail := fmt.Sprint(err)
				if err == nil {
					detail = fmt.Sprintf("answered for node %q at index %d", r.GetNodeId(), r.GetIndex())
				}
				r = &api.StateReport{NodeId: m.GetNodeId(), Index: rec.index, Outcome: api.StateOutcome_STATE_OUTCOME_UNREACHABLE, Detail: detail}
			}
			reports[i] = r
		}()
	}
	wg.Wait()
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), context.Canceled) {
		return // the node is stopping
	}
	if !self {
		// Not (yet) in the member table, e.g. mid-join: still a voice.
		reports = append(reports, &api.StateReport{NodeId: c.cfg.Self, Index: rec.index, Hash: rec.hash[:], HashFormat: fsm.StateHashFormat})
	}
	slices.SortFunc(reports, func(a, b *api.StateReport) int { return strings.Compare(a.GetNodeId(), b.GetNodeId()) })
	verdict := &api.CheckStateResponse{Index: rec.index, Reports: reports, Diverged: judgeReports(reports)}
	rec.verdict = verdict
	if slices.Contains(verdict.Diverged, c.cfg.Self) && c.cfg.Diverged != nil {
		// The node's one stop line says it all.
		c.record(verdict, false)
		c.cfg.Diverged(rec.index, rec.st, verdict)
		return
	}
	c.record(verdict, true)
}

// judgeReports sets each report's outcome and returns the diverged nodes.
// A hashed report agrees when a strict majority of all reports (members)
// holds its hash in its format, and diverges when a strict majority holds
// another hash of its format; with no majority in its format it is
// undecided. Skipped and unreachable reports count as members that vote
// for nothing, so a minority can never outvote anyone.
func judgeReports(reports []*api.StateReport) []string {
	type key struct {
		format uint32
		hash   string
	}
	votes := map[key]int{}
	for _, r := range reports {
		if hashed(r) {
			votes[key{r.GetHashFormat(), string(r.GetHash())}]++
		}
	}
	majority := len(reports)/2 + 1
	winner := map[uint32]string{} // format -> majority hash
	for k, n := range votes {
		if n >= majority {
			winner[k.format] = k.hash
		}
	}
	var diverged []string
	for _, r := range reports {
		if !hashed(r) {
			continue
		}
		switch w, ok := winner[r.GetHashFormat()]; {
		case !ok:
			r.Outcome = api.StateOutcome_STATE_OUTCOME_UNDECIDED
		case w == string(r.GetHash()):
			r.Outcome = api.StateOutcome_STATE_OUTCOME_AGREES
		default:
			r.Outcome = api.StateOutcome_STATE_OUTCOME_DIVERGED
			diverged = append(diverged, r.GetNodeId())
		}
	}
	return diverged
}

func hashed(r *api.StateReport) bool {
	return len(r.GetHash()) > 0 && (r.GetOutcome() == api.StateOutcome_STATE_OUTCOME_UNSPECIFIED ||
		r.GetOutcome() == api.StateOutcome_STATE_OUTCOME_AGREES || r.GetOutcome() == api.StateOutcome_STATE_OUTCOME_DIVERGED ||
		r.GetOutcome() == api.StateOutcome_STATE_OUTCOME_UNDECIDED)
}

// stateOutcomes are the gauge's label values, by api outcome.
var stateOutcomes = map[api.StateOutcome]string{
	api.StateOutcome_STATE_OUTCOME_AGREES:      "agrees",
	api.StateOutcome_STATE_OUTCOME_DIVERGED:    "diverged",
	api.StateOutcome_STATE_OUTCOME_SKIPPED:     "skipped",
	api.StateOutcome_STATE_OUTCOME_UNREACHABLE: "unreachable",
	api.StateOutcome_STATE_OUTCOME_UNDECIDED:   "undecided",
}

// record keeps the verdict for status, sets the gauge and logs it.
func (c *StateChecker) record(v *api.CheckStateResponse, logIt bool) {
	c.mu.Lock()
	if c.last == nil || v.GetIndex() >= c.last.GetIndex() {
		c.last = v
	}
	c.mu.Unlock()
	counts := map[string]int{}
	for _, r := range v.GetReports() {
		counts[stateOutcomes[r.GetOutcome()]]++
	}
	if c.gauge != nil {
		for _, name := range stateOutcomes {
			c.gauge.WithLabelValues(name).Set(float64(counts[name]))
		}
	}
	switch {
	case !logIt:
	case len(v.GetDiverged()) > 0:
		c.cfg.Logger.Error("state check: replicas diverged", "index", v.GetIndex(), "diverged", strings.Join(v.GetDiverged(), ","), "reports", formatReports(v.GetReports()))
	default:
		c.cfg.Logger.Info("state check", "index", v.GetIndex(), "reports", formatReports(v.GetReports()))
	}
}

func formatReports(rs []*api.StateReport) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%s=%s", r.GetNodeId(), stateOutcomes[r.GetOutcome()])
		if len(r.GetHash()) > 0 {
			parts[i] += fmt.Sprintf("(%x)", r.GetHash()[:6])
		}
	}
	return strings.Join(parts, " ")
}

// Result waits for this node's verdict at index (the leader answering
// `cluster check`).
func (c *StateChecker) Result(ctx context.Context, index uint64) (*api.CheckStateResponse, error) {
	rec := c.captures.find(index)
	if rec == nil {
		return nil, fmt.Errorf("%w: no capture at index %d", ErrNoVerdict, index)
	}
	select {
	case <-rec.judged:
	case <-ctx.Done():
		return nil, fmt.Errorf("%w: waiting for the members' hashes at index %d: %w", ErrNoVerdict, index, ctx.Err())
	}
	if rec.verdict == nil {
		return nil, fmt.Errorf("%w at index %d", ErrNoVerdict, index)
	}
	return rec.verdict, nil
}

// Warnings describe the latest judged check when it was not clean, naming
// the nodes (for the status warnings).
func (c *StateChecker) Warnings() []string {
	c.mu.Lock()
	v := c.last
	c.mu.Unlock()
	var out []string
	for _, r := range v.GetReports() {
		switch r.GetOutcome() {
		case api.StateOutcome_STATE_OUTCOME_DIVERGED:
			out = append(out, fmt.Sprintf("state check at index %d: node %s diverged from the majority (hash %x); it stops serving", v.GetIndex(), r.GetNodeId(), r.GetHash()))
		case api.StateOutcome_STATE_OUTCOME_UNREACHABLE:
			out = append(out, fmt.Sprintf("state check at index %d: node %s did not report its hash (%s)", v.GetIndex(), r.GetNodeId(), r.GetDetail()))
		case api.StateOutcome_STATE_OUTCOME_UNDECIDED:
			out = append(out, fmt.Sprintf("state check at index %d: node %s: no majority hash to compare with", v.GetIndex(), r.GetNodeId()))
		}
	}
	return out
}
