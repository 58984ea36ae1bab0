package fsm

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// Every detector rule is turned on by exactly one feature, so no rule is
// left off at every version.
func TestFeatureEffectsTurnOnEveryRuleOnce(t *testing.T) {
	var rules detector.Rules
	for _, f := range clusterversion.All() {
		r := effects[f].rules
		if rules&r != 0 {
			t.Errorf("%s: detector rules %b already turned on by another feature", f, r)
		}
		rules |= r
	}
	if rules != detector.AllRules {
		t.Errorf("the table turns on detector rules %b, the detector knows %b", rules, detector.AllRules)
	}
	if len(effects) > len(clusterversion.All()) {
		t.Errorf("effects name %d features, the table has %d", len(effects), len(clusterversion.All()))
	}
}

// The detector rule set of each version is the union of its features'
// rules: none at version 1 (the zero value, the first release's rules),
// the version 2 release's four at version 2, every rule of this build at
// the version it supports.
func TestRulesAtVersion(t *testing.T) {
	v2 := detector.RuleHoldBand | detector.RuleBalanceSplit | detector.RuleLowerBoundIsolation | detector.RuleColumnExplanations
	for _, tc := range []struct {
		version uint32
		want    detector.Rules
	}{
		{clusterversion.Version1, 0},
		{clusterversion.Version2, v2},
		{clusterversion.Supported, detector.AllRules},
	} {
		if got := rulesAt(tc.version); got != tc.want {
			t.Errorf("rulesAt(%d) = %b, want %b", tc.version, got, tc.want)
		}
	}
	for f, e := range effects {
		if r := e.rules; r != 0 && (!rulesAt(f.Version()).Has(r) || rulesAt(f.Version()-1).Has(r)) {
			t.Errorf("%s: rules %b not turned on exactly at version %d", f, r, f.Version())
		}
	}
}

func TestStateHas(t *testing.T) {
	for _, v := range clusterversion.Versions() {
		h := bootstrappedAt(t, v, nil, nil)
		for _, f := range clusterversion.All() {
			if h.state().Has(f) != f.EnabledAt(v) || (h.state().Require(f) == nil) != f.EnabledAt(v) {
				t.Errorf("at version %d: Has(%s) %v, Require %v", v, f, h.state().Has(f), h.state().Require(f))
			}
		}
		if note := h.state().KeptNote("bob"); (note == "bob") != clusterversion.ActorNotes.EnabledAt(v) {
			t.Errorf("at version %d the note %q is kept", v, note)
		}
	}
}

// raiseSteps crosses every version with hooks in (from, to], in version
// order, and the hooks of one version in table order, whatever order the
// table lists versions in.
func TestRaiseSteps(t *testing.T) {
	hook := func(*State) string { return "" }
	table := []hookRow{
		{name: "c3", version: 3, raise: hook},
		{name: "a2", version: 2, raise: hook},
		{name: "d4", version: 4, raise: hook},
		{name: "b2", version: 2, raise: hook},
		{name: "e3", version: 3, raise: hook},
		{name: "f6", version: 6, raise: hook},
	}
	for _, tc := range []struct {
		from, to uint32
		want     string
	}{
		{1, 1, ""},
		{1, 2, "2:a2,b2"},
		{1, 4, "2:a2,b2 3:c3,e3 4:d4"},
		{2, 4, "3:c3,e3 4:d4"},
		{3, 3, ""},
		{4, 3, ""},
		{1, 5, "2:a2,b2 3:c3,e3 4:d4"},
		{5, 6, "6:f6"},
		{4, 1<<32 - 1, "6:f6"},
	} {
		var got []string
		for _, s := range raiseSteps(table, tc.from, tc.to) {
			var names []string
			for _, i := range s.rows {
				names = append(names, table[i].name)
			}
			got = append(got, fmt.Sprintf("%d:%s", s.version, strings.Join(names, ",")))
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%d -> %d: %q, want %q", tc.from, tc.to, g, tc.want)
		}
	}
}

