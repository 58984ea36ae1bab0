package columns

import (
	"cmp"
	"slices"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// entryStats describes an assembled entry for metrics and logs.
type entryStats struct {
	// deadRows are reporter rows dropped because their route was no longer
	// live, on admission or when the entry was assembled.
	deadRows uint64
	// inputs are the reporter rows merged (for rows dropped with a refused
	// column).
	inputs uint64
	// Under clusterversion.BoundedEvidence: the hot rows given evidence, their
	// encoded bytes, and the hot rows left with their counts alone.
	evidenceRows, evidenceBytes, withoutEvidence int
}

// mayPlan says whether a hot route may become a split candidate in the
// column being assembled (see candidacyOf); nil: every hot route may.
type mayPlan func(routeID uint64) bool

// entry assembles the ObserveColumn of a sealed sum against the current
// catalog and detector config (docs/design.md#the-load-pipeline): rows scoring at or above the
// threshold with their evidence, the belowRows highest rows under it
// without evidence (display only), per-group totals over every live row,
// and the count of rows dropped because their route is gone. The output
// does not depend on the order the contributions arrived in (unless a row
// exceeds maxMergeKeys, which marks it degraded): rows by route id, groups
// by group id, reporters sorted. Buckets and keys share the sum's arenas.
// Without clusterversion.SampledEvidence at version its evidence — samples, sample
// rates, raw counts and variances — is left out: replicas of that version
// refuse it. With clusterversion.ColumnRouteLoads the counts of every live row go into
// route_loads and rows hold only the hot ones (no display rows: the loads
// cover them). With clusterversion.BoundedEvidence the rows' encoded bytes stay within
// api.MaxColumnEvidenceBytes: hot rows get their evidence in the order of
// evidenceOrder (those plan says may be planned first, then by score)
// until the next one would not fit; the rest count only through
// route_loads.
func (c *columnSum) entry(cat *catalog.Catalog, dc detector.Config, belowRows int, version uint32, plan mayPlan) (*api.ObserveColumn, entryStats) {
	sampled := clusterversion.SampledEvidence.EnabledAt(version)
	var loads []api.RouteLoad
	if clusterversion.ColumnRouteLoads.EnabledAt(version) {
		loads = make([]api.RouteLoad, 0, c.rowCount())
		belowRows = 0
	}
	bounded := loads != nil && clusterversion.BoundedEvidence.EnabledAt(version)
	stats := entryStats{deadRows: c.deadRows.Load()}
	var hot, below []scoredRow
	groups := map[uint64]*api.GroupLoad{}
	for si := range c.shards {
		sh := &c.shards[si]
		for i := range sh.rows {
			r := &sh.rows[i]
			stats.inputs += r.inputs
			route, live := cat.Route(r.id)
			if !live {
				stats.deadRows += r.inputs
				continue
			}
			g := groups[route.GroupID]
			if g == nil {
				g = &api.GroupLoad{GroupId: route.GroupID}
				groups[route.GroupID] = g
			}
			g.Reads = saturate.Add(g.Reads, r.reads)
			g.Writes = saturate.Add(g.Writes, r.writes)
			g.ReadBytes = saturate.Add(g.ReadBytes, r.readBytes)
			g.WriteBytes = saturate.Add(g.WriteBytes, r.writeBytes)
			if loads != nil {
				loads = append(loads, api.RouteLoad{RouteID: r.id, Reads: r.reads, Writes: r.writes, ReadBytes: r.readBytes, WriteBytes: r.writeBytes})
			}
			s := scoredRow{row: r, shard: sh, score: detector.Score(r.reads, r.writes, dc, c.stepMs)}
			if s.score >= dc.Threshold {
				hot = append(hot, s)
			} else {
				below = append(below, s)
			}
		}
	}
	slices.SortFunc(below, func(a, b scoredRow) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.row.id, b.row.id)
	})
	below = below[:min(len(below), belowRows)]

	rows := make([]*api.ColumnRow, 0, len(hot)+len(below))
	if bounded {
		evidenceOrder(hot, plan)
		stats.evidenceRows, stats.evidenceBytes = len(hot), 0
		for i, s := range hot {
			row := s.evidence(sampled)
			n := proto.Size(row)
			if stats.evidenceBytes+n > api.MaxColumnEvidenceBytes {
				stats.evidenceRows = i
				break
			}
			stats.evidenceBytes += n
			rows = append(rows, row)
		}
		stats.withoutEvidence = len(hot) - stats.evidenceRows
	} else {
		for _, s := range hot {
			rows = append(rows, s.evidence(sampled))
		}
	}
	for _, s := range below {
		rows = append(rows, s.row.counts())
	}
	slices.SortFunc(rows, func(a, b *api.ColumnRow) int { return cmp.Compare(a.RouteId, b.RouteId) })

	totals := make([]*api.GroupLoad, 0, len(groups))
	for _, g := range groups {
		totals = append(totals, g)
	}
	slices.SortFunc(totals, func(a, b *api.GroupLoad) int { return cmp.Compare(a.GroupId, b.GroupId) })
	var routeLoads *api.RouteLoads
	if loads != nil {
		slices.SortFunc(loads, func(a, b api.RouteLoad) int { return cmp.Compare(a.RouteID, b.RouteID) })
		routeLoads = api.NewRouteLoads(loads)
	}

	return &api.ObserveColumn{
		RouteLoads:    routeLoads,
		WindowStartMs: c.windowStartMs,
		AtMs:          c.windowStartMs + c.stepMs,
		StepMs:        c.stepMs,
		Rows:          rows,
		GroupTotals:   totals,
		Reporters:     c.sortedReporters(),
		DroppedRows:   stats.deadRows,
	}, stats
}

