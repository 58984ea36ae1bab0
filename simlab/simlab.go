package simlab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/columns"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/keyviz"
	"github.com/hotsplit/hotsplit/sim"
)

// ErrInvalidSpec is wrapped by Run when a Spec field is out of range.
var ErrInvalidSpec = errors.New("invalid simlab spec")

// Spec describes one run.
type Spec struct {
	// Workload generates the operations; required.
	Workload sim.Workload
	// Config is the cluster's bootstrap config (nil or zero fields: the
	// defaults of the cluster version).
	Config *api.Config
	// ClusterVersion is the replicated version, so the rules, under test
	// (default fsm.SupportedVersion).
	ClusterVersion uint32
	// InitialSplits bound the bootstrap routes (none: one route for
	// everything). From cluster version 3 they are an operator's split
	// keys, which automatic merges never remove — unless
	// InitialRoutesAutomatic.
	InitialSplits [][]byte
	// InitialRoutesAutomatic models the initial routes as the pieces
	// automatic splits left behind (a cluster that has grown) rather than
	// an operator's pre-split: their starts carry no operator mark (the
	// bootstrapped state is restored without them), so automatic merges may
	// remove those boundaries like any automatic split's.
	InitialRoutesAutomatic bool
	// Nodes is the number of reporters (default 3); operation i is served
	// by node i mod Nodes.
	Nodes int
	// Load is the workload's weighted load per column in multiples of the
	// threshold (required, > 0): it sets the operations per column.
	Load float64
	// Columns is how many load columns the run lasts (required).
	Columns int
	// Seed fixes the operation sequence and the samplers' sampling.
	Seed uint64
	// SampleRate and TopK configure the samplers (0: keyviz defaults).
	SampleRate uint32
	TopK       int
	// PhaseEvery, when set, is how often the workload changes shape (in
	// operation time): a balance split within three columns after a change
	// is not counted for empty children (its children's load moved for
	// another reason).
	PhaseEvery time.Duration
	// Watch lists keys whose isolation ([H, H·0x00) becomes a route) and
	// isolation plans are reported.
	Watch [][]byte
	// GroupCapacities, when set (cluster version 4), bootstraps one shard
	// group per entry (ids 1..n, the initial routes spread over them in key
	// order) with that capacity in weighted ops/min. Node i is a data node
	// of group i mod n + 1 (Nodes at least n) and serves only its group's
	// routes; nodes acknowledge every move as soon as a column ends (a copy
	// and a catch-up take one column each).
	GroupCapacities []uint64
}

