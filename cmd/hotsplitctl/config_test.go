package main

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }

func TestParsePatch(t *testing.T) {
	good := []struct {
		args    []string
		want    *api.ConfigPatch
		changed string
	}{
		{[]string{"threshold=60000", "cooldown_ms=600000"}, &api.ConfigPatch{Threshold: u64(60000), CooldownMs: u64(600000)},
			"threshold=60000 cooldown_ms=600000"},
		{[]string{"grace=500ms", "op_ttl=10m", "step=1s", "cooldown=1h30m"},
			&api.ConfigPatch{GraceMs: u64(500), OpTtlMs: u64(600000), StepMs: u64(1000), CooldownMs: u64(5400000)},
			"cooldown_ms=5400000 step_ms=1000 op_ttl_ms=600000 grace_ms=500"},
		{[]string{"write_weight=4", "read_weight=0", "candidate_windows=3", "max_splits_per_cycle=2", "max_auto_routes=4294967295",
			"top_key_share_bp=8000", "top_key_absolute_floor=25000", "buckets=256", "smoothing_windows=5"},
			&api.ConfigPatch{WriteWeight: u32(4), ReadWeight: u32(0), CandidateWindows: u32(3), MaxSplitsPerCycle: u32(2),
				MaxAutoRoutes: u32(4294967295), TopKeyShareBp: u32(8000), TopKeyAbsoluteFloor: u64(25000), Buckets: u32(256), SmoothingWindows: u32(5)},
			"write_weight=4 read_weight=0 candidate_windows=3 max_splits_per_cycle=2 max_auto_routes=4294967295 top_key_share_bp=8000 top_key_absolute_floor=25000 buckets=256 smoothing_windows=5"},
	}
	for _, tc := range good {
		got, changed, err := parsePatch(tc.args)
		if err != nil || !proto.Equal(got, tc.want) || strings.Join(changed, " ") != tc.changed {
			t.Errorf("parsePatch(%q) = %v, %q, %v; want %v, %q", tc.args, got, changed, err, tc.want, tc.changed)
		}
	}
	// Every ConfigPatch field is accepted by its proto name.
	for _, name := range patchFieldNames() {
		if _, _, err := parsePatch([]string{name + "=1"}); err != nil {
			t.Errorf("field %s refused: %v", name, err)
		}
	}
	bad := []struct {
		args []string
		want string
	}{
		{[]string{"threshold"}, `"threshold" is not FIELD=VALUE`},
		{[]string{"=5"}, `"=5" is not FIELD=VALUE`},
		{[]string{"thresold=1", "cooldwn=2m", "threshold=x"}, `unknown config fields "thresold", "cooldwn"; known fields: threshold, write_weight,`},
		{[]string{"cooldown_ms_ms=1"}, `unknown config field "cooldown_ms_ms"`},
		{[]string{"threshold=-1"}, "threshold=-1: want a whole number from 0 to 18446744073709551615"},
		{[]string{"buckets=4294967296"}, "buckets=4294967296: want a whole number from 0 to 4294967295"},
		{[]string{"cooldown_ms=10m"}, "cooldown_ms=10m: want a whole number from 0 to 18446744073709551615 (milliseconds; or write cooldown=10m for a duration)"},
		{[]string{"cooldown=600000"}, "cooldown=600000: give a unit, e.g. cooldown=10m (or cooldown_ms=600000 for milliseconds)"},
		{[]string{"step=soon"}, "step=soon: not a duration such as 10m, 1s or 500ms"},
		{[]string{"step=-1s"}, "step=-1s: negative"},
		{[]string{"grace=1.5ms"}, "grace=1.5ms: not a whole number of milliseconds"},
		{[]string{"step_ms=1000", "step=1s"}, "step_ms is given twice (step_ms=1000 and step=1s)"},
	}
	for _, tc := range bad {
		_, _, err := parsePatch(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parsePatch(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestConfigGetSet(t *testing.T) {
	f := startCluster(t)
	f.set("GetConfig", &api.GetConfigResponse{Config: configFixture(), Read: &api.ReadInfo{AppliedIndex: 120, ServedBy: "n1"}})
	r := ctl(t, f, "autosplit", "config", "get")
	want := lines(
		`FIELD                   VALUE   MEANING`,
		`threshold               50000   weighted ops/min`,
		`write_weight            4`,
		`read_weight             1`,
		`candidate_windows       3`,
		`cooldown_ms             600000  10m0s`,
		`max_splits_per_cycle    1`,
		`max_auto_routes         1024`,
		`top_key_share_bp        8000    80.00%`,
		`top_key_absolute_floor  25000   weighted ops/min`,
		`buckets                 16`,
		`step_ms                 60000   1m0s`,
		`op_ttl_ms               600000  10m0s`,
		`smoothing_windows       5`,
		`grace_ms                30000   30s`,
		`(linearizable read by n1, applied index 120)`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("config get: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}

	cfg := configFixture()
	cfg.Threshold, cfg.CooldownMs = 60000, 300000
	f.set("SetConfig", &api.SetConfigResponse{Config: cfg})
	r = ctl(t, f, "autosplit", "config", "set", "threshold=60000", "cooldown=5m")
	for _, w := range []string{
		"config updated: threshold=60000 cooldown_ms=300000\n",
		"threshold               60000   weighted ops/min (changed)\n",
		"cooldown_ms             300000  5m0s (changed)\n",
		"write_weight            4\n",
	} {
		if r.code != 0 || !strings.Contains(r.stdout, w) {
			t.Errorf("config set: exit %d, output lacks %q:\n%s", r.code, w, r.stdout)
		}
	}
	req := f.last("SetConfig").(*api.SetConfigRequest)
	wantPatch := &api.ConfigPatch{Threshold: u64(60000), CooldownMs: u64(300000)}
	if !proto.Equal(req.GetPatch(), wantPatch) || req.GetActor() != "alice@ops1" || req.GetRequestId() == "" {
		t.Fatalf("sent %v, want patch %v", req, wantPatch)
	}

	r = ctl(t, f, "autosplit", "config", "set", "threshold=60000", "-o", "json")
	var got api.SetConfigResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || got.GetConfig().GetThreshold() != 60000 {
		t.Fatalf("json %s: %v", r.stdout, err)
	}

	// A patch that leaves the config as it is says so, marking nothing.
	f.set("GetConfig", &api.GetConfigResponse{Config: cfg})
	r = ctl(t, f, "autosplit", "config", "set", "threshold=60000")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "config unchanged: threshold=60000 already in force\n") || strings.Contains(r.stdout, "(changed)") {
		t.Fatalf("unchanged config set: exit %d\n%s", r.code, r.stdout)
	}

	// A rejected patch sends nothing.
	before := f.calls("SetConfig")
	r = ctl(t, f, "autosplit", "config", "set", "threshold=1", "bogus=2")
	if r.code != exitUsage || f.calls("SetConfig") != before || !strings.Contains(r.stderr, `unknown config field "bogus"`) {
		t.Fatalf("exit %d stderr %q calls %d -> %d", r.code, r.stderr, before, f.calls("SetConfig"))
	}
}

// FuzzParsePatch: parsePatch never panics on operator input, and the
// canonical assignments it reports parse back to the same patch.
func FuzzParsePatch(f *testing.F) {
	for _, s := range []string{"threshold=60000 cooldown=10m", "step=1s grace=500ms op_ttl=10m", "buckets=4294967296", "x=1", "cooldown=-1s", "=", "a=b=c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		args := strings.Fields(s)
		patch, changed, err := parsePatch(args)
		if err != nil {
			return
		}
		again, changed2, err := parsePatch(changed)
		if err != nil || !proto.Equal(patch, again) || strings.Join(changed, " ") != strings.Join(changed2, " ") {
			t.Fatalf("parsePatch(%q) = %v, %q; its canonical form gives %v, %q, %v", args, patch, changed, again, changed2, err)
		}
	})
}
