package main

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// nowMs is the server's clock in the fixtures: 2024-08-12 09:59:49.012 UTC.
const nowMs = 1723456789012

func configFixture() *api.Config {
	return &api.Config{
		Threshold: 50000, WriteWeight: new(uint32(4)), ReadWeight: new(uint32(1)), CandidateWindows: 3, CooldownMs: 600000,
		MaxSplitsPerCycle: 1, MaxAutoRoutes: 1024, TopKeyShareBp: 8000, TopKeyAbsoluteFloor: 25000,
		Buckets: 16, StepMs: 60000, OpTtlMs: 600000, SmoothingWindows: 5, GraceMs: 30000,
	}
}

func statusFixture() *api.StatusResponse {
	compound := api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND
	return &api.StatusResponse{
		Switch: &api.AutoSplitSwitch{Enabled: true, Actor: "alice@ops1", Reason: "hot shard incident",
			Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR, ChangedAtHlc: splitHLC},
		Config:          configFixture(),
		LastColumnAtMs:  1723456780000,
		LastColumnLagMs: 9012,
		LiveOps: []*api.Op{{OpId: 12, ParentRouteId: 7, SplitKeys: [][]byte{[]byte("user:42"), []byte("user:42\x00")},
			Origin: compound, NextStep: 2, State: api.OpState_OP_STATE_RUNNING, CreatedHlc: splitHLC, TargetRouteId: 14, Score: 182000}},
		Candidates: []*api.TrackedRoute{
			{RouteId: 7, ConsecutiveOver: 3, LastScore: 182000, RecentScores: []uint64{150000, 170000, 182000},
				Explanation: &api.Explanation{Reason: api.Reason_REASON_PLANNED, Origin: compound, OpId: 12}},
			{RouteId: 9, ConsecutiveOver: 4, LastScore: 61000, CooldownUntilMs: nowMs + 252000, RecentScores: []uint64{61000},
				Explanation: &api.Explanation{Reason: api.Reason_REASON_COOLDOWN}},
		},
		Cooldowns: []*api.TrackedRoute{{RouteId: 9, CooldownUntilMs: nowMs + 252000}, {RouteId: 11, CooldownUntilMs: nowMs - 1}},
		Recent: []*api.Decision{
			{Seq: 41, AtHlc: splitHLC, Kind: api.DecisionKind_DECISION_KIND_PLANNED, RouteId: 7, OpId: 12, Origin: compound,
				Reason: api.Reason_REASON_PLANNED, Score: 182000, SplitKeys: [][]byte{[]byte("user:42"), []byte("user:42\x00")}},
			{Seq: 40, AtHlc: splitHLC - 5, Kind: api.DecisionKind_DECISION_KIND_SWITCH, Actor: "alice@ops1", Detail: "enabled: hot shard incident"},
		},
		Warnings:            []string{"member n3 started with --autoSplit=false; the switch was set by an operator"},
		LiveRoutes:          42,
		NowMs:               nowMs,
		Read:                &api.ReadInfo{AppliedIndex: 120, CatalogVersion: 9, ServedBy: "n1"},
		LastColumnReporters: []string{"dn1", "dn2"},
	}
}