// Result is what one run measured. Loads are ground truth: every
// operation generated, weighted with the cluster's weights.
type Result struct {
	// Splits counts the automatic split steps applied (routes added);
	// ByOrigin splits them by the op's origin name.
	Splits   int
	ByOrigin map[string]int
	// BalanceSplits counts median and balance splits whose three following
	// columns were observed (and not after a phase change); EmptyChildren
	// those of their children that received under 1% of the parent's load
	// over those columns (averaged).
	BalanceSplits, EmptyChildren int
	// ReliefColumn is the first column (from 0) after which every route
	// scores below the threshold or holds a single key; -1 if never.
	// SplitsToRelief is the number of splits applied by then.
	ReliefColumn, SplitsToRelief int
	// FirstSplitColumn is the column whose commit planned the first split
	// (-1: none).
	FirstSplitColumn int
	// Hottest and Mean are the last column's hottest and mean route load
	// over the live routes, in multiples of the threshold.
	Hottest, Mean float64
	// Routes is the live route count at the end.
	Routes int
	// IsolatedAt is the column after which each Watch key sat alone in a
	// route (-1: never); IsolationPlans counts the ops planned to isolate
	// it (isolation origins with it as hot key).
	IsolatedAt     []int
	IsolationPlans []int
	// OpsPerColumn is the operations generated per column.
	OpsPerColumn int

	// Merges counts the automatic merges applied; MaxRoutes is the most
	// live routes after any column's op steps. InitialBoundariesMerged
	// counts the merges that removed one of Spec.InitialSplits (never,
	// unless InitialRoutesAutomatic).
	Merges, MaxRoutes, InitialBoundariesMerged int
	// RouteCapColumn is the first column in which a hot route was declined
	// for the route cap (-1: never); RouteCapColumns counts such columns.
	RouteCapColumn, RouteCapColumns int
	// SplitColumns is the column of every automatic split step applied,
	// in order.
	SplitColumns []int
	// HottestPerColumn is each column's hottest route load over the routes
	// it was generated under, in multiples of the threshold (ground truth).
	HottestPerColumn []float64
	// The thrash checks: DelayViolations counts merges of a route within
	// merge_delay_ms of its creation, CooldownViolations splits of a
	// merged route within cooldown_ms of its merge (both never allowed),
	// Resplits splits of a merged route within an hour of its merge (a new
	// hotspot may land on it), and Thrash those while the workload had not
	// changed shape since the merge (the same PhaseEvery interval: the
	// merge undone by the load it was merged under).
	DelayViolations, CooldownViolations, Resplits, Thrash int
	// Cuts are the balance cuts planned: the shares the explanation
	// recorded against the true shares of the column that planned them.
	Cuts []Cut

	// With GroupCapacities: GroupLoads is each column's load of each
	// group in multiples of its capacity (ground truth, by the group that
	// served each route); Moves are the moves committed, in order.
	GroupLoads [][]float64
	Moves      []Move
}

// Move is one committed move: the column it committed after, the route,
// both groups, and the route's share of its source group's load in the
// column that planned it.
type Move struct {
	Column              int
	RouteID, From, To   uint64
	Start, End          []byte
	ShareOfSourceLoadBP uint32
}

// Cut is one planned balance cut: its left share as the explanation
// recorded it (point and interval; the interval is 0..0 when the rules
// record none) and as the column's operations had it, in basis points,
// and the evidence kind that placed it ("" below cluster version 3).
type Cut struct {
	Recorded, LoBP, HiBP, True uint32
	Evidence                   string
}

// Error is the recorded left share's distance from the true one, in
// basis points.
func (c Cut) Error() uint32 { return max(c.Recorded, c.True) - min(c.Recorded, c.True) }

// run is the state of one Run.
type run struct {
	spec    Spec
	f       *fsm.FSM
	index   uint64
	lastMs  uint64
	samp    []*keyviz.Sampler
	stream  sim.Stream
	keys    sim.KeySpace
	stepMs  uint64
	ww, wr  uint64
	thresh  uint64
	load    []uint64         // ground truth of the current column, by route id
	last    *catalog.Catalog // the routes the last column's load was generated under
	key     []byte
	pending []pendingSplit // balance splits waiting for their children's loads
	cfg     *api.Config    // the bootstrap config, defaults applied
	// The current column's operations, for the true shares of a cut.
	opKeys   []uint64
	opWrites []bool
	res      Result
}

// pendingSplit is a median or balance split whose children are watched for
// three columns.
type pendingSplit struct {
	parentLoad uint64
	children   [2][2][]byte // [start, end) of each child
	sums       [2]uint64
	left       int // columns still to observe
}

// Run runs spec once.
func Run(spec Spec) (Result, error) {
	r, err := newRun(spec)
	if err != nil {
		return Result{}, err
	}
	for c := range spec.Columns {
		if err := r.column(c); err != nil {
			return r.res, fmt.Errorf("simlab: column %d: %w", c, err)
		}
	}
	r.finish()
	return r.res, nil
}

