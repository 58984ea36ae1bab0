package fsm

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// The state hashes the version 2 release computes for the version 2
// scenarios below: first computed at commit 553a49f, and checked against
// the release recorded in testdata/upgrade/baseline (d722741, the last
// commit with SupportedVersion = 2): this file, copied unchanged into that
// commit's tree (git archive) and run there with `go test -run
// TestVersion2RulesGolden ./fsm`, passes with these three hashes. They pin
// every version 2 rule — the hold band,
// balance split keys from samples, isolation on lower bounds, explanations
// in decisions, sticky aborts, scheduled step changes, the config rules,
// admissions, state-check markers, notes, previous cluster ids, refusals
// and their messages in the request table, and the raise from version 1 —
// so that a refactor of how the rules are gated cannot change what a
// version 2 replica computes.
const (
	v2GoldenHash       = "cb715ed80eb00e60c63bf01faeeb52caebebbf3f7b9606f66ba4d52eff3fe05a"
	v2RaisedGoldenHash = "fd100432fc581aadfbd2043dacb1ba5d6eade1c9d4940769a92d53c88c90d67b"
	v2ReseedGoldenHash = "b19de4079e6c49b54b0735dcdda852bbaf16e6b254f368d8f5173ea6a1e3fc41"
	v2GoldenClusterID  = "golden2"
	v2GoldenRestoredID = "golden2-restored"
	v2GoldenStartMs    = 1_700_000_000_000
	v2GoldenThreshold  = 100_000
)

// goldenDriver applies commands to one FSM with consecutive indexes and
// HLCs 1 ms apart, failing the test on a halt. It keeps to the package's
// exported surface so the scenarios read like a log.
type goldenDriver struct {
	t     testing.TB
	f     *FSM
	index uint64
	ms    uint64
}

func newGoldenDriver(t testing.TB) *goldenDriver {
	return &goldenDriver{t: t, ms: v2GoldenStartMs,
		f: New(Options{Logger: slog.New(slog.DiscardHandler), Halt: func(err error) { t.Fatalf("halt: %v", err) }})}
}

func (d *goldenDriver) run(c *api.Command) *api.CommandResult {
	d.t.Helper()
	d.ms++
	c.Hlc = hlc.Make(d.ms, 0)
	b, err := EncodeCommand(c)
	if err != nil {
		d.t.Fatal(err)
	}
	d.index++
	return d.f.Apply(&raft.Log{Index: d.index, Term: 1, Type: raft.LogCommand, Data: b}).(*Result).CommandResult
}

// want runs c and fails unless it ends with code.
func (d *goldenDriver) want(code api.ResultCode, c *api.Command) *api.CommandResult {
	d.t.Helper()
	r := d.run(c)
	if r.GetCode() != code {
		d.t.Fatalf("%T: %v (%s), want %v", c.GetBody(), r.GetCode(), r.GetMessage(), code)
	}
	return r
}

func (d *goldenDriver) ok(c *api.Command) *api.CommandResult {
	d.t.Helper()
	return d.want(api.ResultCode_RESULT_CODE_OK, c)
}

func (d *goldenDriver) col(start uint64, rows ...*api.ColumnRow) *api.CommandResult {
	d.t.Helper()
	return d.ok(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: start, AtMs: start + 1000, StepMs: 1000, Rows: rows, Reporters: []string{"n1", "n2"}}}})
}

// step applies step n of op.
func (d *goldenDriver) step(op uint64, n uint32) {
	d.t.Helper()
	o, ok := d.f.State().Op(op)
	if !ok {
		d.t.Fatalf("op %d not found", op)
	}
	d.ok(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{
		RouteId: o.GetTargetRouteId(), SplitKey: o.GetSplitKeys()[n-1], OpId: op, Step: n}}})
}

// pending lists the PENDING ops.
func (d *goldenDriver) pending() []*api.Op {
	var out []*api.Op
	for _, o := range d.f.State().Ops() {
		if o.GetState() == api.OpState_OP_STATE_PENDING {
			out = append(out, o)
		}
	}
	return out
}

func (d *goldenDriver) hash() string {
	h := d.f.State().Hash()
	return hex.EncodeToString(h[:])
}

func goldenMember(id string, version uint32) *api.Command {
	return &api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{
		NodeId: id, GrpcAddr: id + ":7000", RaftAddr: id + ":7001", SupportedVersion: version}}}}
}

