package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

func TestSetAutoSplit(t *testing.T) {
	h := bootstrapped(t, nil, nil) // switch on, source BOOTSTRAP_FLAG
	// A flag may change the switch while no operator has set it.
	wantCode(t, h.run(setSwitch(false, api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG)), api.ResultCode_RESULT_CODE_OK)
	if sw := h.state().Switch(); sw.Enabled || sw.Source != api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG {
		t.Fatalf("switch %v", sw)
	}
	r := h.run(operatorSwitch(true))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	sw := h.state().Switch()
	if !sw.Enabled || sw.Actor != "alice" || sw.Reason != "test" || sw.Source != api.SwitchSource_SWITCH_SOURCE_OPERATOR ||
		sw.ChangedAtHlc != h.state().LastHLC() || r.Switch != sw {
		t.Fatalf("switch %v result %v", sw, r.Switch)
	}
	// Once an operator set it, a flag changes nothing and gets the switch
	// back to log the mismatch.
	before := h.state()
	r = h.run(setSwitch(false, api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	if r.Switch != before.Switch() || !strings.Contains(r.Message, "operator") {
		t.Fatalf("result %v", r.CommandResult)
	}
	assertUnchanged(t, before, h.state())
	// An operator may set it again.
	wantCode(t, h.run(operatorSwitch(false)), api.ResultCode_RESULT_CODE_OK)
	if h.state().Switch().Enabled {
		t.Fatal("operator disable ignored")
	}
	want := []api.DecisionKind{api.DecisionKind_DECISION_KIND_SWITCH, api.DecisionKind_DECISION_KIND_SWITCH, api.DecisionKind_DECISION_KIND_SWITCH}
	if got := decisionKinds(h.state()); !equalKinds(got, want) {
		t.Fatalf("decisions %v", got)
	}
}

func TestSetAutoSplitBadSource(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	before := h.state()
	r := h.run(setSwitch(false, api.SwitchSource_SWITCH_SOURCE_UNSPECIFIED))
	wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
	if !strings.Contains(r.Message, "source") {
		t.Fatalf("message %q", r.Message)
	}
	assertUnchanged(t, before, h.state())
}

func TestSetConfig(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	h.editState(func(p *api.StateSnapshot) {
		p.Tracked = []*api.TrackedRoute{{RouteId: 1, ConsecutiveOver: 2, LastScore: 9, CooldownUntilMs: 123, Explanation: &api.Explanation{}}}
	})
	r := h.run(setConfig(&api.ConfigPatch{Threshold: new(uint64(1234)), StepMs: new(uint64(1000)), GraceMs: new(uint64(500))}))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	c := s.Config()
	if c.Threshold != 1234 || c.StepMs != 1000 || c.GraceMs != 500 || c.GetWriteWeight() != 4 || r.Config != c {
		t.Fatalf("config %v result %v", c, r.Config)
	}
	if s.DetectorConfig().Threshold != 1234 {
		t.Fatal("detector config not updated")
	}
	tr, _ := s.Detector().Get(1)
	if tr.ConsecutiveOver != 0 || tr.CooldownUntilMs != 123 {
		t.Fatalf("hysteresis not reset or cooldown lost: %+v", tr)
	}
	d := s.Decisions()
	if d[len(d)-1].Kind != api.DecisionKind_DECISION_KIND_CONFIG || d[len(d)-1].Detail != "threshold=1234 step_ms=1000 grace_ms=500" {
		t.Fatalf("decision %v", d[len(d)-1])
	}
}

func TestSetConfigRejections(t *testing.T) {
	tests := []struct {
		name  string
		patch *api.ConfigPatch
		field string
	}{
		{"no patch", nil, "patch"},
		{"threshold 0", &api.ConfigPatch{Threshold: new(uint64(0))}, "threshold"},
		{"buckets 257", &api.ConfigPatch{Buckets: new(uint32(257))}, "buckets"},
		{"share above 100%", &api.ConfigPatch{TopKeyShareBp: new(uint32(10001))}, "top_key_share_bp"},
		{"grace above step", &api.ConfigPatch{GraceMs: new(uint64(60001))}, "grace_ms"},
		{"no weights", &api.ConfigPatch{WriteWeight: new(uint32(0)), ReadWeight: new(uint32(0))}, "write_weight"},
		{"op ttl 0", &api.ConfigPatch{OpTtlMs: new(uint64(0))}, "op_ttl_ms"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrapped(t, nil, nil)
			before := h.state()
			r := h.run(setConfig(tc.patch))
			wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
			if !strings.Contains(r.Message, tc.field) {
				t.Fatalf("message %q does not name %q", r.Message, tc.field)
			}
			assertUnchanged(t, before, h.state())
		})
	}
}

func TestValidateConfig(t *testing.T) {
	if err := ValidateConfig(DefaultConfig()); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if err := ValidateConfig(nil); err == nil {
		t.Fatal("nil config accepted")
	}
	// The defaults agree with the detector's own.
	if got, want := detectorConfig(DefaultConfig()), detector.DefaultConfig(); got != want {
		t.Fatalf("detector config of defaults %+v, detector defaults %+v", got, want)
	}
}

func TestApplyPatchDoesNotModifyInputs(t *testing.T) {
	c := DefaultConfig()
	p := &api.ConfigPatch{Threshold: new(uint64(7))}
	out := ApplyPatch(c, p, clusterversion.Version2)
	if c.Threshold != 50000 || out.Threshold != 7 || out.Buckets != c.Buckets {
		t.Fatalf("in %v out %v", c, out)
	}
}

// The decision ring keeps the newest DecisionRingSize decisions, oldest
// first, with sequence numbers that keep counting.
func TestDecisionRingBounded(t *testing.T) {
	h := newHarness(t, Options{DecisionRingSize: 3})
	h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1"}}})
	for i := range 5 {
		h.run(operatorSwitch(i%2 == 0))
	}
	ds := h.state().Decisions()
	if len(ds) != 3 || ds[0].Seq != 3 || ds[1].Seq != 4 || ds[2].Seq != 5 || h.state().Proto().NextDecisionSeq != 6 {
		t.Fatalf("ring %v", ds)
	}
}

// Cluster version 2 refuses an empty patch (it would only reset every
// hysteresis counter) and configs beyond the new upper bounds; at version 1
// Apply keeps the old rules so mixed-version replicas agree.
func TestSetConfigVersion2Bounds(t *testing.T) {
	tests := []struct {
		name  string
		patch *api.ConfigPatch
		field string
	}{
		{"empty patch", &api.ConfigPatch{}, "patch"},
		{"max_auto_routes 2^32-1", &api.ConfigPatch{MaxAutoRoutes: new(uint32(1<<32 - 1))}, "max_auto_routes"},
		{"threshold above limit", &api.ConfigPatch{Threshold: new(uint64(MaxScoreLimit + 1))}, "threshold"},
		{"floor above limit", &api.ConfigPatch{TopKeyAbsoluteFloor: new(uint64(MaxScoreLimit + 1))}, "top_key_absolute_floor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := bootstrappedAt(t, clusterversion.Version2, nil, nil)
			before := h.state()
			r := h.run(setConfig(tc.patch))
			wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
			if !strings.Contains(r.Message, tc.field) {
				t.Fatalf("message %q does not name %q", r.Message, tc.field)
			}
			assertUnchanged(t, before, h.state())

			v1 := bootstrappedAt(t, clusterversion.Version1, nil, nil)
			wantCode(t, v1.run(setConfig(tc.patch)), api.ResultCode_RESULT_CODE_OK)
		})
	}
	h := bootstrappedAt(t, clusterversion.Version2, nil, nil)
	wantCode(t, h.run(setConfig(&api.ConfigPatch{MaxAutoRoutes: new(uint32(MaxAutoRoutesLimit))})), api.ResultCode_RESULT_CODE_OK)
}