func newRun(spec Spec) (*run, error) {
	switch {
	case spec.Workload == nil:
		return nil, fmt.Errorf("%w: Workload is nil", ErrInvalidSpec)
	case !(spec.Load > 0):
		return nil, fmt.Errorf("%w: Load %v: want > 0 thresholds", ErrInvalidSpec, spec.Load)
	case spec.Columns < 1:
		return nil, fmt.Errorf("%w: Columns %d: want >= 1", ErrInvalidSpec, spec.Columns)
	}
	if !clusterversion.IsVersion(spec.ClusterVersion) { // unset
		spec.ClusterVersion = clusterversion.Supported
	}
	if spec.Nodes == 0 {
		spec.Nodes = 3
	}
	r := &run{spec: spec, f: fsm.New(fsm.Options{Logger: slog.New(slog.DiscardHandler), Halt: func(error) {}})}
	r.res = Result{ByOrigin: map[string]int{}, ReliefColumn: -1, FirstSplitColumn: -1, RouteCapColumn: -1,
		IsolatedAt: slices.Repeat([]int{-1}, len(spec.Watch)), IsolationPlans: make([]int, len(spec.Watch))}
	const startMs = 1_800_000_000_000 // a multiple of every step up to an hour
	r.lastMs = startMs
	if len(spec.GroupCapacities) > spec.Nodes {
		return nil, fmt.Errorf("%w: %d groups for %d nodes: each group needs a data node", ErrInvalidSpec, len(spec.GroupCapacities), spec.Nodes)
	}
	res, err := r.apply(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "simlab", InitialSplits: spec.InitialSplits, GroupId: 1, Config: spec.Config, AutoSplit: true,
		ClusterVersion: spec.ClusterVersion, GroupCount: uint32(len(spec.GroupCapacities)),
	}}}, startMs)
	if err != nil {
		return nil, err
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		return nil, fmt.Errorf("%w: bootstrap: %s", ErrInvalidSpec, res.GetMessage())
	}
	if spec.InitialRoutesAutomatic {
		if err := r.unmarkStarts(); err != nil {
			return nil, err
		}
	}
	if err := r.setGroups(startMs); err != nil {
		return nil, err
	}
	cfg := r.f.State().Config()
	r.cfg = cfg
	r.stepMs, r.ww, r.wr, r.thresh = cfg.GetStepMs(), uint64(cfg.GetWriteWeight()), uint64(cfg.GetReadWeight()), cfg.GetThreshold()
	r.keys = spec.Workload.Keys()
	r.stream = spec.Workload.Stream(rand.New(rand.NewPCG(spec.Seed, 0)))
	r.res.OpsPerColumn = r.opsPerColumn()
	lc := keyviz.LoadConfigFromProto(cfg)
	for i := range spec.Nodes {
		s, err := keyviz.NewSampler(keyviz.SamplerConfig{Load: lc, SampleRate: spec.SampleRate, TopK: spec.TopK,
			Seed: spec.Seed*1_000_003 + uint64(i) + 1})
		if err != nil {
			return nil, fmt.Errorf("%w: sampler: %w", ErrInvalidSpec, err)
		}
		r.samp = append(r.samp, s)
	}
	r.setRoutes()
	// Open every sampler's first column at the run's first window.
	for _, s := range r.samp {
		s.CloseColumn(startMs)
	}
	return r, nil
}

// opsPerColumn converts Spec.Load into operations per column from the
// workload's mean weight, measured on a separate stream of the same seed.
func (r *run) opsPerColumn() int {
	probe := r.spec.Workload.Stream(rand.New(rand.NewPCG(r.spec.Seed, 1)))
	const n = 20_000
	var w uint64
	for i := range n {
		_, write := probe.Next(time.Duration(i))
		w += r.weight(write)
	}
	mean := float64(max(w, 1)) / n
	perCol := r.spec.Load * float64(r.thresh) * float64(r.stepMs) / 60_000
	return max(1, int(perCol/mean+0.5))
}

func (r *run) weight(write bool) uint64 {
	if write {
		return r.ww
	}
	return r.wr
}

