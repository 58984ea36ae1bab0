package fsm

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// The state hashes the version 3 build computes for the version 3 scenarios
// below, first computed at commit 0b78e78, a build whose newest version is
// 3: what a version 3 replica computes must not change while the code
// around it does.
// They pin every version 3 rule — route loads, manual and automatic merges,
// request fingerprints, the unchanged patch, the step change without
// columns, evidence cuts, heavy-key isolation, the heat history, operator
// boundaries, bounded and pooled evidence — and the raise from version 2.
const (
	v3GoldenHash       = "cbe92cfae13cc82c975dbb21a4fc5bd5cd0ec01a308ef6440ce84fae67b48dba"
	v3RaisedGoldenHash = "6ec4d01f53abbb8ca0552b0b73c28a1f89da5c9f2b1f9937d3a3b3a8e1e17aa1"
	v3GoldenClusterID  = "golden3"
)

// loads commits the next complete version 3 column of 1 s, its entry
// stamped as the window ends (so merge delays and cooldowns pass with the
// columns): every listed route's counts in route_loads, and rows (the
// evidence) for the routes given one.
func (d *goldenDriver) loads(loads []api.RouteLoad, rows ...*api.ColumnRow) *api.CommandResult {
	d.t.Helper()
	return d.loadsBy([]string{"n1", "n2"}, loads, rows...)
}

// loadsBy is loads reported by the given reporters.
func (d *goldenDriver) loadsBy(reporters []string, loads []api.RouteLoad, rows ...*api.ColumnRow) *api.CommandResult {
	d.t.Helper()
	start := d.f.State().LastColumnAtMs()
	if start == 0 || start+1000 <= d.ms {
		start = (d.ms/1000 + 1) * 1000
	}
	d.ms = max(d.ms, start+999) // run stamps the entry at the window's end
	for _, r := range rows {
		found := false
		for _, l := range loads {
			found = found || l.RouteID == r.GetRouteId()
		}
		if !found {
			loads = append(loads, loadOf(r))
		}
	}
	sortLoads(loads)
	return d.ok(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: start, AtMs: start + 1000, StepMs: 1000, Rows: rows, Reporters: reporters,
		RouteLoads: api.NewRouteLoads(loads)}}})
}

func sortLoads(loads []api.RouteLoad) {
	for i := 1; i < len(loads); i++ {
		for j := i; j > 0 && loads[j].RouteID < loads[j-1].RouteID; j-- {
			loads[j], loads[j-1] = loads[j-1], loads[j]
		}
	}
}

// stepAll applies every step of every live op, in op order, as the
// scheduler's stepper proposes them.
func (d *goldenDriver) stepAll() {
	d.t.Helper()
	for range 16 {
		st := d.f.State()
		op, cmd := NextOpStep(st.Switch().GetEnabled(), st.LiveOps(), "scheduler")
		if op == nil {
			return
		}
		d.ok(cmd)
	}
	d.t.Fatal("ops still live after 16 steps")
}

// routeAt is the id of the live route holding key.
func (d *goldenDriver) routeAt(key string) uint64 {
	d.t.Helper()
	return d.f.State().Catalog().Lookup([]byte(key)).ID
}

// heavyKeyRow is a hot row whose heaviest key clears the threshold on its
// own with a modest share of the route: heavy-key isolation.
func heavyKeyRow(id uint64, key string, writes uint64) *api.ColumnRow {
	r := &api.ColumnRow{RouteId: id, Writes: writes, SampleRate: 1, SampledTotal: 4 * writes, SampledVariance: 16 * writes,
		TopKeys: []*api.KeyEstimate{
			{Key: []byte(key), Lower: 4 * writes * 6 / 10, Upper: 4 * writes * 6 / 10, SampledWrites: writes * 6 / 10, Variance: 16 * writes * 6 / 10},
			{Key: []byte(key + "a"), Lower: 4 * writes / 10, Upper: 4 * writes / 10, SampledWrites: writes / 10, Variance: 16 * writes / 10},
			{Key: []byte(key + "b"), Lower: 4 * writes / 10, Upper: 4 * writes / 10, SampledWrites: writes / 10, Variance: 16 * writes / 10},
		}}
	for _, k := range r.TopKeys {
		r.Samples = append(r.Samples, &api.WeightedKey{Key: k.Key, Weight: k.Lower})
	}
	return r
}