// scoredRow is a merged row with its score, while an entry is assembled;
// tier orders evidence (evidenceOrder).
type scoredRow struct {
	row   *rowSum
	shard *sumShard
	score uint64
	tier  int
}

// evidence is the row's counts with its evidence.
func (s scoredRow) evidence(sampled bool) *api.ColumnRow {
	r := s.row
	row := r.counts()
	if !r.bucketsMixed && r.bucketLen > 0 {
		end := r.bucketOff + r.bucketLen
		row.Buckets = s.shard.buckets[r.bucketOff:end:end]
	}
	row.TopKeys = s.shard.estimates(r, mergedTopKeys, sampled)
	row.TopKDegraded = r.degraded
	if sampled {
		row.Samples = r.sample.weighted()
		row.SampleRate = r.sampleRate
		if !r.sampledUnknown {
			row.SampledTotal, row.SampledVariance = r.sampledTotal, r.sampledVar
		}
	}
	return row
}

// evidenceOrder sorts hot rows into the order their evidence goes into a
// bounded entry: the routes plan says may be planned in this column first
// (only a candidate's evidence is read by the detector), each group by
// score, highest first — the detector's own order — then by route id.
func evidenceOrder(hot []scoredRow, plan mayPlan) {
	for i := range hot {
		if plan != nil && !plan(hot[i].row.id) {
			hot[i].tier = 1
		}
	}
	slices.SortFunc(hot, func(a, b scoredRow) int {
		if c := cmp.Compare(a.tier, b.tier); c != 0 {
			return c
		}
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(a.row.id, b.row.id)
	})
}

// candidacyOf is the mayPlan of a column [windowStartMs, atMs) under the
// replicated state st: a hot route may become a candidate unless what the
// detector knows rules it out — its counter cannot reach the candidate
// windows with this column, it is in cooldown at the column's end, it is
// the target of a live op, or it is not active. It is a hint for ordering
// evidence only: the state that applies the entry may have moved on, and
// then a candidate without evidence is declined for this column
// (no_split_key) and gets it in a later one.
func candidacyOf(st State, windowStartMs, atMs uint64) mayPlan {
	det := st.Detector()
	cfg := st.DetectorConfig()
	cat := st.Catalog()
	gap := det.LastColumnAtMs() != 0 && det.LastColumnAtMs() != windowStartMs
	var inOp []uint64
	for _, op := range st.LiveOps() {
		inOp = append(inOp, op.GetTargetRouteId())
	}
	slices.Sort(inOp)
	return func(id uint64) bool {
		if route, ok := cat.Route(id); !ok || route.State != catalog.StateActive {
			return false
		}
		if _, ok := slices.BinarySearch(inOp, id); ok {
			return false
		}
		t, tracked := det.Get(id)
		var counter uint64
		if tracked && !gap {
			counter = uint64(t.ConsecutiveOver)
		}
		return counter+1 >= uint64(cfg.CandidateWindows) && (!tracked || t.CooldownUntilMs <= atMs)
	}
}
