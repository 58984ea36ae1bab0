package fsm

import (
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// Column limits (docs/design.md#limits-and-bad-input). The leader validates
// reports before building a column; the FSM checks again because a log entry is
// outside bytes too.
const (
	maxTopKeys = 256
	// maxSamples bounds a row's merged operation sample (the leader keeps
	// at most 128).
	maxSamples = 256
)

// applyObserveColumn runs the detector on one committed column: tracked
// state, explanations and last_column_at advance, and every plan becomes a
// PENDING op with the next op id.
func (a *applier) applyObserveColumn(c *api.ObserveColumn) *api.CommandResult {
	s := a.s
	if c.GetWindowStartMs() < s.lastColumnAtMs {
		return fail(api.ResultCode_RESULT_CODE_STALE_COLUMN, "window_start_ms %d is before the last committed column's end %d",
			c.GetWindowStartMs(), s.lastColumnAtMs)
	}
	if r := checkColumn(c, s.clusterVersion); r != nil {
		return r
	}
	col := toColumn(c)
	if err := col.Validate(); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "%v", err)
	}
	dropped := a.dropDeadRows(&col)
	det, plans := detector.Observe(detector.Input{
		Config:      s.detCfg,
		Catalog:     s.cat,
		LiveOps:     liveFootprints(s.ops),
		NowMs:       a.now,
		Enabled:     s.sw.GetEnabled(),
		NextOpID:    s.nextOpID,
		Rules:       rulesAt(s.clusterVersion),
		CreatedAtMs: routeCreatedAtMs,
	}, s.det, col)
	s.det = det
	a.heatColumn(c)
	s.lastColumnAtMs = c.GetAtMs()
	s.reporters = c.GetReporters()
	a.placeColumn(col, c.GetReporters())
	a.f.m.candidates(det, s.detCfg.CandidateWindows)

	res := &api.CommandResult{}
	for _, p := range plans {
		id := s.nextOpID
		s.nextOpID++ // consumed even by a skipped plan, so ids match the detector's
		if p.Kind == detector.PlanMerge {
			if op := a.planMerge(p, id); op != nil {
				res.PlannedOpIds = append(res.PlannedOpIds, op.GetOpId())
			}
			continue
		}
		op, err := a.opFromPlan(p, id)
		if err != nil {
			// The detector plans only live routes with keys inside them;
			// a plan that is not is a detector bug. Every replica skips it
			// alike, so the states stay equal.
			a.f.log.Error("fsm: detector plan skipped", "route_id", p.RouteID, "op_id", p.OpID, "err", err)
			continue
		}
		a.putOp(op)
		res.PlannedOpIds = append(res.PlannedOpIds, op.GetOpId())
		d := &api.Decision{Kind: api.DecisionKind_DECISION_KIND_PLANNED, RouteId: p.RouteID, OpId: op.GetOpId(),
			Origin: op.GetOrigin(), Reason: api.Reason_REASON_PLANNED, Score: p.Score, SplitKeys: op.GetSplitKeys()}
		if s.Has(clusterversion.DecisionExplanations) {
			// Why this key, kept after the route is gone.
			d.Explanation = explanationToProto(p.Explanation)
		}
		a.decide(d)
		a.f.m.opPlanned()
		a.f.log.Info("fsm: op planned", "op_id", op.GetOpId(), "route_id", p.RouteID, "split_origin", originLabel(op.GetOrigin()),
			"score", p.Score, "consecutive_over", p.Explanation.ConsecutiveOver, "steps", len(p.Keys))
	}
	a.recordSkips(col, det)
	a.recordMergeDeclines(col, det)
	a.f.m.column(c.GetDroppedRows(), dropped)
	if s.Has(clusterversion.ScheduledStepChange) {
		if next := promoteStep(s.cfg, c.GetWindowStartMs()); next != s.cfg {
			a.f.log.Info("fsm: step change took effect", "step_ms", next.GetStepMs(), "window_start_ms", c.GetWindowStartMs())
			s.cfg = next
		}
	}
	return res
}

