package fsm

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/placement"
)

// Metrics are the FSM's apply-side metrics (docs/design.md#observability). Apply runs on every
// replica, so they are per node: a split counts once on each node. Labels
// come from fixed enums only (origin, reason, command kind), never a route
// id or key. A nil *Metrics is valid and records nothing.
//
// The apply latency histogram is the one place this package reads a clock:
// the monotonic clock, for the metric only; nothing read from it reaches
// the replicated state.
type Metrics struct {
	splits       *prometheus.CounterVec // origin
	merges       *prometheus.CounterVec // origin: manual, automatic
	opsPlanned   prometheus.Counter
	opsDone      prometheus.Counter
	opsPaused    prometheus.Counter
	opsAborted   *prometheus.CounterVec // reason
	skips        *prometheus.CounterVec // reason
	columns      prometheus.Counter
	droppedRows  *prometheus.CounterVec // stage: leader, apply
	fence        prometheus.Counter
	applySeconds *prometheus.HistogramVec // command
	liveRoutes   prometheus.Gauge
	tracked      prometheus.Gauge
	liveOps      prometheus.Gauge
	switchOn     prometheus.Gauge
	eligible     prometheus.Gauge
	// Automatic merges (AutoMerge).
	mergeDecisions *prometheus.CounterVec // reason: merge_planned, merge_delay, …
	mergeOps       *prometheus.CounterVec // event: planned, paused, aborted
	// Shard groups and moves (ShardGroups, RangeMoves).
	groups       *prometheus.GaugeVec   // state: active, draining
	moveSteps    *prometheus.CounterVec // step: begun, fenced, committed, aborted
	liveMoves    prometheus.Gauge
	moveStepAge  prometheus.Gauge
	moveTTL      prometheus.Gauge
	moveDeclines *prometheus.CounterVec // reason: placement.Reasons
	// groupLoad and groupCapacity are labelled by group id: groups are
	// operator-created and at most MaxGroups, so the label set is bounded;
	// a removed group's series are deleted.
	groupLoad, groupCapacity *prometheus.GaugeVec
	groupSeries              map[string]bool
}

// The move events, the fixed label values of hotsplit_move_steps_total.
var moveEvents = []string{"planned", "begun", "fenced", "committed", "aborted"}