func withRequestID(id string, c *api.Command) *api.Command {
	c.RequestId = id
	return c
}

// sampledKeyRow is route id hot on one key, with the version 2 evidence: the
// key's raw sampled counts and variance, the row's sample and its sampled
// total and variance.
func sampledKeyRow(id uint64, key string, writes uint64) *api.ColumnRow {
	return &api.ColumnRow{RouteId: id, Writes: writes,
		TopKeys: []*api.KeyEstimate{
			{Key: []byte(key), Lower: 4 * writes * 95 / 100, Upper: 4 * writes, SampledWrites: writes * 95 / 100, Variance: 16 * writes},
			{Key: []byte(key + "x"), Lower: 4 * writes / 50, Upper: 4 * writes / 25, SampledWrites: writes / 50, Variance: 16 * writes / 50},
		},
		SampleRate: 1, SampledTotal: 4 * writes, SampledVariance: 16 * writes,
		Samples: []*api.WeightedKey{{Key: []byte(key), Weight: 4 * writes * 95 / 100}, {Key: []byte(key + "x"), Weight: 4 * writes / 50}}}
}

// spreadRow is route id [m, +inf) with load spread over several keys: no key
// to isolate, a balance point among the samples and buckets.
func spreadRow(id, writes uint64) *api.ColumnRow {
	b := make([]uint64, 16)
	b[3], b[9], b[12] = 2*writes, writes, writes
	var samples []*api.WeightedKey
	for i, k := range []string{"n1", "p2", "r3", "t4", "v5", "x6"} {
		samples = append(samples, &api.WeightedKey{Key: []byte(k), Weight: 4 * writes / 6 * uint64(1+i%2)})
	}
	return &api.ColumnRow{RouteId: id, Writes: writes, Buckets: b, SampleRate: 2,
		SampledTotal: 4 * writes, SampledVariance: 32 * writes, Samples: samples,
		TopKeys: []*api.KeyEstimate{{Key: []byte("p2"), Lower: 4 * writes / 5, Upper: 4 * writes / 4, SampledWrites: writes / 10, Variance: 8 * writes}}}
}

