package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/hlc"
)

// The rules a cluster version turns on are replicated behaviour: these
// tests run each of version 2's at version 2 and, where the version 1 rule
// differs, at version 1 too.

// bootstrappedAt is bootstrapped at the given cluster version.
func bootstrappedAt(t testing.TB, version uint32, splits [][]byte, cfg *api.Config) *harness {
	h := newHarness(t, Options{})
	r := h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
		ClusterId: "c1", InitialSplits: splits, GroupId: 7, Config: cfg, AutoSplit: true, ClusterVersion: version}}})
	if r.Code != api.ResultCode_RESULT_CODE_OK {
		t.Fatalf("bootstrap: %v %s", r.Code, r.Message)
	}
	return h
}

func TestZeroWeightsAtBootstrap(t *testing.T) {
	cases := []struct {
		name      string
		version   uint32
		cfg       *api.Config
		ww, wr    uint32
		refusedOn string // a field named by the refusal; "" = accepted
	}{
		{"v2: a zero read weight is kept", 2, &api.Config{ReadWeight: proto.Uint32(0)}, 4, 0, ""},
		{"v2: a zero write weight is kept", 2, &api.Config{WriteWeight: proto.Uint32(0)}, 0, 1, ""},
		{"v2: absent weights take the defaults", 2, &api.Config{}, 4, 1, ""},
		{"v2: both zero is refused", 2, &api.Config{WriteWeight: proto.Uint32(0), ReadWeight: proto.Uint32(0)}, 0, 0, "write_weight"},
		{"v1: a zero weight became the default (v1 rule)", 1, &api.Config{ReadWeight: proto.Uint32(0)}, 4, 1, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			r := h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
				ClusterId: "c1", Config: tc.cfg, ClusterVersion: tc.version}}})
			if tc.refusedOn != "" {
				wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
				if !strings.Contains(r.Message, tc.refusedOn) {
					t.Fatalf("refusal %q does not name %s", r.Message, tc.refusedOn)
				}
				return
			}
			wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
			c := h.state().Config()
			if c.GetWriteWeight() != tc.ww || c.GetReadWeight() != tc.wr {
				t.Fatalf("weights %d/%d, want %d/%d", c.GetWriteWeight(), c.GetReadWeight(), tc.ww, tc.wr)
			}
			if d := h.state().DetectorConfig(); d.WriteWeight != tc.ww || d.ReadWeight != tc.wr {
				t.Fatalf("detector weights %d/%d", d.WriteWeight, d.ReadWeight)
			}
		})
	}
}