// apply stamps c at physical time ms (at least one past the last stamp)
// and applies it.
func (r *run) apply(c *api.Command, ms uint64) (*api.CommandResult, error) {
	r.lastMs = max(ms, r.lastMs+1)
	c.Hlc = hlc.Make(r.lastMs, 0)
	c.MinVersion = r.spec.ClusterVersion
	if _, ok := c.GetBody().(*api.Command_Bootstrap); ok {
		c.MinVersion = 0
	}
	b, err := fsm.EncodeCommand(c)
	if err != nil {
		return nil, err
	}
	r.index++
	out, ok := r.f.Apply(&raft.Log{Index: r.index, Term: 1, Type: raft.LogCommand, Data: b}).(*fsm.Result)
	if !ok || out.CommandResult == nil {
		return nil, errors.New("apply returned no result")
	}
	return out.CommandResult, nil
}

// setRoutes hands the current catalog to every sampler and sizes the
// ground-truth table.
func (r *run) setRoutes() {
	cat := r.f.State().Catalog()
	routes := make([]*catalog.RouteDescriptor, 0, cat.Len())
	cat.Ascend(func(d *catalog.RouteDescriptor) bool {
		routes = append(routes, d)
		return true
	})
	for _, s := range r.samp {
		if err := s.SetRoutes(routes, cat.Version()); err != nil {
			panic(fmt.Sprintf("simlab: sampler refused a catalog: %v", err)) // a bug: the catalog is valid
		}
	}
	if n := int(cat.NextRouteID()); len(r.load) < n {
		r.load = slices.Grow(r.load, n-len(r.load))[:n]
	}
}

// column runs column c: the operations, the reports, the commit, the op
// steps, and the measurements.
func (r *run) column(c int) error {
	start := r.windowStart(c)
	cat := r.f.State().Catalog()
	clear(r.load)
	r.opKeys, r.opWrites = r.opKeys[:0], r.opWrites[:0]
	n := r.res.OpsPerColumn
	for i := range n {
		at := time.Duration(c)*time.Duration(r.stepMs)*time.Millisecond +
			time.Duration(i)*time.Duration(r.stepMs)*time.Millisecond/time.Duration(n)
		k, write := r.stream.Next(at)
		r.key = r.keys.AppendKey(r.key[:0], k)
		route := cat.Lookup(r.key)
		r.samp[r.nodeFor(route, i)].Observe(route.ID, r.key, write)
		r.load[route.ID] += r.weight(write)
		r.opKeys, r.opWrites = append(r.opKeys, k), append(r.opWrites, write)
	}
	end := start + r.stepMs
	contribs := make([]columns.Contribution, len(r.samp))
	for i, s := range r.samp {
		contribs[i] = columns.Contribution{Reporter: "node-" + strconv.Itoa(i), Column: s.CloseColumn(end)}
	}
	st := r.f.State()
	entry := columns.MergeColumn(contribs, st.Catalog(), st.DetectorConfig(), st.ClusterVersion())
	slices.SortFunc(entry.Reporters, func(a, b string) int { return bytes.Compare([]byte(a), []byte(b)) })
	res, err := r.apply(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: entry}}, end)
	if err != nil {
		return err
	}
	if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
		return fmt.Errorf("column refused: %s", res.GetMessage())
	}
	r.observe(c, cat)
	r.relief(c, cat)
	if len(res.GetPlannedOpIds()) > 0 && r.res.FirstSplitColumn < 0 {
		r.res.FirstSplitColumn = c
	}
	r.countPlans(res.GetPlannedOpIds())
	r.routeCap(c, end)
	r.res.HottestPerColumn = append(r.res.HottestPerColumn, r.hottest(cat))
	r.recordCuts(res.GetPlannedOpIds(), cat)
	if err := r.stepOps(c, end, cat); err != nil {
		return err
	}
	if err := r.stepMoves(c, end, cat); err != nil {
		return err
	}
	r.res.MaxRoutes = max(r.res.MaxRoutes, r.f.State().Catalog().Len())
	r.setRoutes()
	r.isolated(c)
	r.last = cat
	return nil
}