// checkColumn rejects a malformed column before anything applies: the limits
// (docs/design.md#limits-and-bad-input) and sorted reporters here, the window
// and one row per route in detector.Column.Validate. Before SampledEvidence is
// on its fields (samples, sample rates, raw counts, variances) are refused: no
// leader emits them there.
func checkColumn(c *api.ObserveColumn, version uint32) *api.CommandResult {
	invalid := func(format string, args ...any) *api.CommandResult {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, format, args...)
	}
	for i, r := range c.GetReporters() {
		if r == "" || (i > 0 && r <= c.GetReporters()[i-1]) {
			return invalid("reporters[%d]: %q empty, unsorted or repeated", i, r)
		}
	}
	if r := checkRouteLoads(c, version); r != nil {
		return r
	}
	if r := checkEvidenceBytes(c, version); r != nil {
		return r
	}
	for i, row := range c.GetRows() {
		if len(row.GetBuckets()) > catalog.MaxBuckets {
			return invalid("rows[%d].buckets: %d above %d", i, len(row.GetBuckets()), catalog.MaxBuckets)
		}
		if len(row.GetTopKeys()) > maxTopKeys {
			return invalid("rows[%d].top_keys: %d above %d", i, len(row.GetTopKeys()), maxTopKeys)
		}
		if !clusterversion.SampledEvidence.EnabledAt(version) && (len(row.GetSamples()) > 0 || row.GetSampleRate() != 0 || row.GetSampledTotal() != 0 || row.GetSampledVariance() != 0) {
			return invalid("rows[%d].samples: needs cluster version %d, the cluster is at %d", i, clusterversion.SampledEvidence.Version(), version)
		}
		if len(row.GetSamples()) > maxSamples {
			return invalid("rows[%d].samples: %d above %d", i, len(row.GetSamples()), maxSamples)
		}
		for j, k := range row.GetSamples() {
			if len(k.GetKey()) > catalog.MaxKeyLen {
				return invalid("rows[%d].samples[%d].key: %d bytes above %d", i, j, len(k.GetKey()), catalog.MaxKeyLen)
			}
		}
		for j, k := range row.GetTopKeys() {
			if !clusterversion.SampledEvidence.EnabledAt(version) && (k.GetSampledReads() != 0 || k.GetSampledWrites() != 0 || k.GetVariance() != 0) {
				return invalid("rows[%d].top_keys[%d]: sampled counts need cluster version %d, the cluster is at %d", i, j, clusterversion.SampledEvidence.Version(), version)
			}
			if len(k.GetKey()) > catalog.MaxKeyLen {
				return invalid("rows[%d].top_keys[%d].key: %d bytes above %d", i, j, len(k.GetKey()), catalog.MaxKeyLen)
			}
			if k.GetLower() > k.GetUpper() {
				return invalid("rows[%d].top_keys[%d]: lower %d above upper %d", i, j, k.GetLower(), k.GetUpper())
			}
		}
	}
	return nil
}

// checkRouteLoads: route_loads only with ColumnRouteLoads on, well formed,
// and every row (its evidence) listed there in route id order with the
// same counts. A column without route_loads stays valid at version 3: the
// leader may have assembled it just before the version rose.
func checkRouteLoads(c *api.ObserveColumn, version uint32) *api.CommandResult {
	loads := c.GetRouteLoads()
	if loads == nil {
		return nil
	}
	if !clusterversion.ColumnRouteLoads.EnabledAt(version) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "route_loads: needs cluster version %d, the cluster is at %d", clusterversion.ColumnRouteLoads.Version(), version)
	}
	if err := loads.Check(); err != nil {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "%v", err)
	}
	rows := c.GetRows()
	i := 0
	for _, l := range loads.All() {
		if i == len(rows) {
			break
		}
		r := rows[i]
		if r.GetRouteId() < l.RouteID {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "rows[%d]: route %d is not in route_loads, or rows are not sorted by route id", i, r.GetRouteId())
		}
		if r.GetRouteId() > l.RouteID {
			continue
		}
		if (api.RouteLoad{RouteID: l.RouteID, Reads: r.GetReads(), Writes: r.GetWrites(), ReadBytes: r.GetReadBytes(), WriteBytes: r.GetWriteBytes()}) != l {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "rows[%d]: counts of route %d differ from route_loads", i, r.GetRouteId())
		}
		i++
	}
	if i < len(rows) {
		return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "rows[%d]: route %d is not in route_loads, or rows are not sorted by route id", i, rows[i].GetRouteId())
	}
	return nil
}