func TestDerivedFloor(t *testing.T) {
	type change struct {
		patch        *api.ConfigPatch
		floor        uint64
		follows      bool
		wantCodeName api.ResultCode
	}
	cases := []struct {
		name    string
		version uint32
		boot    *api.Config
		floor0  uint64
		follow0 bool
		changes []change
	}{
		{"v2: an unset floor follows the threshold until set, and again after 0", 2, nil, 25_000, true, []change{
			{&api.ConfigPatch{Threshold: proto.Uint64(60_000)}, 30_000, true, 0},
			{&api.ConfigPatch{TopKeyAbsoluteFloor: proto.Uint64(20_000)}, 20_000, false, 0},
			{&api.ConfigPatch{Threshold: proto.Uint64(80_000)}, 20_000, false, 0},
			{&api.ConfigPatch{TopKeyAbsoluteFloor: proto.Uint64(0)}, 40_000, true, 0},
			{&api.ConfigPatch{Threshold: proto.Uint64(10_000), TopKeyAbsoluteFloor: proto.Uint64(9_000)}, 9_000, false, 0},
		}},
		{"v2: a floor given at bootstrap is explicit", 2, &api.Config{TopKeyAbsoluteFloor: 7}, 7, false, []change{
			{&api.ConfigPatch{Threshold: proto.Uint64(60_000)}, 7, false, 0},
		}},
		{"v1: the floor is fixed at bootstrap (v1 rule)", 1, nil, 25_000, false, []change{
			{&api.ConfigPatch{Threshold: proto.Uint64(60_000)}, 25_000, false, 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrappedAt(t, tc.version, nil, tc.boot)
			c := h.state().Config()
			if c.GetTopKeyAbsoluteFloor() != tc.floor0 || c.GetFloorFollowsThreshold() != tc.follow0 {
				t.Fatalf("bootstrap floor %d follows %v", c.GetTopKeyAbsoluteFloor(), c.GetFloorFollowsThreshold())
			}
			for i, ch := range tc.changes {
				wantCode(t, h.run(setConfig(ch.patch)), ch.wantCodeName)
				c := h.state().Config()
				if c.GetTopKeyAbsoluteFloor() != ch.floor || c.GetFloorFollowsThreshold() != ch.follows {
					t.Fatalf("change %d (%v): floor %d follows %v, want %d %v", i, ch.patch, c.GetTopKeyAbsoluteFloor(),
						c.GetFloorFollowsThreshold(), ch.floor, ch.follows)
				}
				if h.state().DetectorConfig().TopKeyAbsoluteFloor != ch.floor {
					t.Fatal("detector floor differs")
				}
			}
		})
	}
}

// TestAbortSticks: at version 2 an operator's or a stale abort before the
// first step puts the planned route in cooldown, so the next hot column
// does not plan the same split again; at version 1 it plans it again.
func TestAbortSticks(t *testing.T) {
	cases := []struct {
		name      string
		version   uint32
		stale     bool
		planAgain bool
	}{
		{"v2 operator abort sticks", 2, false, false},
		{"v2 stale abort sticks", 2, true, false},
		{"v1 operator abort does not (v1 rule)", 1, false, true},
		{"v1 stale abort does not (v1 rule)", 1, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := hotConfig()
			cfg.OpTtlMs = 5
			h := bootstrappedAt(t, tc.version, nil, cfg)
			h.run(column(1000, 2000, hotRow(1, "user42")))
			if r := h.run(column(2000, 3000, hotRow(1, "user42"))); len(r.PlannedOpIds) != 1 {
				t.Fatalf("planned %v", r.PlannedOpIds)
			}
			if tc.stale {
				wantCode(t, h.run(operatorSwitch(false)), api.ResultCode_RESULT_CODE_OK)
				h.ms += 10 // past op_ttl_ms
				wantCode(t, h.run(operatorSwitch(true)), api.ResultCode_RESULT_CODE_OK)
			} else {
				wantCode(t, h.run(abort(1, "not now")), api.ResultCode_RESULT_CODE_OK)
			}
			op, _ := h.state().Op(1)
			if op.GetState() != api.OpState_OP_STATE_ABORTED {
				t.Fatalf("op %v", op)
			}
			r := h.run(column(3000, 4000, hotRow(1, "user42")))
			tr, _ := h.state().Detector().Get(1)
			if got := len(r.PlannedOpIds) == 1; got != tc.planAgain {
				t.Fatalf("planned again %v, want %v (explanation %+v)", got, tc.planAgain, tr.Explanation)
			}
			if !tc.planAgain && (tr.Explanation.Reason != detector.ReasonCooldown || tr.CooldownUntilMs < hlc.Physical(op.GetUpdatedHlc())+cfg.CooldownMs) {
				t.Fatalf("aborted route %+v, want cooldown from the abort", tr)
			}
		})
	}
}