// bucketRow is a hot row with its load in two buckets of sixteen: an
// evidence cut between them.
func bucketRow(id, writes uint64) *api.ColumnRow {
	b := make([]uint64, 16)
	b[4], b[11] = 2*writes, 2*writes
	return &api.ColumnRow{RouteId: id, Writes: writes, Buckets: b, SampleRate: 1, SampledTotal: 4 * writes, SampledVariance: 16 * writes,
		TopKeys: []*api.KeyEstimate{{Key: []byte("x"), Lower: 4 * writes / 20, Upper: 4 * writes / 10, SampledWrites: writes / 20, Variance: 16 * writes / 20}}}
}

// v3Config: the hot threshold of the version 2 scenarios, merges after 3
// cold columns and 4 s after the split that made a route.
func v3Config() *api.Config {
	return &api.Config{Threshold: 100_000, CandidateWindows: 2, StepMs: 1000, CooldownMs: 5000,
		MergeWindows: proto.Uint32(3), MergeDelayMs: proto.Uint64(4000)}
}

// v3Scenario drives an FSM bootstrapped at cluster version 3 through the
// version 3 behaviour and returns it.
func v3Scenario(t testing.TB) *goldenDriver {
	d := newGoldenDriver(t)
	d.ok(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: v3GoldenClusterID, ClusterVersion: 3,
		InitialSplits: [][]byte{[]byte("g"), []byte("p")}, GroupId: 3, AutoSplit: true, Config: v3Config()}}})
	d.ok(goldenMember("n1", 3))
	d.ok(goldenMember("n2", 3))

	// Route 1 ["", g): a heavy key isolated at 60% of the route. Route 2
	// [g, p): an evidence cut between two loaded buckets. Route 3 [p, +inf):
	// warm, listed in route_loads only.
	warm := api.RouteLoad{RouteID: 3, Writes: 300, Reads: 900}
	for range 2 {
		d.loads([]api.RouteLoad{warm}, heavyKeyRow(1, "c42", 30000), bucketRow(2, 7000))
	}
	d.stepAll()
	// The next column plans route 2's cut (one split per column).
	d.loads([]api.RouteLoad{warm}, bucketRow(2, 7000))
	d.stepAll()

	// Pooled evidence: a hot route whose rows carry only a few sampled
	// keys each, counted over columns.
	r3 := d.routeAt("q")
	for _, keys := range [][]string{{"q1", "q2"}, {"q3"}, {"q2", "q4"}} {
		row := &api.ColumnRow{RouteId: r3, Writes: 6000, SampleRate: 16}
		for _, k := range keys {
			row.Samples = append(row.Samples, &api.WeightedKey{Key: []byte(k), Weight: 100})
		}
		d.loads(nil, row)
	}
	if tr, _ := d.f.State().Detector().Get(r3); len(tr.Pool) == 0 {
		t.Fatalf("route %d pooled no evidence: %+v", r3, tr)
	}
	d.stepAll()

	// Cold columns: the pieces of the automatic splits merge back once the
	// merge delay has passed, never across the operator's boundaries g and p.
	for range 10 {
		d.loads([]api.RouteLoad{{RouteID: d.routeAt("h"), Writes: 10}})
		d.stepAll()
	}

	// A manual merge with compare-and-set across the operator's boundary
	// g; a stale expected version is refused and kept by request id; the
	// request id reused for another request is refused (fingerprints).
	left, right := d.routeAt("a"), d.routeAt("h")
	v := d.f.State().Catalog().Version()
	d.want(api.ResultCode_RESULT_CODE_VERSION_MISMATCH, withRequestID("merge-stale", &api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{
		LeftRouteId: left, RightRouteId: right, ExpectedVersion: proto.Uint64(v - 1), Actor: "CN=alice", Note: "alice"}}}))
	d.ok(withRequestID("merge-1", &api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{
		LeftRouteId: left, RightRouteId: right, ExpectedVersion: proto.Uint64(v), Actor: "CN=alice", Note: "alice"}}}))
	d.want(api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED, withRequestID("merge-1", &api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{
		RouteId: d.routeAt("a"), SplitKey: []byte("b"), Actor: "CN=alice"}}}))
	// A manual split marks its boundary as the operator's.
	d.ok(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: d.routeAt("a"), SplitKey: []byte("d"), Actor: "CN=carol"}}})

	// Config: an unchanged patch changes nothing; a step change is
	// scheduled and, with no column coming, takes effect with a fence
	// renewal past its boundary.
	setCfg := func(rid string, p *api.ConfigPatch) *api.Command {
		return withRequestID(rid, &api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Patch: p, Actor: "CN=dave", Note: "dave"}}})
	}
	d.ok(setCfg("cfg-same", &api.ConfigPatch{Threshold: proto.Uint64(100_000)}))
	d.ok(setCfg("cfg-merge", &api.ConfigPatch{MergeMarginBp: proto.Uint32(3000), MaxMergesPerCycle: proto.Uint32(2)}))
	d.ok(setCfg("cfg-step", &api.ConfigPatch{StepMs: proto.Uint64(2000)}))
	at := d.f.State().Config().GetNextStepAtMs()
	if at == 0 {
		t.Fatalf("step change not scheduled: %v", d.f.State().Config())
	}
	d.ms = at + 10_000
	d.ok(&api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: d.ms + 60_000}}})
	if d.f.State().Config().GetStepMs() != 2000 {
		t.Fatalf("step change did not take effect without columns: %v", d.f.State().Config())
	}
	d.ok(&api.Command{MinVersion: 3, Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "CN=erin"}}})
	return d
}