// checkEvidenceBytes: with BoundedEvidence on, a column that lists
// route_loads (one assembled at version 3) holds at most
// api.MaxColumnEvidenceBytes of rows, measured as the sum of each row's
// encoded size. A column without route_loads was assembled before the
// version rose (checkRouteLoads) and applies unbounded, as its version's
// replicas applied it.
func checkEvidenceBytes(c *api.ObserveColumn, version uint32) *api.CommandResult {
	if c.GetRouteLoads() == nil || !clusterversion.BoundedEvidence.EnabledAt(version) {
		return nil
	}
	total := 0
	for i, row := range c.GetRows() {
		if total += proto.Size(row); total > api.MaxColumnEvidenceBytes {
			return fail(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, "rows[%d]: the rows' evidence passes %d bytes, the limit of %s", i, api.MaxColumnEvidenceBytes, clusterversion.BoundedEvidence)
		}
	}
	return nil
}

// toColumn converts the entry to the detector's Column: one row per entry
// of route_loads (evidence from rows attached) when the column has them —
// a complete column, in which an absent route had no load — else one per
// row. The row slices are shared with the entry, which nothing
// else holds. c passed checkColumn.
func toColumn(c *api.ObserveColumn) detector.Column {
	if loads := c.GetRouteLoads(); loads != nil {
		col := detector.Column{WindowStartMs: c.GetWindowStartMs(), AtMs: c.GetAtMs(), Rows: make([]detector.Row, 0, loads.Len()), Complete: true}
		rows := c.GetRows()
		for _, l := range loads.All() {
			if len(rows) > 0 && rows[0].GetRouteId() == l.RouteID {
				col.Rows = append(col.Rows, toRow(rows[0]))
				rows = rows[1:]
				continue
			}
			col.Rows = append(col.Rows, detector.Row{RouteID: l.RouteID, Reads: l.Reads, Writes: l.Writes, ReadBytes: l.ReadBytes, WriteBytes: l.WriteBytes})
		}
		return col
	}
	col := detector.Column{WindowStartMs: c.GetWindowStartMs(), AtMs: c.GetAtMs(), Rows: make([]detector.Row, len(c.GetRows()))}
	for i, r := range c.GetRows() {
		col.Rows[i] = toRow(r)
	}
	return col
}

// toRow converts one column row, its evidence included.
func toRow(r *api.ColumnRow) detector.Row {
	row := detector.Row{
		RouteID: r.GetRouteId(), Reads: r.GetReads(), Writes: r.GetWrites(),
		ReadBytes: r.GetReadBytes(), WriteBytes: r.GetWriteBytes(),
		Buckets: r.GetBuckets(), TopKDegraded: r.GetTopKDegraded(), SampleRate: r.GetSampleRate(),
		SampledTotal: r.GetSampledTotal(), SampledVariance: r.GetSampledVariance(),
	}
	if len(r.GetTopKeys()) > 0 {
		row.TopKeys = make([]detector.KeyEstimate, len(r.GetTopKeys()))
		for j, k := range r.GetTopKeys() {
			row.TopKeys[j] = detector.KeyEstimate{Key: k.GetKey(), Lower: k.GetLower(), Upper: k.GetUpper(),
				SampledReads: k.GetSampledReads(), SampledWrites: k.GetSampledWrites(), Variance: k.GetVariance()}
		}
	}
	if len(r.GetSamples()) > 0 {
		row.Samples = make([]detector.WeightedKey, len(r.GetSamples()))
		for j, k := range r.GetSamples() {
			row.Samples[j] = detector.WeightedKey{Key: k.GetKey(), Weight: k.GetWeight()}
		}
	}
	return row
}

// dropDeadRows removes the rows of routes that no longer exist (they split
// after the reporters closed the column) and returns how many it dropped.
func (a *applier) dropDeadRows(col *detector.Column) uint64 {
	live := col.Rows[:0]
	for _, r := range col.Rows {
		if _, ok := a.s.cat.Route(r.RouteID); ok {
			live = append(live, r)
		}
	}
	dropped := uint64(len(col.Rows) - len(live))
	col.Rows = live
	return dropped
}