// v2Scenario drives an FSM bootstrapped at cluster version 2 through the
// version 2 behaviour and returns it.
func v2Scenario(t testing.TB) *goldenDriver {
	d := newGoldenDriver(t)
	// An explicit zero read weight is kept; the floor (unset) follows the
	// threshold; the hold band takes its default.
	cfg := &api.Config{}
	if err := protojson.Unmarshal([]byte(`{"threshold":"100000","candidateWindows":2,"stepMs":"1000","cooldownMs":"5000","readWeight":0}`), cfg); err != nil {
		t.Fatal(err)
	}
	d.ok(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: v2GoldenClusterID, ClusterVersion: 2,
		InitialSplits: [][]byte{[]byte("m")}, GroupId: 3, AutoSplit: true, Config: cfg}}})
	d.ok(goldenMember("n1", 2))
	d.ok(goldenMember("n2", 2))
	// Admission of a third node, replaced by a second admission.
	d.ok(&api.Command{MinVersion: 2, Body: &api.Command_AdmitMember{AdmitMember: &api.AdmitMember{NodeId: "n3", RaftAddr: "n3:7001", Actor: "admin"}}})
	d.ok(&api.Command{MinVersion: 2, Body: &api.Command_AdmitMember{AdmitMember: &api.AdmitMember{NodeId: "n3", RaftAddr: "n3:7101", Actor: "admin"}}})
	d.want(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, withRequestID("admit-member",
		&api.Command{MinVersion: 2, Body: &api.Command_AdmitMember{AdmitMember: &api.AdmitMember{NodeId: "n1", RaftAddr: "n1:7001", Actor: "admin"}}}))
	d.ok(&api.Command{MinVersion: 2, Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "periodic"}}})

	// Route 1 ["", m): one hot key, isolated on its lower bound.
	d.col(1000, sampledKeyRow(1, "g42", 6000))
	d.col(2000, sampledKeyRow(1, "g42", 6000))
	for _, o := range d.pending() {
		for n := range uint32(len(o.GetSplitKeys())) {
			d.step(o.GetOpId(), n+1)
		}
	}

	// Route 2 [m, +inf): a hot column, one in the hold band (84% of the
	// threshold) that holds the counter, a hot one that plans a balance
	// split; an operator aborts it before step 1 with a note (the route
	// cools down), and later hot columns are declined in cooldown.
	d.col(3000, spreadRow(2, 6000))
	d.col(4000, spreadRow(2, 350))
	d.col(5000, spreadRow(2, 6000), &api.ColumnRow{RouteId: 99, Writes: 100})
	for _, o := range d.pending() {
		d.ok(withRequestID("abort-1", &api.Command{Body: &api.Command_AbortOp{AbortOp: &api.AbortOp{
			OpId: o.GetOpId(), Actor: "CN=alice", Reason: "not during the sale", Note: "alice@laptop"}}}))
	}
	// A retried abort returns its first answer.
	if o := d.f.State().Ops(); len(o) > 0 {
		d.ok(withRequestID("abort-1", &api.Command{Body: &api.Command_AbortOp{AbortOp: &api.AbortOp{
			OpId: o[len(o)-1].GetOpId(), Actor: "CN=alice", Reason: "not during the sale", Note: "alice@laptop"}}}))
	}
	d.col(6000, spreadRow(2, 6000))
	d.col(7000, spreadRow(2, 6000))
	d.col(8000, spreadRow(2, 100)) // cold: below_threshold once

	// The switch off and on with notes; a manual split with a note.
	d.ok(&api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: false, Actor: "CN=bob", Note: "bob", Reason: "freeze",
		Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR}}})
	d.col(9000, spreadRow(2, 6000))
	d.col(10000, spreadRow(2, 6000))
	d.ok(&api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: true, Actor: "CN=bob", Note: "bob",
		Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR}}})
	d.ok(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: 2, SplitKey: []byte("s"), Actor: "CN=carol", Note: "carol"}}})

	// Config: an empty patch and one above a limit are refused (their
	// answers kept by request id); a threshold change the floor follows;
	// a hold band change; a zero write weight beside the zero read weight
	// is refused; a step change is scheduled and takes effect at its
	// boundary.
	setCfg := func(rid string, p *api.ConfigPatch) *api.Command {
		return withRequestID(rid, &api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Patch: p, Actor: "CN=dave", Note: "dave"}}})
	}
	d.want(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, setCfg("cfg-empty", &api.ConfigPatch{}))
	d.want(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, setCfg("cfg-limit", &api.ConfigPatch{MaxAutoRoutes: proto.Uint32(MaxAutoRoutesLimit + 1)}))
	d.want(api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, setCfg("cfg-weights", &api.ConfigPatch{WriteWeight: proto.Uint32(0)}))
	d.ok(setCfg("cfg-threshold", &api.ConfigPatch{Threshold: proto.Uint64(90_000), HoldBandBp: proto.Uint32(9000)}))
	d.ok(setCfg("cfg-step", &api.ConfigPatch{StepMs: proto.Uint64(2000)}))
	at := d.f.State().Config().GetNextStepAtMs()
	if at == 0 {
		t.Fatalf("step change not scheduled: %v", d.f.State().Config())
	}
	// Window times follow the HLC's physical clock from here on: the
	// boundary is hours of columns ahead of the windows above.
	d.col(at-2000, sampledKeyRow(1, "t7", 200))
	d.col(at-1000, spreadRow(2, 6000))
	d.ok(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: at, AtMs: at + 2000, StepMs: 2000, Rows: []*api.ColumnRow{spreadRow(2, 12000)}, Reporters: []string{"n1", "n2"}}}})
	if d.f.State().Config().GetStepMs() != 2000 {
		t.Fatalf("step change did not take effect: %v", d.f.State().Config())
	}
	d.ok(setCfg("cfg-floor", &api.ConfigPatch{TopKeyAbsoluteFloor: proto.Uint64(30_000)}))
	d.ok(setCfg("cfg-follow", &api.ConfigPatch{TopKeyAbsoluteFloor: proto.Uint64(0), Threshold: proto.Uint64(120_000)}))

	d.ok(&api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: v2GoldenStartMs + 60_000}}})
	d.ok(goldenMember("n3", 2))
	d.ok(&api.Command{Body: &api.Command_RemoveMember{RemoveMember: &api.RemoveMember{NodeId: "n2"}}})
	d.ok(&api.Command{MinVersion: 2, Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "CN=erin"}}})
	return d
}