func TestStepChangeIsScheduled(t *testing.T) {
	h := bootstrappedAt(t, 2, nil, &api.Config{StepMs: 1000, GraceMs: 400})
	now := h.ms
	wantCode(t, h.run(setConfig(&api.ConfigPatch{StepMs: proto.Uint64(1500), GraceMs: proto.Uint64(200)})), api.ResultCode_RESULT_CODE_OK)
	c := h.state().Config()
	at := c.GetNextStepAtMs()
	if c.GetStepMs() != 1000 || c.GetNextStepMs() != 1500 || at%3000 != 0 || at < now+2*1000+400 || at >= now+2*1000+400+3000 {
		t.Fatalf("config %v: want step 1000 until a multiple of 3000 at least %d", c, now+2400)
	}
	if c.StepAt(at-1000) != 1000 || c.StepAt(at) != 1500 {
		t.Fatal("StepAt does not switch at the boundary")
	}
	// Columns before the boundary leave it pending; the first at it
	// promotes it.
	wantCode(t, h.run(column(at-1000, at)), api.ResultCode_RESULT_CODE_OK)
	if h.state().Config().GetNextStepAtMs() != at {
		t.Fatal("promoted early")
	}
	wantCode(t, h.run(column(at, at+1500)), api.ResultCode_RESULT_CODE_OK)
	if c := h.state().Config(); c.GetStepMs() != 1500 || c.GetNextStepMs() != 0 || c.GetNextStepAtMs() != 0 {
		t.Fatalf("after the boundary: %v", c)
	}
	// A step whose boundaries meet the current one's only after a day is
	// refused, naming the field.
	r := h.run(setConfig(&api.ConfigPatch{StepMs: proto.Uint64(3_599_999)}))
	wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
	if !strings.Contains(r.Message, "step_ms") {
		t.Fatalf("refusal %q", r.Message)
	}
	// Version 1: the step changes at once.
	h1 := bootstrappedAt(t, 1, nil, &api.Config{StepMs: 1000})
	wantCode(t, h1.run(setConfig(&api.ConfigPatch{StepMs: proto.Uint64(1500)})), api.ResultCode_RESULT_CODE_OK)
	if c := h1.state().Config(); c.GetStepMs() != 1500 || c.GetNextStepMs() != 0 {
		t.Fatalf("v1 step change %v", c)
	}
}

func TestVersion2FieldsRefusedAtVersion1(t *testing.T) {
	h := bootstrappedAt(t, 1, [][]byte{[]byte("m")}, &api.Config{StepMs: 1000})
	before := h.state()
	r := h.run(setConfig(&api.ConfigPatch{HoldBandBp: proto.Uint32(8000)}))
	wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
	if !strings.Contains(r.Message, "hold_band_bp") {
		t.Fatalf("refusal %q", r.Message)
	}
	assertUnchanged(t, before, h.state())
	for _, row := range []*api.ColumnRow{
		{RouteId: 1, Samples: []*api.WeightedKey{{Key: []byte("a"), Weight: 1}}},
		{RouteId: 1, SampleRate: 16},
		{RouteId: 1, TopKeys: []*api.KeyEstimate{{Key: []byte("a"), Lower: 1, Upper: 2, Variance: 3}}},
	} {
		r := h.run(column(1000, 2000, row))
		wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
		if !strings.Contains(r.Message, "cluster version 2") {
			t.Fatalf("refusal %q", r.Message)
		}
		assertUnchanged(t, before, h.state())
	}
}

// TestDecisionsKeepTheirNumbers: at version 2 a planned and a declined
// decision carry the explanation with the numbers behind it, so "why this
// key?" is answered after the route is gone.
func TestDecisionsKeepTheirNumbers(t *testing.T) {
	for _, version := range []uint32{1, 2} {
		h := bootstrappedAt(t, version, nil, hotConfig())
		h.run(column(1000, 2000, hotRow(1, "user42")))
		h.run(column(2000, 3000, hotRow(1, "user42")))
		d := h.state().Decisions()
		planned := d[len(d)-1]
		if planned.GetKind() != api.DecisionKind_DECISION_KIND_PLANNED {
			t.Fatalf("v%d: last decision %v", version, planned)
		}
		e := planned.GetExplanation()
		if version == 1 {
			if e != nil {
				t.Fatalf("v1 decision carries an explanation: %v", e)
			}
			continue
		}
		if e.GetReason() != api.Reason_REASON_PLANNED || string(e.GetHotKey()) != "user42" || e.GetHotKeyShareBp() == 0 ||
			e.GetHotKeyUpperShareBp() == 0 || e.GetThreshold() != 100_000 || e.GetFloor() != 50_000 || e.GetCandidateWindows() != 2 {
			t.Fatalf("v2 planned decision explanation %v", e)
		}
		// Step the op: the route is gone, its decision remains.
		wantCode(t, h.run(step(1, 1, 1, []byte("user42"))), api.ResultCode_RESULT_CODE_OK)
		if _, ok := h.state().Catalog().Route(1); ok {
			t.Fatal("route 1 still live")
		}
		if _, ok := h.state().Detector().Get(1); ok {
			t.Fatal("route 1 still tracked")
		}
	}
}