func TestAutosplitStatusTable(t *testing.T) {
	f := startCluster(t)
	f.set("Status", statusFixture())
	r := ctl(t, f, "autosplit", "status", "--limit", "5")
	want := lines(
		`switch       enabled, set by alice@ops1 (source operator) at 1723456789012.3 (2024-08-12 09:59:49.012Z)`,
		`reason       "hot shard incident"`,
		`warnings     member n3 started with --autoSplit=false; the switch was set by an operator`,
		`routes       42 live`,
		`last column  2024-08-12 09:59:40.000Z, lag 9.012s, reporters dn1, dn2`,
		`now          2024-08-12 09:59:49.012Z`,
		`read         linearizable read by n1, applied index 120`,
		``,
		`config`,
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
		``,
		`live ops (1)`,
		`OP    ROUTE  ORIGIN              STATE    NEXT STEP                       SCORE   CREATED`,
		`op12  r7     isolation_compound  running  2/2 split r14 at "user:42\x00"  182000  1723456789012.3 (2024-08-12 09:59:49.012Z)`,
		``,
		`candidates (2)`,
		`ROUTE  CONSECUTIVE  SCORE   SMOOTHED  REASON`,
		`r7     3/3          182000  167333    planned op12 (isolation_compound)`,
		`r9     4/3          61000   61000     cooldown (4m12s left)`,
		``,
		`merge candidates: none`,
		``,
		`cooldowns (2)`,
		`ROUTE  UNTIL                     LEFT`,
		`r9     2024-08-12 10:04:01.012Z  4m12s`,
		`r11    2024-08-12 09:59:49.011Z  ended`,
		``,
		`finished ops: none`,
		``,
		`recent decisions (2)`,
		`SEQ  AT                                              KIND     ROUTE  OP    ORIGIN              REASON   SCORE   DETAIL`,
		`41   1723456789012.3 (2024-08-12 09:59:49.012Z)      planned  r7     op12  isolation_compound  planned  182000  keys "user:42" "user:42\x00"`,
		`40   1723456789011.65534 (2024-08-12 09:59:49.011Z)  switch   -      -     -                   -        -       by alice@ops1; enabled: hot shard incident`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("autosplit status: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if req := f.last("Status").(*api.StatusRequest); req.GetLimit() != 5 || req.GetConsistency() != api.Consistency_CONSISTENCY_LINEARIZABLE {
		t.Fatalf("sent %v", req)
	}
}

func TestAutosplitStatusEmptyAndJSON(t *testing.T) {
	f := startCluster(t)
	f.set("Status", &api.StatusResponse{Switch: &api.AutoSplitSwitch{}, Config: configFixture(), NowMs: nowMs})
	r := ctl(t, f, "autosplit", "status")
	for _, want := range []string{
		"switch       disabled (never set)\n", "warnings     none\n", "last column  none committed yet\n",
		"\nlive ops: none\n", "\ncandidates: none\n", "\ncooldowns: none\n", "\nrecent decisions: none\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("empty status lacks %q:\n%s", want, r.stdout)
		}
	}
	f.set("Status", statusFixture())
	r = ctl(t, f, "autosplit", "status", "-o", "json")
	var got api.StatusResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || !proto.Equal(&got, statusFixture()) {
		t.Fatalf("json does not decode to the status: %v\n%s", err, r.stdout)
	}
	compact := compactJSON(t, r.stdout)
	for _, s := range []string{`"switch":{"enabled":true,"actor":"alice@ops1","reason":"hot shard incident","source":"SWITCH_SOURCE_OPERATOR"`,
		`"last_column_lag_ms":"9012"`, `"consecutive_over":3`, `"recent_scores":["150000","170000","182000"]`, `"cooldown_until_ms":"1723457041012"`} {
		if !strings.Contains(compact, s) {
			t.Errorf("json lacks %s", s)
		}
	}
}

func TestAutosplitEnableDisable(t *testing.T) {
	f := startCluster(t)
	for _, tc := range []struct {
		verb    string
		enabled bool
		want    string
	}{
		{"disable", false, lines(
			`automatic splitting disabled`,
			`switch  disabled, set by alice@ops1 (source operator) at 1723456789012.3 (2024-08-12 09:59:49.012Z)`,
			`reason  "incident 4711: freeze"`,
		)},
		{"enable", true, lines(
			`automatic splitting enabled`,
			`switch  enabled, set by alice@ops1 (source operator) at 1723456789012.3 (2024-08-12 09:59:49.012Z)`,
			`reason  "incident 4711: freeze"`,
		)},
	} {
		f.set("SetEnabled", &api.SetEnabledResponse{Switch: &api.AutoSplitSwitch{Enabled: tc.enabled, Actor: "alice@ops1",
			Reason: "incident 4711: freeze", Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR, ChangedAtHlc: splitHLC}})
		r := ctl(t, f, "autosplit", tc.verb, "--reason", "incident 4711: freeze")
		if r.code != 0 || r.stdout != tc.want {
			t.Fatalf("%s: exit %d stderr %q\n%s\nwant:\n%s", tc.verb, r.code, r.stderr, r.stdout, tc.want)
		}
		req := f.last("SetEnabled").(*api.SetEnabledRequest)
		if req.GetEnabled() != tc.enabled || req.GetReason() != "incident 4711: freeze" || req.GetActor() != "alice@ops1" || len(req.GetRequestId()) != 32 {
			t.Fatalf("%s sent %v", tc.verb, req)
		}
		r = ctl(t, f, "autosplit", tc.verb, "--reason", "x", "-o", "json")
		var got api.SetEnabledResponse
		if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || got.GetSwitch().GetEnabled() != tc.enabled {
			t.Fatalf("%s json %s: %v", tc.verb, r.stdout, err)
		}
		// The reason is required: nothing is sent without it.
		before := f.calls("SetEnabled")
		r = ctl(t, f, "autosplit", tc.verb)
		if r.code != exitUsage || !strings.Contains(r.stderr, "--reason is required") || f.calls("SetEnabled") != before {
			t.Fatalf("%s without --reason: exit %d stderr %q, calls %d -> %d", tc.verb, r.code, r.stderr, before, f.calls("SetEnabled"))
		}
	}
}