// From cluster version 2 the caller's self-declared text is kept as a note
// beside the authenticated actor; at version 1 it is not (a v1 replica
// knows no such field).
func TestActorNote(t *testing.T) {
	for _, v := range []uint32{clusterversion.Version1, clusterversion.Version2} {
		h := bootstrappedAt(t, v, nil, nil)
		want := ""
		if v >= clusterversion.Version2 {
			want = "alice-the-sre"
		}
		r := h.run(&api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{
			Enabled: false, Actor: "alice", Note: "alice-the-sre", Reason: "look", Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR}}})
		wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
		sw := h.state().Switch()
		d := h.state().Decisions()
		last := d[len(d)-1]
		if sw.GetActor() != "alice" || sw.GetNote() != want || last.GetActor() != "alice" || last.GetNote() != want {
			t.Fatalf("version %d: switch %v decision %v, want note %q", v, sw, last, want)
		}
		r = h.run(&api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{
			Patch: &api.ConfigPatch{Threshold: new(uint64(777))}, Actor: "alice", Note: "alice-the-sre"}}})
		wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
		d = h.state().Decisions()
		if last := d[len(d)-1]; last.GetActor() != "alice" || last.GetNote() != want {
			t.Fatalf("version %d: config decision %v", v, last)
		}
	}
}