// TestUpgradeToVersion2: when the last version 1 member is replaced, the
// version 2 settings start at their defaults on every replica at the same
// entry.
func TestUpgradeToVersion2(t *testing.T) {
	h := bootstrappedAt(t, 1, nil, nil)
	member := func(id string, v uint32) *api.Command {
		return &api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: id, SupportedVersion: v}}}}
	}
	wantCode(t, h.run(member("n2", 1)), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(member("n1", 2)), api.ResultCode_RESULT_CODE_OK)
	if h.state().ClusterVersion() != 1 || h.state().Config().HoldBandBp != nil {
		t.Fatalf("version %d config %v", h.state().ClusterVersion(), h.state().Config())
	}
	wantCode(t, h.run(member("n2", 2)), api.ResultCode_RESULT_CODE_OK)
	c := h.state().Config()
	if h.state().ClusterVersion() != 2 || c.GetHoldBandBp() != DefaultHoldBandBP || !c.GetFloorFollowsThreshold() ||
		h.state().DetectorConfig().HoldBandBP != DefaultHoldBandBP {
		t.Fatalf("after the upgrade: version %d config %v", h.state().ClusterVersion(), c)
	}
}

// A route holding its count in the hold band, or cooling below the
// threshold, is explained but writes no decision: neither is a decline.
func TestHoldAndCoolWriteNoDecision(t *testing.T) {
	h := bootstrappedAt(t, 2, nil, hotConfig())
	// hotConfig: threshold 100000/min, 1 s columns: 6000 writes are hot,
	// 350 (84000/min) in the 80% band, 100 cold.
	h.run(column(1000, 2000, hotRow(1, "k")))
	before := len(h.state().Decisions())
	h.run(column(2000, 3000, &api.ColumnRow{RouteId: 1, Writes: 350}))
	if tr, _ := h.state().Detector().Get(1); tr.Explanation.Reason != detector.ReasonHoldBand || tr.ConsecutiveOver != 1 {
		t.Fatalf("band column: %+v", tr)
	}
	h.run(column(3000, 4000, &api.ColumnRow{RouteId: 1, Writes: 100}))
	if tr, _ := h.state().Detector().Get(1); tr.Explanation.Reason != detector.ReasonBelowThreshold || tr.ConsecutiveOver != 0 {
		t.Fatalf("cold column: %+v", tr)
	}
	if n := len(h.state().Decisions()); n != before {
		t.Fatalf("%d decisions written for hold and cool: %v", n-before, h.state().Decisions()[before:])
	}
}

// A version 2 state — hold band, derived floor, a pending step change,
// explanations and decisions with their numbers, an aborted op's cooldown —
// survives a snapshot to the byte.
func TestSnapshotRoundTripVersion2(t *testing.T) {
	h := bootstrappedAt(t, 2, nil, hotConfig())
	h.run(column(1000, 2000, hotRow(1, "user42")))
	h.run(column(2000, 3000, hotRow(1, "user42")))
	wantCode(t, h.run(abort(1, "not now")), api.ResultCode_RESULT_CODE_OK)
	h.run(column(3000, 4000, &api.ColumnRow{RouteId: 1, Writes: 350, SampleRate: 16, SampledTotal: 10, SampledVariance: 100,
		Samples: []*api.WeightedKey{{Key: []byte("a"), Weight: 3}}}))
	wantCode(t, h.run(setConfig(&api.ConfigPatch{StepMs: proto.Uint64(2000), HoldBandBp: proto.Uint32(9000)})), api.ResultCode_RESULT_CODE_OK)
	src := h.state()
	if src.Config().GetNextStepAtMs() == 0 || src.Config().GetHoldBandBp() != 9000 || !src.Config().GetFloorFollowsThreshold() {
		t.Fatalf("config %v", src.Config())
	}
	f2 := newQuiet(Options{})
	if err := restore(f2, persist(t, h.f)); err != nil {
		t.Fatal(err)
	}
	if got := f2.State(); got.Hash() != src.Hash() || !proto.Equal(got.Proto(), src.Proto()) {
		t.Fatalf("restored state differs:\n%v\n%v", got.Proto(), src.Proto())
	}
}