// opFromPlan turns a detector plan into a PENDING op targeting the planned
// route as it is now.
func (a *applier) opFromPlan(p detector.Plan, id uint64) (*api.Op, error) {
	if p.OpID != id {
		return nil, fmt.Errorf("plan op id %d, expected %d", p.OpID, id)
	}
	route, live := a.s.cat.Route(p.RouteID)
	if !live {
		return nil, fmt.Errorf("route %d is not live", p.RouteID)
	}
	if len(p.Keys) == 0 {
		return nil, fmt.Errorf("no split keys")
	}
	if _, err := a.s.cat.CheckSplit(p.RouteID, p.Keys[0]); err != nil {
		return nil, fmt.Errorf("first key: %w", err)
	}
	return &api.Op{
		OpId:          p.OpID,
		ParentRouteId: p.RouteID,
		SplitKeys:     p.Keys,
		Origin:        api.SplitOrigin(p.Origin),
		NextStep:      1,
		State:         api.OpState_OP_STATE_PENDING,
		CreatedHlc:    a.nowHLC,
		UpdatedHlc:    a.nowHLC,
		TargetRouteId: route.ID,
		TargetStart:   route.Start,
		TargetEnd:     route.End,
		RouteDelta:    int32(p.RouteDelta),
		Score:         p.Score,
		Actor:         "detector",
	}, nil
}

// recordSkips counts this column's declines and suppressions and writes a
// decision only for an explanation that is new (Repeats == 0), so a route
// declined for the same reason column after column does not flood the
// ring. Rows are visited in route-id order; only a route in the column can
// have become eligible in it.
func (a *applier) recordSkips(col detector.Column, det *detector.State) {
	ids := make([]uint64, len(col.Rows))
	for i, r := range col.Rows {
		ids[i] = r.RouteID
	}
	slices.Sort(ids)
	for _, id := range ids {
		t, tracked := det.Get(id)
		e := t.Explanation
		if !tracked || e.AtMs != col.AtMs {
			continue
		}
		kind := skipKind(e.Reason)
		if kind == api.DecisionKind_DECISION_KIND_UNSPECIFIED {
			continue
		}
		reason := api.Reason(e.Reason)
		a.f.m.skip(reason)
		if e.Repeats != 0 {
			continue
		}
		d := &api.Decision{Kind: kind, RouteId: id, Reason: reason, Origin: api.SplitOrigin(e.Origin), Score: e.Score, SplitKeys: e.SplitKeys}
		if e.IsolationReason != detector.ReasonUnspecified {
			d.Detail = "isolation not used: " + reasonLabel(api.Reason(e.IsolationReason))
		}
		if a.s.Has(clusterversion.DecisionExplanations) {
			d.Explanation = explanationToProto(e)
		}
		a.decide(d)
		a.f.log.Info("fsm: route not split", "route_id", id, "reason", reasonLabel(reason), "score", e.Score,
			"consecutive_over", e.ConsecutiveOver, "suppressed", kind == api.DecisionKind_DECISION_KIND_SUPPRESSED)
	}
}

// skipKind classifies an explanation: SUPPRESSED when the switch held back
// an eligible route, DECLINED for every other reason a hot route was not
// planned (no split key, a guardrail, cooldown, not ACTIVE, …), nothing
// for a route still counting (or holding its count in the hold band),
// cooled below the threshold, planned, or waiting for its live op (the op
// is the decision).
func skipKind(r detector.Reason) api.DecisionKind {
	switch r {
	case detector.ReasonUnspecified, detector.ReasonPlanned, detector.ReasonCounting, detector.ReasonInLiveOp,
		detector.ReasonHoldBand, detector.ReasonBelowThreshold:
		return api.DecisionKind_DECISION_KIND_UNSPECIFIED
	case detector.ReasonSuppressedDisable:
		return api.DecisionKind_DECISION_KIND_SUPPRESSED
	}
	return api.DecisionKind_DECISION_KIND_DECLINED
}