// v2RaisedScenario bootstraps at cluster version 1, is refused what needs
// version 2 (answers kept by request id), and is raised to version 2 when
// its last version 1 member is replaced: the version 2 config settings
// start at their defaults at that entry. Then a version 2 column holds in
// the band.
func v2RaisedScenario(t testing.TB) *goldenDriver {
	d := newGoldenDriver(t)
	d.ok(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: v2GoldenClusterID, ClusterVersion: 1,
		AutoSplit: true, Config: &api.Config{Threshold: v2GoldenThreshold, CandidateWindows: 3, StepMs: 1000, CooldownMs: 5000}}}})
	d.ok(goldenMember("n1", 1))
	d.ok(goldenMember("n2", 2))
	bad := api.ResultCode_RESULT_CODE_INVALID_ARGUMENT
	d.want(bad, withRequestID("v1-admit", &api.Command{Body: &api.Command_AdmitMember{AdmitMember: &api.AdmitMember{NodeId: "n3", RaftAddr: "n3:7001"}}}))
	d.want(bad, withRequestID("v1-check", &api.Command{Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "x"}}}))
	d.want(bad, withRequestID("v1-min", &api.Command{MinVersion: 2, Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "x"}}}))
	d.want(bad, withRequestID("v1-band", &api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Actor: "a",
		Patch: &api.ConfigPatch{HoldBandBp: proto.Uint32(7000)}}}}))
	d.want(bad, withRequestID("v1-samples", &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: 1000, AtMs: 2000, StepMs: 1000, Rows: []*api.ColumnRow{sampledKeyRow(1, "k", 6000)}}}}))
	d.want(bad, withRequestID("v1-variance", &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
		WindowStartMs: 1000, AtMs: 2000, StepMs: 1000, Rows: []*api.ColumnRow{{RouteId: 1, Writes: 1,
			TopKeys: []*api.KeyEstimate{{Key: []byte("k"), Lower: 1, Upper: 2, Variance: 3}}}}}}}))
	// At version 1 a note is dropped and an empty patch is accepted.
	d.ok(&api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Actor: "a", Note: "dropped", Patch: &api.ConfigPatch{}}}})
	d.col(1000, &api.ColumnRow{RouteId: 1, Writes: 6000})
	d.col(2000, &api.ColumnRow{RouteId: 1, Writes: 6000})
	d.ok(goldenMember("n1", 2)) // the raise
	if v := d.f.State().ClusterVersion(); v != 2 {
		t.Fatalf("cluster version %d after the raise", v)
	}
	d.col(3000, &api.ColumnRow{RouteId: 1, Writes: 350}) // in the band: held
	d.col(4000, &api.ColumnRow{RouteId: 1, Writes: 6000})
	d.ok(&api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Actor: "a", Note: "kept", Patch: &api.ConfigPatch{StepMs: proto.Uint64(3000)}}}})
	return d
}

// v2Reseeded restores the state of v2Scenario as a new cluster (a backup
// restore): the old cluster id is recorded, and the new cluster applies on.
func v2Reseeded(t testing.TB) *goldenDriver {
	src := v2Scenario(t)
	p, err := Reseed(src.f.State(), v2GoldenRestoredID, &api.Member{NodeId: "r1", GrpcAddr: "r1:7000", RaftAddr: "r1:7001", SupportedVersion: 2},
		v2GoldenStartMs+120_000)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, src.index, p); err != nil {
		t.Fatal(err)
	}
	d := newGoldenDriver(t)
	if err := d.f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	d.index, d.ms = src.index, v2GoldenStartMs+120_000
	d.ok(goldenMember("r2", 2))
	d.ok(&api.Command{MinVersion: 2, Body: &api.Command_CheckState{CheckState: &api.CheckState{Actor: "restore"}}})
	return d
}

// decisionSummary lists the decisions of a scenario, to show what
// a scenario exercised.
func decisionSummary(d *goldenDriver) string {
	s := d.f.State()
	var b strings.Builder
	for _, x := range s.Decisions() {
		fmt.Fprintf(&b, "\n  %s route=%d op=%d origin=%s reason=%s note=%q detail=%q explained=%v", x.GetKind(), x.GetRouteId(), x.GetOpId(),
			x.GetOrigin(), x.GetReason(), x.GetNote(), x.GetDetail(), x.GetExplanation() != nil)
	}
	return b.String()
}