func TestAutosplitAbort(t *testing.T) {
	f := startCluster(t)
	f.set("AbortOp", &api.AbortOpResponse{Op: &api.Op{OpId: 12, ParentRouteId: 7, SplitKeys: [][]byte{[]byte("user:42"), []byte("user:42\x00")},
		Origin: api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, NextStep: 2, State: api.OpState_OP_STATE_ABORTED,
		AbortReason: api.OpAbortReason_OP_ABORT_REASON_OPERATOR, CreatedHlc: splitHLC, Score: 182000}})
	r := ctl(t, f, "autosplit", "abort", "op12", "--reason", "scan-heavy range")
	want := lines(
		`op12 is aborted`,
		`OP    ROUTE  ORIGIN              STATE               NEXT STEP  SCORE   CREATED`,
		`op12  r7     isolation_compound  aborted (operator)  -          182000  1723456789012.3 (2024-08-12 09:59:49.012Z)`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("abort: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	req := f.last("AbortOp").(*api.AbortOpRequest)
	if req.GetOpId() != 12 || req.GetReason() != "scan-heavy range" || req.GetActor() != "alice@ops1" || req.GetRequestId() == "" {
		t.Fatalf("sent %v", req)
	}
	f.fail("AbortOp", status.Error(codes.FailedPrecondition, "op 12 already finished"))
	r = ctl(t, f, "autosplit", "abort", "12")
	if want := "hotsplitctl: autosplit abort op12: FailedPrecondition from " + f.addr + ": op 12 already finished (not applied)\n"; r.code != exitRefused || r.stderr != want {
		t.Fatalf("exit %d stderr %q, want %q", r.code, r.stderr, want)
	}
}

// --all pages back through every decision the cluster keeps and shows
// them oldest first; finished ops have their own section.
func TestAutosplitStatusAllDecisions(t *testing.T) {
	f := startCluster(t)
	dec := func(seq uint64) *api.Decision {
		return &api.Decision{Seq: seq, AtHlc: splitHLC, Kind: api.DecisionKind_DECISION_KIND_SWITCH, Actor: "a", Detail: fmt.Sprint("d", seq)}
	}
	newest := statusFixture()
	newest.Recent = []*api.Decision{dec(5), dec(6)}
	newest.DecisionsKept, newest.NextDecisionsBeforeSeq = 6, 5
	newest.FinishedOps = []*api.Op{{OpId: 11, ParentRouteId: 3, Origin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE,
		State: api.OpState_OP_STATE_ABORTED, AbortReason: api.OpAbortReason_OP_ABORT_REASON_OPERATOR, CreatedHlc: splitHLC}}
	f.set("Status", newest)
	f.set("Status@5", &api.StatusResponse{Recent: []*api.Decision{dec(3), dec(4)}, DecisionsKept: 6, NextDecisionsBeforeSeq: 3})
	f.set("Status@3", &api.StatusResponse{Recent: []*api.Decision{dec(1), dec(2)}, DecisionsKept: 6})

	r := ctl(t, f, "autosplit", "status", "--limit", "2")
	for _, w := range []string{
		"finished ops (1)",
		"op11  r3     balance  aborted (operator)",
		"recent decisions, 2 of the 6 kept (--before 5 for older, --all for every one) (2)",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("status lacks %q:\n%s", w, r.stdout)
		}
	}
	r = ctl(t, f, "autosplit", "status", "--limit", "2", "--all")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	last := -1
	for seq := 1; seq <= 6; seq++ {
		i := strings.Index(r.stdout, fmt.Sprintf("d%d\n", seq))
		if i < 0 || i < last {
			t.Fatalf("decision %d missing or out of order:\n%s", seq, r.stdout)
		}
		last = i
	}
	if !strings.Contains(r.stdout, "recent decisions (6)") {
		t.Errorf("all six not shown as one list:\n%s", r.stdout)
	}
	if f.calls("Status@5") != 1 || f.calls("Status@3") != 1 {
		t.Fatalf("pages asked: @5 %d, @3 %d", f.calls("Status@5"), f.calls("Status@3"))
	}
}

// Status shows merge ops as pairs and the pairs explained for a merge in
// their own section; the config its merge settings with their meaning.
func TestAutosplitStatusMerges(t *testing.T) {
	f := startCluster(t)
	s := statusFixture()
	s.Config.MergeThresholdBp, s.Config.MergeWindows, s.Config.MergeDelayMs = new(uint32(2500)), new(uint32(10)), new(uint64(1_800_000))
	s.Config.MaxMergesPerCycle, s.Config.MergeMarginBp = new(uint32(0)), new(uint32(5000))
	s.LiveOps = append(s.LiveOps, &api.Op{OpId: 13, Kind: api.OpKind_OP_KIND_MERGE, ParentRouteId: 20, TargetRouteId: 20, RightRouteId: 21,
		NextStep: 1, State: api.OpState_OP_STATE_PENDING, CreatedHlc: splitHLC, Score: 1200, RouteDelta: -1})
	s.Candidates = append(s.Candidates,
		&api.TrackedRoute{RouteId: 20, MergeExplanation: &api.Explanation{Reason: api.Reason_REASON_MERGE_PLANNED, MergePartnerRouteId: 21,
			MergedEstimate: 1200, MergeLimit: 25000, ColdColumns: 10, MergeWindows: 10, OpId: 13}},
		&api.TrackedRoute{RouteId: 30, MergeExplanation: &api.Explanation{Reason: api.Reason_REASON_MERGE_DELAY, MergePartnerRouteId: 31,
			MergeLimit: 25000, ColdColumns: 10, MergeWindows: 10, MergeDelayLeftMs: 120_000}})
	f.set("Status", s)
	r := ctl(t, f, "autosplit", "status")
	for _, want := range []string{
		"merge_threshold_bp      2500     25.00% of the threshold: below it a route is cold\n",
		"max_merges_per_cycle    0        no automatic merges\n",
		"merge_margin_bp         5000     a merged route starts at least 50.00% of the threshold below it\n",
		"op13  r20+r21  merge               pending  1/1 merge r20+r21",
		"\ncandidates (2)\n",
		"\nmerge candidates (2)\nPAIR     REASON         ESTIMATE  LIMIT  COLD   DELAY LEFT  OP\n" +
			"r20+r21  merge_planned  1200      25000  10/10  -           op13\n" +
			"r30+r31  merge_delay    0         25000  10/10  2m0s        -\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
	}
}

// The smoothed score is the exact mean even where the sum of the scores
// passes 2^64: a wrapped sum would show a small number for a hot route.
func TestSmoothedMeanPastTheUint64Sum(t *testing.T) {
	for _, tc := range []struct {
		scores []uint64
		want   string
	}{
		{nil, "-"},
		{[]uint64{52000, 58000, 61000}, "57000"},
		{[]uint64{math.MaxUint64, math.MaxUint64}, "18446744073709551615"},
		{[]uint64{math.MaxUint64, 1}, "9223372036854775808"},
		{[]uint64{math.MaxUint64, math.MaxUint64, 0}, "12297829382473034410"},
	} {
		if got := smoothed(&api.TrackedRoute{RecentScores: tc.scores}); got != tc.want {
			t.Errorf("smoothed(%v) = %s, want %s", tc.scores, got, tc.want)
		}
	}
}