// From cluster version 3 a patch that leaves the config as it is changes
// nothing: the hysteresis counters stand, no decision is recorded, and the
// answer says "unchanged"; a patch that changes one value still resets
// them. Below version 3 every accepted patch resets them (the old rule).
func TestSetConfigUnchangedIsANoop(t *testing.T) {
	tracked := func(h *harness) {
		h.editState(func(p *api.StateSnapshot) {
			p.Tracked = []*api.TrackedRoute{{RouteId: 1, ConsecutiveOver: 2, LastScore: 9, Explanation: &api.Explanation{}}}
		})
	}
	counter := func(h *harness) uint32 { tr, _ := h.state().Detector().Get(1); return tr.ConsecutiveOver }

	h := bootstrappedAt(t, clusterversion.Version3, nil, nil)
	tracked(h)
	cur := h.state().Config()
	before := h.state()
	r := h.run(setConfig(&api.ConfigPatch{Threshold: proto.Uint64(cur.GetThreshold()), StepMs: proto.Uint64(cur.GetStepMs())}))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	if r.Message != ConfigUnchanged || !proto.Equal(r.Config, cur) {
		t.Fatalf("answered %q %v", r.Message, r.Config)
	}
	assertUnchanged(t, before, h.state())
	if counter(h) != 2 {
		t.Fatal("an unchanged patch reset the hysteresis")
	}
	r = h.run(setConfig(&api.ConfigPatch{Threshold: proto.Uint64(cur.GetThreshold() + 1)}))
	if r.Message != "" || counter(h) != 0 {
		t.Fatalf("a change answered %q with the counter at %d", r.Message, counter(h))
	}

	old := bootstrappedAt(t, clusterversion.Version2, nil, nil)
	tracked(old)
	r = old.run(setConfig(&api.ConfigPatch{Threshold: proto.Uint64(old.state().Config().GetThreshold())}))
	if r.Message != "" || counter(old) != 0 {
		t.Fatalf("at version 2 an unchanged patch answered %q with the counter at %d, want the reset", r.Message, counter(old))
	}
}

// A step change scheduled on a cluster that reports nothing takes effect
// from version 3 once the fence renewals' time is two of the longer step
// plus the grace past its boundary; until then it is pending (and columns
// would take it at the boundary). Below version 3 it stays pending until a
// column comes.
func TestStepChangeWithoutColumns(t *testing.T) {
	renew := func(h *harness, atMs uint64) *Result {
		h.ms = atMs
		return h.run(&api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: atMs + 1000}}})
	}
	for _, version := range []uint32{clusterversion.Version2, clusterversion.Version3} {
		h := bootstrappedAt(t, version, nil, nil)
		old := h.state().Config().GetStepMs()
		wantCode(t, h.run(setConfig(&api.ConfigPatch{StepMs: proto.Uint64(10_000), GraceMs: proto.Uint64(5_000)})), api.ResultCode_RESULT_CODE_OK)
		cfg := h.state().Config()
		at := cfg.GetNextStepAtMs()
		if at == 0 || cfg.GetStepMs() != old {
			t.Fatalf("v%d: the change was not scheduled: %v", version, cfg)
		}
		due := at + 2*max(old, 10_000) + 5_000
		renew(h, at)
		renew(h, due-1)
		if c := h.state().Config(); c.GetStepMs() != old || c.GetNextStepAtMs() != at {
			t.Fatalf("v%d: took effect before it was due: %v", version, c)
		}
		renew(h, due)
		c := h.state().Config()
		if promoted := c.GetStepMs() == 10_000 && c.GetNextStepAtMs() == 0 && c.GetNextStepMs() == 0; promoted != (version == clusterversion.Version3) {
			t.Fatalf("v%d: config after the renewal at the due time: %v", version, c)
		}
	}
}