// v3RaisedScenario bootstraps at cluster version 2 with operator splits, is
// refused what needs version 3 (answers kept by request id), and is raised
// to version 3 when its last version 2 member is upgraded: the raise marks
// the operator's boundaries and starts the merge settings at their
// defaults. Then version 3 columns and a manual merge apply.
func v3RaisedScenario(t testing.TB) *goldenDriver {
	d := newGoldenDriver(t)
	d.ok(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: v3GoldenClusterID, ClusterVersion: 2,
		InitialSplits: [][]byte{[]byte("m")}, GroupId: 3, AutoSplit: true,
		Config: &api.Config{Threshold: 100_000, CandidateWindows: 2, StepMs: 1000, CooldownMs: 5000}}}})
	d.ok(goldenMember("n1", 2))
	d.ok(goldenMember("n2", 3))
	bad := api.ResultCode_RESULT_CODE_INVALID_ARGUMENT
	d.want(bad, withRequestID("v2-merge", &api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: 1, RightRouteId: 2, Actor: "a"}}}))
	d.want(bad, withRequestID("v2-loads", &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: 1000, AtMs: 2000, StepMs: 1000, RouteLoads: api.NewRouteLoads([]api.RouteLoad{{RouteID: 1, Writes: 5}})}}}))
	d.want(bad, withRequestID("v2-merge-cfg", &api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Actor: "a",
		Patch: &api.ConfigPatch{MergeWindows: proto.Uint32(4)}}}}))
	d.col(1000, sampledKeyRow(1, "c7", 6000))
	d.col(2000, sampledKeyRow(1, "c7", 6000))
	d.stepAll()
	d.ok(goldenMember("n1", 3)) // the raise
	if v := d.f.State().ClusterVersion(); v != 3 {
		t.Fatalf("cluster version %d after the raise", v)
	}
	for range 4 {
		d.loads([]api.RouteLoad{{RouteID: d.routeAt("z"), Writes: 20}})
		d.stepAll()
	}
	d.ok(&api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: d.routeAt("d"), RightRouteId: d.routeAt("m"), Actor: "CN=bob"}}})
	d.loads([]api.RouteLoad{{RouteID: d.routeAt("z"), Writes: 20}})
	return d
}

// goldenCase is one scenario of a version's golden test: what it runs,
// the state hash it must reach and what it must have done.
type goldenCase struct {
	name  string
	run   func(testing.TB) *goldenDriver
	want  string
	check func(t *testing.T, d *goldenDriver)
}