func (r *run) windowStart(c int) uint64 {
	return 1_800_000_000_000 + uint64(c)*r.stepMs
}

// observe adds this column's loads to the splits being watched.
func (r *run) observe(c int, cat *catalog.Catalog) {
	kept := r.pending[:0]
	for _, p := range r.pending {
		for i, ch := range p.children {
			p.sums[i] += r.rangeLoad(cat, ch[0], ch[1])
		}
		if p.left--; p.left > 0 {
			kept = append(kept, p)
			continue
		}
		r.res.BalanceSplits++
		for _, s := range p.sums {
			// Under 1% of the parent's column load, averaged over 3.
			if s*100 < 3*p.parentLoad {
				r.res.EmptyChildren++
			}
		}
	}
	r.pending = kept
}

// rangeLoad is this column's ground-truth load in [start, end).
func (r *run) rangeLoad(cat *catalog.Catalog, start, end []byte) uint64 {
	var sum uint64
	cat.AscendFrom(start, func(d *catalog.RouteDescriptor) bool {
		if len(end) != 0 && bytes.Compare(d.Start, end) >= 0 {
			return false
		}
		sum += r.load[d.ID]
		return true
	})
	return sum
}

// countPlans counts isolation plans of watched keys.
func (r *run) countPlans(ids []uint64) {
	st := r.f.State()
	for _, id := range ids {
		op, ok := st.Op(id)
		if !ok {
			continue
		}
		switch op.GetOrigin() {
		case api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_SINGLE_LOWER_EDGE,
			api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_SINGLE_UPPER_EDGE:
		default:
			continue
		}
		for i, w := range r.spec.Watch {
			if isolates(op, w) {
				r.res.IsolationPlans[i]++
			}
		}
	}
}

// recordCuts records the balance cuts among the ops planned by the column
// just committed, generated under cat: the shares their explanations
// recorded and the true shares of that column's operations.
func (r *run) recordCuts(ids []uint64, cat *catalog.Catalog) {
	st := r.f.State()
	for _, id := range ids {
		op, ok := st.Op(id)
		if !ok || op.GetOrigin() != api.SplitOrigin_SPLIT_ORIGIN_BALANCE || len(op.GetSplitKeys()) != 1 {
			continue
		}
		route, ok := cat.Route(op.GetParentRouteId())
		tr, tracked := st.Detector().Get(op.GetParentRouteId())
		if !ok || !tracked || r.load[route.ID] == 0 {
			continue
		}
		x := tr.Explanation
		c := Cut{Recorded: x.LeftShareBP, LoBP: x.LeftShareLoBP, HiBP: x.LeftShareHiBP}
		if x.Evidence != 0 {
			c.Evidence = x.Evidence.String()
		}
		var left uint64
		split := op.GetSplitKeys()[0]
		for i, k := range r.opKeys {
			r.key = r.keys.AppendKey(r.key[:0], k)
			if route.Contains(r.key) && bytes.Compare(r.key, split) < 0 {
				left += r.weight(r.opWrites[i])
			}
		}
		c.True = uint32(left * 10_000 / r.load[route.ID])
		r.res.Cuts = append(r.res.Cuts, c)
	}
}

// isolates reports whether op's keys cut out [w, w·0x00).
func isolates(op *api.Op, w []byte) bool {
	for _, k := range op.GetSplitKeys() {
		if bytes.Equal(k, w) || (len(k) == len(w)+1 && k[len(w)] == 0 && bytes.HasPrefix(k, w)) {
			return true
		}
	}
	return false
}