// A raise that jumps over several versions runs the hooks of each crossed
// version in order, each seeing the state its predecessors left and the
// cluster at its own version, and records one decision per version.
func TestRaiseVersionJumpRunsEveryHookInOrder(t *testing.T) {
	h := bootstrappedAt(t, 1, nil, nil)
	var ran []string
	hook := func(name string) func(*State) string {
		return func(s *State) string {
			ran = append(ran, fmt.Sprintf("%s@%d", name, s.ClusterVersion()))
			return name + "=" + fmt.Sprint(len(ran))
		}
	}
	table := []hookRow{
		{name: "late", version: 4, raise: hook("late")},
		{name: "band", version: 2, raise: effects[clusterversion.HoldBand].raise},
		{name: "mid", version: 3, raise: hook("mid")},
		{name: "early", version: 2, raise: hook("early")},
	}
	cur := h.state()
	ns := *cur
	a := &applier{f: h.f, s: &ns, nowHLC: cur.LastHLC()}
	a.raiseVersion(table, 4)
	if want := []string{"early@2", "mid@3", "late@4"}; !slices.Equal(ran, want) {
		t.Fatalf("hooks ran %v, want %v", ran, want)
	}
	if ns.ClusterVersion() != 4 || ns.Config().GetHoldBandBp() != DefaultHoldBandBP || ns.DetectorConfig().HoldBandBP != DefaultHoldBandBP {
		t.Fatalf("after the raise: version %d config %v", ns.ClusterVersion(), ns.Config())
	}
	var details []string
	for _, d := range ns.Decisions()[len(cur.Decisions()):] {
		if d.GetKind() != api.DecisionKind_DECISION_KIND_CONFIG || d.GetActor() != "cluster" {
			t.Errorf("decision %v", d)
		}
		details = append(details, d.GetDetail())
	}
	want := []string{"cluster version 2: hold_band_bp=8000 early=1", "cluster version 3: mid=2", "cluster version 4: late=3"}
	if !slices.Equal(details, want) {
		t.Fatalf("decisions %q, want %q", details, want)
	}
	// Raising to the same version, or lower, runs nothing.
	ran = nil
	a.raiseVersion(table, 4)
	a.raiseVersion(table, 3)
	if len(ran) != 0 || ns.ClusterVersion() != 4 {
		t.Fatalf("a raise to no higher version ran %v, version %d", ran, ns.ClusterVersion())
	}
}

// The real 1 -> 2 raise through SetMember runs the version 2 hooks once.
func TestRaiseToVersion2RunsItsHooks(t *testing.T) {
	h := bootstrappedAt(t, 1, nil, &api.Config{Threshold: 70_000, TopKeyAbsoluteFloor: 20_000})
	before := len(h.state().Decisions())
	wantCode(t, h.run(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: 2}}}}),
		api.ResultCode_RESULT_CODE_OK)
	ds := h.state().Decisions()[before:]
	if len(ds) != 1 || ds[0].GetDetail() != "cluster version 2: hold_band_bp=8000 floor_follows_threshold=false" {
		t.Fatalf("decisions of the raise: %v", ds)
	}
	wantCode(t, h.run(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n2", SupportedVersion: 2}}}}),
		api.ResultCode_RESULT_CODE_OK)
	if n := len(h.state().Decisions()) - before; n != 1 {
		t.Fatalf("%d decisions after a second member at the same version", n)
	}
}

// TestRaisesAt: a version raises (writes a "cluster version N:" decision)
// exactly when a row of its own has a raise hook.
func TestRaisesAt(t *testing.T) {
	if RaisesAt(clusterversion.Version1) || !RaisesAt(clusterversion.Version2) {
		t.Fatalf("RaisesAt(1)=%v RaisesAt(2)=%v, want false and true (version 2's hold band has a hook)", RaisesAt(clusterversion.Version1), RaisesAt(clusterversion.Version2))
	}
	for _, v := range clusterversion.Versions() {
		hooked := false
		for _, r := range raiseHooks() {
			hooked = hooked || r.version == v
		}
		if RaisesAt(v) != hooked {
			t.Errorf("RaisesAt(%d) = %v, the table says %v", v, RaisesAt(v), hooked)
		}
	}
}