// TestVersion2RulesGolden: at cluster version 2 this build computes what
// the version 2 release computes, to the byte; each scenario did reach the
// behaviour it is there for; and a snapshot of it restores to the same
// hash.
func TestVersion2RulesGolden(t *testing.T) {
	runGoldenCases(t, "the version 2 release", []goldenCase{
		{"bootstrapped at version 2", v2Scenario, v2GoldenHash, checkV2Scenario},
		{"raised from version 1", v2RaisedScenario, v2RaisedGoldenHash, checkV2Raised},
		{"reseeded from a backup", v2Reseeded, v2ReseedGoldenHash, func(t *testing.T, d *goldenDriver) {
			if ids := d.f.State().PreviousClusterIDs(); len(ids) != 1 || ids[0] != v2GoldenClusterID {
				t.Errorf("previous cluster ids %q", ids)
			}
		}},
	})
}

// hasDecision reports whether s holds a decision matching want.
func hasDecision(s *State, want func(*api.Decision) bool) bool {
	for _, x := range s.Decisions() {
		if want(x) {
			return true
		}
	}
	return false
}

// refusedWith fails unless the answer kept for request id rid is a refusal
// whose message contains text.
func refusedWith(t *testing.T, s *State, rid, text string) {
	t.Helper()
	r, ok := s.RequestResult(rid)
	if !ok || r.GetCode() == api.ResultCode_RESULT_CODE_OK || !strings.Contains(r.GetMessage(), text) {
		t.Errorf("request %s: kept %v (%v), want a refusal naming %q", rid, r, ok, text)
	}
}

func checkV2Scenario(t *testing.T, d *goldenDriver) {
	s := d.f.State()
	planned := func(origin api.SplitOrigin) func(*api.Decision) bool {
		return func(x *api.Decision) bool {
			return x.GetKind() == api.DecisionKind_DECISION_KIND_PLANNED && x.GetOrigin() == origin && x.GetExplanation() != nil
		}
	}
	if !hasDecision(s, planned(api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND)) {
		t.Error("no explained isolation plan")
	}
	// Route 2 planned at its third column only because the band column
	// between two hot ones held its counter.
	if !hasDecision(s, planned(api.SplitOrigin_SPLIT_ORIGIN_BALANCE)) {
		t.Error("no explained balance plan (hold band and balance split)")
	}
	if !hasDecision(s, func(x *api.Decision) bool {
		return x.GetKind() == api.DecisionKind_DECISION_KIND_DECLINED && x.GetReason() == api.Reason_REASON_COOLDOWN
	}) {
		t.Error("the abort before step 1 put no cooldown on the route")
	}
	if !hasDecision(s, func(x *api.Decision) bool { return x.GetNote() == "alice@laptop" }) {
		t.Error("notes not kept")
	}
	refusedWith(t, s, "cfg-empty", "sets no field")
	refusedWith(t, s, "cfg-limit", "max_auto_routes")
	refusedWith(t, s, "cfg-weights", "weight")
	refusedWith(t, s, "admit-member", "already a member")
	if c := s.Config(); c.GetStepMs() != 2000 || c.GetHoldBandBp() != 9000 || !c.GetFloorFollowsThreshold() ||
		c.GetTopKeyAbsoluteFloor() != 60_000 || c.ReadWeight == nil || c.GetReadWeight() != 0 {
		t.Errorf("config %v", c)
	}
}

func checkV2Raised(t *testing.T, d *goldenDriver) {
	s := d.f.State()
	for rid, text := range map[string]string{"v1-admit": "admit_member needs cluster version 2", "v1-check": "check_state needs cluster version 2",
		"v1-min": "min_version 2", "v1-band": "hold_band_bp: needs cluster version 2", "v1-samples": "samples: needs cluster version 2",
		"v1-variance": "sampled counts need cluster version 2"} {
		refusedWith(t, s, rid, text)
	}
	if !hasDecision(s, func(x *api.Decision) bool {
		return x.GetActor() == "cluster" && x.GetDetail() == "cluster version 2: hold_band_bp=8000 floor_follows_threshold=true"
	}) {
		t.Error("the raise to version 2 wrote no config decision")
	}
	// Hot, hot, the raise, a band column, hot: the band held the counter,
	// so the last column was the third over the threshold.
	if tr, ok := s.Detector().Get(1); !ok || tr.Explanation.ConsecutiveOver != 3 {
		t.Errorf("route 1: %+v, want the band to have held the counter (3 at the last column)", tr)
	}
}