// stepOps applies every live op's steps, oldest first, as the scheduler
// does (both ask fsm.NextOpStep), at the end of column c (window end at
// endMs). cat is the catalog the column's load was generated under.
func (r *run) stepOps(c int, endMs uint64, cat *catalog.Catalog) error {
	for {
		st := r.f.State()
		op, cmd := fsm.NextOpStep(st.Switch().GetEnabled(), st.LiveOps(), "simlab")
		if op == nil {
			return nil
		}
		before := st.Catalog()
		res, err := r.apply(cmd, endMs)
		if err != nil {
			return err
		}
		if res.GetCode() != api.ResultCode_RESULT_CODE_OK {
			continue // aborted or paused: the op's state says so
		}
		if m := cmd.GetMergeRange(); m != nil {
			r.merged(before, m, hlc.Physical(res.GetCommitHlc()))
			continue
		}
		target := cmd.GetSplitRange().GetRouteId()
		r.split(c, before, target, hlc.Physical(res.GetCommitHlc()))
		r.res.ByOrigin[originName(op.GetOrigin())]++
		switch op.GetOrigin() {
		case api.SplitOrigin_SPLIT_ORIGIN_SUB_BUCKET_MEDIAN, api.SplitOrigin_SPLIT_ORIGIN_BALANCE:
			if r.phaseChangeNear(c) || c+3 >= r.spec.Columns {
				break
			}
			p := pendingSplit{parentLoad: r.routeLoad(cat, target), left: 3}
			for i, ch := range res.GetChildren() {
				p.children[i] = [2][]byte{ch.GetStart(), ch.GetEnd()}
			}
			r.pending = append(r.pending, p)
		}
	}
}

// split counts an automatic split of route target (in before) applied at
// atMs in column c, and checks it against the merge that made the route:
// a merged route is never split within the cooldown of its merge, and
// one split within an hour of it counts as a resplit.
func (r *run) split(c int, before *catalog.Catalog, target, atMs uint64) {
	r.res.Splits++
	r.res.SplitColumns = append(r.res.SplitColumns, c)
	parent, ok := before.Route(target)
	if !ok || !parent.Merged() {
		return
	}
	mergedMs := hlc.Physical(parent.MergedFrom().AtHLC)
	since := atMs - min(atMs, mergedMs)
	if since < r.cfg.GetCooldownMs() {
		r.res.CooldownViolations++
	}
	if since < uint64(time.Hour.Milliseconds()) {
		r.res.Resplits++
	}
	if p := r.spec.PhaseEvery; p > 0 && r.opTime(mergedMs)/p == r.opTime(atMs)/p {
		r.res.Thrash++
	}
}

// opTime is the operation time (the workload's clock, from 0 at the first
// window) of physical time ms.
func (r *run) opTime(ms uint64) time.Duration {
	return time.Duration(ms-min(ms, r.windowStart(0))) * time.Millisecond
}

// unmarkStarts replaces the state with itself minus every operator mark,
// through the FSM's snapshot restore, as of the entry last applied.
func (r *run) unmarkStarts() error {
	p := r.f.State().Proto()
	for _, rd := range p.GetCatalog().GetRoutes() {
		rd.OperatorStart = false
	}
	var buf bytes.Buffer
	if err := fsm.WriteSnapshot(&buf, r.index, p); err != nil {
		return fmt.Errorf("simlab: unmark the initial routes: %w", err)
	}
	if err := r.f.Restore(io.NopCloser(&buf)); err != nil {
		return fmt.Errorf("simlab: unmark the initial routes: %w", err)
	}
	return nil
}

// merged counts an automatic merge applied at atMs and checks it against
// its routes' creation (in before): never within merge_delay_ms of it. It
// also counts a merge that removed an initial split key.
func (r *run) merged(before *catalog.Catalog, m *api.MergeRange, atMs uint64) {
	r.res.Merges++
	if right, ok := before.Route(m.GetRightRouteId()); ok &&
		slices.ContainsFunc(r.spec.InitialSplits, func(k []byte) bool { return bytes.Equal(k, right.Start) }) {
		r.res.InitialBoundariesMerged++
	}
	for _, id := range []uint64{m.GetLeftRouteId(), m.GetRightRouteId()} {
		d, ok := before.Route(id)
		if !ok {
			continue
		}
		created := d.SplitAtHLC
		if m := d.MergedFrom(); m != nil {
			created = max(created, m.AtHLC)
		}
		created = hlc.Physical(created)
		if created+r.cfg.GetMergeDelayMs() > atMs {
			r.res.DelayViolations++
		}
	}
}

