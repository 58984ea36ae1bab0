package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// The merge settings (AutoMerge) of a cluster at version 3.
const wantMergeDefaults = "merge_threshold_bp=2500 merge_windows=10 merge_delay_ms=1800000 max_merges_per_cycle=1 merge_margin_bp=5000"

func mergePatches() map[string]*api.ConfigPatch {
	return map[string]*api.ConfigPatch{
		"merge_threshold_bp":   {MergeThresholdBp: proto.Uint32(2000)},
		"merge_windows":        {MergeWindows: proto.Uint32(20)},
		"merge_delay_ms":       {MergeDelayMs: proto.Uint64(60_000)},
		"max_merges_per_cycle": {MaxMergesPerCycle: proto.Uint32(2)},
		"merge_margin_bp":      {MergeMarginBp: proto.Uint32(6000)},
	}
}

func TestMergeSettingsRefusedBelowVersion3(t *testing.T) {
	for _, version := range []uint32{clusterversion.Version1, clusterversion.Version2} {
		h := bootstrappedAt(t, version, nil, nil)
		if c := h.state().Config(); c.MergeWindows != nil || c.MergeThresholdBp != nil || c.MaxMergesPerCycle != nil {
			t.Fatalf("version %d bootstrap holds merge settings: %v", version, c)
		}
		for field, p := range mergePatches() {
			before := h.state()
			r := h.run(setConfig(p))
			wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
			if !strings.Contains(r.Message, field+": needs cluster version 3") {
				t.Errorf("version %d, %s: refusal %q", version, field, r.Message)
			}
			assertUnchanged(t, before, h.state())
		}
	}
}

// Rising to version 3 — from 2, or from 1 in one jump — sets the merge
// defaults in one CONFIG decision, on every replica at the same entry.
func TestUpgradeToVersion3SetsMergeDefaults(t *testing.T) {
	for _, from := range []uint32{clusterversion.Version1, clusterversion.Version2} {
		h := bootstrappedAt(t, from, nil, nil)
		before := len(h.state().Decisions())
		wantCode(t, h.run(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: 3}}}}),
			api.ResultCode_RESULT_CODE_OK)
		if v := h.state().ClusterVersion(); v != clusterversion.Version3 {
			t.Fatalf("from %d: version %d", from, v)
		}
		var details []string
		for _, d := range h.state().Decisions()[before:] {
			details = append(details, d.GetDetail())
		}
		if got := strings.Join(details, "; "); !strings.Contains(got, "cluster version 3: "+wantMergeDefaults) {
			t.Errorf("from %d: decisions %q", from, got)
		}
		dc := h.state().DetectorConfig()
		if dc.MergeWindows != detector.DefaultMergeWindows || dc.MaxMergesPerCycle != detector.DefaultMaxMergesPerCycle ||
			dc.MergeThresholdBP != detector.DefaultMergeThresholdBP || dc.MergeDelayMs != detector.DefaultMergeDelayMs ||
			dc.MergeMarginBP != detector.DefaultMergeMarginBP {
			t.Errorf("from %d: detector config %+v", from, dc)
		}
	}
}

func TestMergeSettingsAtVersion3(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, nil, nil)
	if got := detectorConfig(h.state().Config()); got != detector.DefaultConfig() {
		t.Fatalf("bootstrap at 3: %+v, want the detector defaults %+v", got, detector.DefaultConfig())
	}
	for field, p := range mergePatches() {
		r := h.run(setConfig(p))
		wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
		if !strings.Contains(h.state().Decisions()[len(h.state().Decisions())-1].GetDetail(), field) {
			t.Errorf("%s: the CONFIG decision does not name it", field)
		}
	}
	if c := h.state().DetectorConfig(); c.MergeThresholdBP != 2000 || c.MergeWindows != 20 || c.MergeDelayMs != 60_000 ||
		c.MaxMergesPerCycle != 2 || c.MergeMarginBP != 6000 {
		t.Fatalf("patched %+v", c)
	}
	for name, tc := range map[string]struct {
		p     *api.ConfigPatch
		field string
	}{
		"merge_windows not above candidate_windows": {&api.ConfigPatch{MergeWindows: proto.Uint32(3)}, "merge_windows"},
		"candidate_windows up to merge_windows":     {&api.ConfigPatch{CandidateWindows: proto.Uint32(20)}, "merge_windows"},
		"a cold threshold above half":               {&api.ConfigPatch{MergeThresholdBp: proto.Uint32(5001)}, "merge_threshold_bp"},
		"a margin under 10%":                        {&api.ConfigPatch{MergeMarginBp: proto.Uint32(999)}, "merge_margin_bp"},
		"a delay over 7 days":                       {&api.ConfigPatch{MergeDelayMs: proto.Uint64(8 * 24 * 3600 * 1000)}, "merge_delay_ms"},
		"a budget over 1024":                        {&api.ConfigPatch{MaxMergesPerCycle: proto.Uint32(1025)}, "max_merges_per_cycle"},
	} {
		before := h.state()
		r := h.run(setConfig(tc.p))
		wantCode(t, r, api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
		if !strings.HasPrefix(strings.TrimPrefix(r.Message, "invalid config: "), tc.field+":") {
			t.Errorf("%s: refusal %q does not start with %s", name, r.Message, tc.field)
		}
		assertUnchanged(t, before, h.state())
	}
	wantCode(t, h.run(setConfig(&api.ConfigPatch{MaxMergesPerCycle: proto.Uint32(0)})), api.ResultCode_RESULT_CODE_OK)
	if h.state().DetectorConfig().MaxMergesPerCycle != 0 {
		t.Fatal("max_merges_per_cycle 0 (no automatic merges) not kept")
	}
}

// A bootstrap at version 3 with many candidate windows gets merge windows
// above them, not a default the validation refuses.
func TestMergeWindowsDefaultAboveCandidateWindows(t *testing.T) {
	c := withDefaults(&api.Config{CandidateWindows: 30}, clusterversion.Version3)
	if c.GetMergeWindows() != 31 {
		t.Fatalf("merge_windows %d with 30 candidate windows", c.GetMergeWindows())
	}
	if err := ValidateConfig(c); err != nil {
		t.Fatal(err)
	}
}