// runGoldenCases runs each case: its checks, a snapshot of its state that
// restores to the same hash, and the hash against the pinned one (whose
// source pinned says).
func runGoldenCases(t *testing.T, pinned string, cases []goldenCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.run(t)
			got := d.hash()
			t.Logf("state hash %s (%d ops, %d groups, %d decisions, catalog version %d)%s", got, len(d.f.State().Ops()),
				len(d.f.State().Groups()), len(d.f.State().Decisions()), d.f.State().Catalog().Version(), decisionSummary(d))
			tc.check(t, d)
			var buf bytes.Buffer
			if err := WriteSnapshot(&buf, d.index, d.f.State().Proto()); err != nil {
				t.Fatal(err)
			}
			r := newGoldenDriver(t)
			if err := r.f.Restore(io.NopCloser(&buf)); err != nil {
				t.Fatal(err)
			}
			if h := r.hash(); h != got {
				t.Errorf("restored from a snapshot: state hash %s, before %s", h, got)
			}
			if got != tc.want {
				t.Fatalf("state hash %s, %s computes %s", got, pinned, tc.want)
			}
		})
	}
}

// TestVersion3RulesGolden: at cluster version 3 this build computes what
// the version 3 build computed, to the byte; each scenario reached the
// behaviour it is there for; and a snapshot of it restores to the same
// hash.
func TestVersion3RulesGolden(t *testing.T) {
	runGoldenCases(t, "the version 3 build", []goldenCase{
		{"bootstrapped at version 3", v3Scenario, v3GoldenHash, checkV3Scenario},
		{"raised from version 2", v3RaisedScenario, v3RaisedGoldenHash, checkV3Raised},
	})
}

func decided(kind api.DecisionKind, origin api.SplitOrigin) func(*api.Decision) bool {
	return func(x *api.Decision) bool {
		return x.GetKind() == kind && (origin == api.SplitOrigin_SPLIT_ORIGIN_UNSPECIFIED || x.GetOrigin() == origin)
	}
}

func checkV3Scenario(t *testing.T, d *goldenDriver) {
	s := d.f.State()
	planned := api.DecisionKind_DECISION_KIND_PLANNED
	if !hasDecision(s, decided(planned, api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND)) {
		t.Error("no heavy-key isolation planned")
	}
	if !hasDecision(s, decided(planned, api.SplitOrigin_SPLIT_ORIGIN_BALANCE)) {
		t.Error("no evidence cut planned")
	}
	if !hasDecision(s, decided(api.DecisionKind_DECISION_KIND_MERGE_APPLIED, 0)) {
		t.Error("no automatic merge applied")
	}
	refusedWith(t, s, "merge-stale", "expected")
	if r, ok := s.RequestResult("merge-1"); !ok || r.GetCode() != api.ResultCode_RESULT_CODE_OK {
		t.Errorf("merge-1 kept %v: the reuse must not replace the first answer", r)
	}
	if r, ok := s.RequestResult("cfg-same"); !ok || !strings.HasPrefix(r.GetMessage(), "unchanged") {
		t.Errorf("unchanged patch answered %v", r)
	}
	if s.HeatHistory().Columns() == 0 {
		t.Error("no heat history")
	}
	for _, k := range []string{"g", "p"} {
		if r := s.Catalog().Lookup([]byte(k)); string(r.Start) == k && !r.OperatorStart {
			t.Errorf("operator boundary %q unmarked", k)
		}
	}
}

func checkV3Raised(t *testing.T, d *goldenDriver) {
	s := d.f.State()
	for rid, text := range map[string]string{"v2-merge": "needs cluster version 3", "v2-loads": "route_loads: needs cluster version 3",
		"v2-merge-cfg": "needs cluster version 3"} {
		refusedWith(t, s, rid, text)
	}
	if !hasDecision(s, func(x *api.Decision) bool {
		return x.GetActor() == "cluster" && strings.HasPrefix(x.GetDetail(), "cluster version 3:")
	}) {
		t.Error("the raise to version 3 wrote no config decision")
	}
	if !hasDecision(s, decided(api.DecisionKind_DECISION_KIND_MANUAL_MERGE, 0)) {
		t.Error("no merge after the raise")
	}
}