// NewMetrics creates the FSM metrics and registers them with reg (nil: not
// registered, e.g. in tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		splits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_splits_total",
			Help: "Splits applied, by split origin (manual or the detector's key choice)."}, []string{"origin"}),
		merges: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_merges_total",
			Help: "Merges applied, by origin (manual: an operator's MergeRange; automatic: a merge op's step)."}, []string{"origin"}),
		opsPlanned: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_ops_planned_total",
			Help: "Split ops planned by the detector."}),
		opsDone: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_ops_done_total",
			Help: "Split ops whose final step applied."}),
		opsPaused: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_ops_paused_total",
			Help: "Split ops paused by the auto-split switch."}),
		opsAborted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_ops_aborted_total",
			Help: "Split and move ops aborted, by reason."}, []string{"reason"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_skips_total",
			Help: "Eligible routes not split in a column (declined or suppressed), by reason."}, []string{"reason"}),
		columns: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_columns_committed_total",
			Help: "Load columns applied."}),
		droppedRows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_column_dropped_rows_total",
			Help: "Column rows dropped: by the leader while assembling (stage=leader) or in apply because the route no longer exists (stage=apply)."},
			[]string{"stage"}),
		eligible: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_candidates_eligible",
			Help: "Routes at or over candidateWindows hot columns in a row after the last column (planned, in cooldown, declined or suppressed)."}),
		fence: prometheus.NewCounter(prometheus.CounterOpts{Name: "hotsplit_fence_violations_total",
			Help: "Catalog changes (SplitRange, MergeRange) refused because their commit HLC did not move forward."}),
		applySeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hotsplit_fsm_apply_seconds",
			Help:    "Time to apply one log entry, by command.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12)}, []string{"command"}),
		liveRoutes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_live_routes", Help: "Routes in the catalog."}),
		tracked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_tracked_routes",
			Help: "Routes with detector state (counter, cooldown or recent explanation)."}),
		liveOps:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_live_ops", Help: "Ops (split, merge or move) PENDING, RUNNING or PAUSED."}),
		switchOn: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_autosplit_enabled", Help: "1 when the auto-split switch is on."}),
		mergeDecisions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_merge_decisions_total",
			Help: "Pairs of cold routes the detector planned to merge (merge_planned) or declined, by reason, per column."}, []string{"reason"}),
		mergeOps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_merge_ops_total",
			Help: "Merge ops planned, paused or aborted (an applied one counts in hotsplit_merges_total)."}, []string{"event"}),
		groups: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hotsplit_shard_groups",
			Help: "Shard groups, by state (cluster version 4)."}, []string{"state"}),
		moveSteps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_move_steps_total",
			Help: "Steps of moves between shard groups applied: begun, fenced, committed, aborted."}, []string{"step"}),
		liveMoves: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_moves_live",
			Help: "Moves between shard groups begun and not yet committed or aborted."}),
		moveStepAge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_move_oldest_step_age_seconds",
			Help: "How long the running move that has waited longest has waited in its current step, as of the last applied entry (0: none)."}),
		moveDeclines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hotsplit_move_declines_total",
			Help: "Columns in which an overloaded or draining group moved nothing, by reason (automatic placement)."}, []string{"reason"}),
		groupLoad: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hotsplit_group_load",
			Help: "Each shard group's load in the last complete column, weighted ops/min (cluster version 4; label: group id, at most 64 groups)."}, []string{"group"}),
		groupCapacity: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hotsplit_group_capacity",
			Help: "Each shard group's capacity, weighted ops/min (cluster version 4; label: group id)."}, []string{"group"}),
		groupSeries: map[string]bool{},
		moveTTL: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hotsplit_move_ttl_seconds",
			Help: "The configured move_ttl_ms, in seconds: a step that waits this long is aborted."}),
	}
	// Pre-create every label value so each series exists from the start.
	for _, v := range api.SplitOrigin_value {
		if o := api.SplitOrigin(v); o != api.SplitOrigin_SPLIT_ORIGIN_UNSPECIFIED {
			m.splits.WithLabelValues(originLabel(o))
		}
	}
	for _, o := range mergeOrigins {
		m.merges.WithLabelValues(o)
	}
	for _, v := range api.OpAbortReason_value {
		if r := api.OpAbortReason(v); r != api.OpAbortReason_OP_ABORT_REASON_UNSPECIFIED {
			m.opsAborted.WithLabelValues(abortLabel(r))
		}
	}
	for _, v := range api.Reason_value {
		switch r := api.Reason(v); {
		case isMergeReason(r):
			m.mergeDecisions.WithLabelValues(reasonLabel(r))
		case r != api.Reason_REASON_UNSPECIFIED:
			m.skips.WithLabelValues(reasonLabel(r))
		}
	}
	for _, e := range mergeOpEvents {
		m.mergeOps.WithLabelValues(e)
	}
	for _, e := range moveEvents {
		m.moveSteps.WithLabelValues(e)
	}
	for _, r := range placement.Reasons() {
		m.moveDeclines.WithLabelValues(r.String())
	}
	for _, st := range []string{"active", "draining"} {
		m.groups.WithLabelValues(st)
	}
	m.droppedRows.WithLabelValues("leader")
	m.droppedRows.WithLabelValues("apply")
	for _, k := range commandKinds {
		m.applySeconds.WithLabelValues(k)
	}
	if reg != nil {
		reg.MustRegister(m.splits, m.merges, m.opsPlanned, m.opsDone, m.opsPaused, m.opsAborted, m.skips, m.columns,
			m.droppedRows, m.fence, m.applySeconds, m.liveRoutes, m.tracked, m.liveOps, m.switchOn, m.eligible,
			m.mergeDecisions, m.mergeOps, m.groups, m.moveSteps, m.liveMoves, m.moveStepAge, m.moveTTL, m.moveDeclines, m.groupLoad, m.groupCapacity)
	}
	return m
}

// Label values are the enum names without their prefix, lower case:
// "isolation_compound", "route_gone", "no_split_key".
func originLabel(o api.SplitOrigin) string { return enumLabel(o.String(), "SPLIT_ORIGIN_") }
func abortLabel(r api.OpAbortReason) string {
	return enumLabel(r.String(), "OP_ABORT_REASON_")
}
func reasonLabel(r api.Reason) string { return enumLabel(r.String(), "REASON_") }