// routeLoad is the ground-truth load of route id in the column just
// generated (0 for a route born since).
func (r *run) routeLoad(cat *catalog.Catalog, id uint64) uint64 {
	if _, ok := cat.Route(id); !ok || id >= uint64(len(r.load)) {
		return 0
	}
	return r.load[id]
}

// phaseChangeNear reports whether the workload changes shape between the
// end of column c and the end of column c+3.
func (r *run) phaseChangeNear(c int) bool {
	if r.spec.PhaseEvery <= 0 {
		return false
	}
	step := time.Duration(r.stepMs) * time.Millisecond
	from, to := time.Duration(c+1)*step, time.Duration(c+4)*step
	return from/r.spec.PhaseEvery != to/r.spec.PhaseEvery || (to%r.spec.PhaseEvery) == 0
}

// routeCap records whether column c (ending at endMs) declined a hot
// route for the route cap.
func (r *run) routeCap(c int, endMs uint64) {
	for _, t := range r.f.State().Detector().Tracked() {
		if x := t.Explanation; x.AtMs == endMs && x.Reason == detector.ReasonRouteCap {
			if r.res.RouteCapColumn < 0 {
				r.res.RouteCapColumn = c
			}
			r.res.RouteCapColumns++
			return
		}
	}
}

// hottest is this column's hottest route load under cat, in thresholds.
func (r *run) hottest(cat *catalog.Catalog) float64 {
	var h uint64
	cat.Ascend(func(d *catalog.RouteDescriptor) bool {
		h = max(h, r.load[d.ID])
		return true
	})
	return float64(h) / (float64(r.thresh) * float64(r.stepMs) / 60_000)
}

// isolated records when each watched key came to sit alone in a route:
// after the op steps of column c.
func (r *run) isolated(c int) {
	cat := r.f.State().Catalog()
	for i, w := range r.spec.Watch {
		if r.res.IsolatedAt[i] >= 0 {
			continue
		}
		if d := cat.Lookup(w); catalog.IsSingleKey(d.Start, d.End) {
			r.res.IsolatedAt[i] = c
		}
	}
}

// relief records column c as the relief column if its load, generated
// under cat, left every route below the threshold or holding one key.
func (r *run) relief(c int, cat *catalog.Catalog) {
	if r.res.ReliefColumn >= 0 {
		return
	}
	relieved := true
	cat.Ascend(func(d *catalog.RouteDescriptor) bool {
		if catalog.IsSingleKey(d.Start, d.End) {
			return true
		}
		if float64(r.load[d.ID])*60_000/float64(r.stepMs) >= float64(r.thresh) {
			relieved = false
			return false
		}
		return true
	})
	if relieved {
		r.res.ReliefColumn, r.res.SplitsToRelief = c, r.res.Splits
	}
}

// finish measures the last column's load spread over the routes it was
// generated under.
func (r *run) finish() {
	r.res.Routes = r.f.State().Catalog().Len()
	var sum, hottest uint64
	n := 0
	r.last.Ascend(func(d *catalog.RouteDescriptor) bool {
		sum += r.load[d.ID]
		hottest = max(hottest, r.load[d.ID])
		n++
		return true
	})
	t := float64(r.thresh) * float64(r.stepMs) / 60_000
	r.res.Hottest = float64(hottest) / t
	r.res.Mean = float64(sum) / float64(max(n, 1)) / t
}

// originName is the origin's label, e.g. "balance".
func originName(o api.SplitOrigin) string {
	return strings.ToLower(strings.TrimPrefix(o.String(), "SPLIT_ORIGIN_"))
}