func enumLabel(name, prefix string) string {
	if len(name) > len(prefix) && name[:len(prefix)] == prefix {
		name = name[len(prefix):]
	}
	b := []byte(name)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func (m *Metrics) start() time.Time {
	if m == nil {
		return time.Time{}
	}
	return time.Now()
}

func (m *Metrics) applied(kind string, t0 time.Time) {
	if m == nil {
		return
	}
	m.applySeconds.WithLabelValues(kind).Observe(time.Since(t0).Seconds())
}

// observeState sets the gauges from a newly published state.
func (m *Metrics) observeState(s *State) {
	if m == nil {
		return
	}
	if s.cat != nil {
		m.liveRoutes.Set(float64(s.cat.Len()))
	}
	if s.det != nil {
		m.tracked.Set(float64(s.det.Len()))
	}
	live, moves, oldest := 0, 0, uint64(0)
	now := hlc.Physical(s.lastHLC)
	for _, op := range s.ops {
		if !isLive(op) {
			continue
		}
		live++
		if isMoveOp(op) {
			moves++
			if op.GetState() == api.OpState_OP_STATE_RUNNING {
				oldest = max(oldest, now-min(now, hlc.Physical(op.GetStepHlc())))
			}
		}
	}
	m.liveOps.Set(float64(live))
	m.liveMoves.Set(float64(moves))
	m.moveStepAge.Set(float64(oldest) / 1000)
	m.moveTTL.Set(float64(s.cfg.GetMoveTtlMs()) / 1000)
	var active, draining int
	for _, g := range s.groups {
		if g.GetState() == api.GroupState_GROUP_STATE_DRAINING {
			draining++
		} else {
			active++
		}
	}
	m.groups.WithLabelValues("active").Set(float64(active))
	m.groups.WithLabelValues("draining").Set(float64(draining))
	on := 0.0
	if s.sw.GetEnabled() {
		on = 1
	}
	m.switchOn.Set(on)
}

// candidates sets the eligible-candidates gauge after a column applied.
func (m *Metrics) candidates(det *detector.State, windows uint32) {
	if m == nil {
		return
	}
	n := 0
	for _, t := range det.Tracked() {
		if t.ConsecutiveOver >= windows {
			n++
		}
	}
	m.eligible.Set(float64(n))
}

func (m *Metrics) split(o api.SplitOrigin) {
	if m != nil {
		m.splits.WithLabelValues(originLabel(o)).Inc()
	}
}

// The merge origins, the fixed label values of hotsplit_merges_total.
const (
	mergeOriginManual    = "manual"
	mergeOriginAutomatic = "automatic"
)

var mergeOrigins = []string{mergeOriginManual, mergeOriginAutomatic}

func (m *Metrics) merge(origin string) {
	if m != nil {
		m.merges.WithLabelValues(origin).Inc()
	}
}

func (m *Metrics) opPlanned() {
	if m != nil {
		m.opsPlanned.Inc()
	}
}

func (m *Metrics) opDone() {
	if m != nil {
		m.opsDone.Inc()
	}
}

func (m *Metrics) opPaused() {
	if m != nil {
		m.opsPaused.Inc()
	}
}

func (m *Metrics) opAborted(r api.OpAbortReason) {
	if m != nil {
		m.opsAborted.WithLabelValues(abortLabel(r)).Inc()
	}
}

func (m *Metrics) skip(r api.Reason) {
	if m != nil {
		m.skips.WithLabelValues(reasonLabel(r)).Inc()
	}
}

func (m *Metrics) column(leaderDropped, applyDropped uint64) {
	if m == nil {
		return
	}
	m.columns.Inc()
	m.droppedRows.WithLabelValues("leader").Add(float64(leaderDropped))
	m.droppedRows.WithLabelValues("apply").Add(float64(applyDropped))
}

func (m *Metrics) fenceViolation() {
	if m != nil {
		m.fence.Inc()
	}
}

// The merge op events, the fixed label values of hotsplit_merge_ops_total.
const (
	mergeOpPlanned = "planned"
	mergeOpPaused  = "paused"
	mergeOpAborted = "aborted"
)

var mergeOpEvents = []string{mergeOpPlanned, mergeOpPaused, mergeOpAborted}

// isMergeReason reports whether r explains a merge decision (the label
// set of hotsplit_merge_decisions_total), not a split.
func isMergeReason(r api.Reason) bool {
	switch r {
	case api.Reason_REASON_MERGE_PLANNED, api.Reason_REASON_MERGE_DELAY, api.Reason_REASON_MERGE_MARGIN,
		api.Reason_REASON_MERGE_SUPPRESSED, api.Reason_REASON_MERGE_BUDGET:
		return true
	}
	return false
}

func (m *Metrics) mergeDecision(r api.Reason) {
	if m != nil {
		m.mergeDecisions.WithLabelValues(reasonLabel(r)).Inc()
	}
}

func (m *Metrics) mergeOp(event string) {
	if m != nil {
		m.mergeOps.WithLabelValues(event).Inc()
	}
}

// moveStep counts a move's step (begun, fenced, committed, aborted).
func (m *Metrics) moveStep(event string) {
	if m != nil {
		m.moveSteps.WithLabelValues(event).Inc()
	}
}

// moveDeclined counts a column in which a group moved nothing.
func (m *Metrics) moveDeclined(reason string) {
	if m != nil {
		m.moveDeclines.WithLabelValues(reason).Inc()
	}
}

// groupLoads sets each group's load in a complete column and its capacity,
// and drops the series of groups that are gone. Apply calls it, so it
// runs on one goroutine.
func (m *Metrics) groupLoads(groups []*api.ShardGroup, loads map[uint64]uint64) {
	if m == nil {
		return
	}
	live := make(map[string]bool, len(groups))
	for _, g := range groups {
		id := strconv.FormatUint(g.GetGroupId(), 10)
		live[id] = true
		m.groupLoad.WithLabelValues(id).Set(float64(loads[g.GetGroupId()]))
		m.groupCapacity.WithLabelValues(id).Set(float64(g.GetCapacity()))
	}
	for id := range m.groupSeries {
		if !live[id] {
			m.groupLoad.DeleteLabelValues(id)
			m.groupCapacity.DeleteLabelValues(id)
		}
	}
	m.groupSeries = live
}
