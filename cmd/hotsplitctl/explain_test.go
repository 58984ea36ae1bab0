package main

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func explainCooldown() *api.ExplainResponse {
	return &api.ExplainResponse{
		Route: &api.RouteDescriptor{RouteId: 9, Start: []byte("g"), End: []byte("m"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE},
		Tracked: &api.TrackedRoute{RouteId: 9, ConsecutiveOver: 4, LastScore: 61000, CooldownUntilMs: nowMs + 252000,
			RecentScores: []uint64{52000, 58000, 61000},
			Explanation: &api.Explanation{Reason: api.Reason_REASON_COOLDOWN, IsolationReason: api.Reason_REASON_TOPK_SHARE,
				AtMs: nowMs - 9012, FirstAtMs: nowMs - 189012, Repeats: 3, Score: 61000, ConsecutiveOver: 4, CooldownLeftMs: 261012,
				HotKey: []byte("user:42"), HotKeyLowerPerMin: 30000, HotKeyUpperPerMin: 35000, HotKeyShareBp: 6250}},
		Decisions: []*api.Decision{{Seq: 38, AtHlc: splitHLC, Kind: api.DecisionKind_DECISION_KIND_DECLINED, RouteId: 9,
			Reason: api.Reason_REASON_COOLDOWN, Score: 61000}},
		NowMs: nowMs,
		Read:  &api.ReadInfo{AppliedIndex: 120, CatalogVersion: 9, ServedBy: "n1"},
	}
}

// A route whose start an operator placed says that automatic merges keep
// it, and how to remove it.
func TestAutosplitExplainPinnedStart(t *testing.T) {
	f := startCluster(t)
	x := explainCooldown()
	x.Route.OperatorStart = true
	f.set("Explain", x)
	f.set("GetConfig", &api.GetConfigResponse{Config: configFixture()})
	r := ctl(t, f, "autosplit", "explain", "r9")
	line := "\nstart        pinned: an operator placed \"g\" (a bootstrap split key or a manual split), so automatic merges never join r9 " +
		"to the route before it; `hotsplitctl merge LEFT r9` can\n"
	if r.code != 0 || !strings.Contains(r.stdout, line) {
		t.Fatalf("explain: exit %d stderr %q\n%s\nwant the line%s", r.code, r.stderr, r.stdout, line)
	}
	// Unpinned (the table test's route), no such line.
	f.set("Explain", explainCooldown())
	if r := ctl(t, f, "autosplit", "explain", "r9"); strings.Contains(r.stdout, "pinned") {
		t.Fatalf("an unpinned route's explain mentions a pin:\n%s", r.stdout)
	}
}

func TestAutosplitExplainTable(t *testing.T) {
	f := startCluster(t)
	f.set("Explain", explainCooldown())
	f.set("GetConfig", &api.GetConfigResponse{Config: configFixture()})
	r := ctl(t, f, "autosplit", "explain", "r9")
	want := lines(
		`route        r9 ["g", "m") group 1 active`,
		`verdict      not split: cooldown (4m12s left)`,
		`score        61000 weighted ops/min (threshold 50000)`,
		`smoothed     57000 over 3 columns (display only)`,
		`consecutive  4 columns over threshold (needs 3)`,
		`cooldown     until 2024-08-12 10:04:01.012Z (4m12s left)`,
		`isolation    not used: topk_share (the hot key carries 62.50% of the route's load, isolation needs 80.00%)`,
		`hot key      "user:42": 30000..35000 weighted ops/min, share 62.50% of the route (isolation needs 80.00% and 25000 ops/min)`,
		`explained    at 2024-08-12 09:59:40.000Z (same reason since 2024-08-12 09:56:40.000Z, 3 repeats)`,
		`read         linearizable read by n1, applied index 120`,
		``,
		`decisions (1)`,
		`SEQ  AT                                          KIND      ROUTE  OP  ORIGIN  REASON    SCORE  DETAIL`,
		`38   1723456789012.3 (2024-08-12 09:59:49.012Z)  declined  r9     -   -       cooldown  61000  -`,
		``,
		`ops: none`,
	)
	if r.code != 0 || r.stdout != want {
		t.Fatalf("explain: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if req := f.last("Explain").(*api.ExplainRequest); req.GetRouteId() != 9 {
		t.Fatalf("sent %v", req)
	}

	r = ctl(t, f, "autosplit", "explain", "9", "-o", "json")
	var got api.ExplainResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || !proto.Equal(&got, explainCooldown()) {
		t.Fatalf("json does not decode to the explanation: %v\n%s", err, r.stdout)
	}
	if !strings.Contains(compactJSON(t, r.stdout), `"reason":"REASON_COOLDOWN","origin":"SPLIT_ORIGIN_UNSPECIFIED","isolation_reason":"REASON_TOPK_SHARE"`) {
		t.Errorf("json lacks the explanation's reasons:\n%s", r.stdout)
	}
}

func TestAutosplitExplainVerdicts(t *testing.T) {
	route := &api.RouteDescriptor{RouteId: 9, Start: []byte("g"), End: []byte("m"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE}
	tracked := func(e *api.Explanation) *api.TrackedRoute {
		return &api.TrackedRoute{RouteId: 9, ConsecutiveOver: 3, LastScore: 70000, Explanation: e}
	}
	tests := []struct {
		name string
		resp *api.ExplainResponse
		want []string // lines that must appear
	}{
		{
			name: "no split key",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_NO_SPLIT_KEY, IsolationReason: api.Reason_REASON_NO_TOPK, Score: 70000})},
			want: []string{
				"verdict      not split: no_split_key (no hot key to isolate and no usable sub-bucket median; hotsplit never splits at a blind midpoint)",
				"isolation    not used: no_topk (no top-K evidence reached the detector)",
			},
		},
		{
			name: "planned isolation",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_PLANNED, Origin: api.SplitOrigin_SPLIT_ORIGIN_SUB_BUCKET_MEDIAN, OpId: 12,
				SplitKeys: [][]byte{[]byte("j")}, MedianBucket: 7, IsolationReason: api.Reason_REASON_ABSOLUTE_FLOOR, HotKeyLowerPerMin: 9000})},
			want: []string{
				`verdict      split planned: op12, origin sub_bucket_median, at "j"`,
				"isolation    not used: absolute_floor (the hot key's lower bound is 9000 ops/min, isolation needs 25000)",
				"median       bucket 7", `split keys   "j"`, "op           op12",
			},
		},
		{
			name: "counting",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: &api.TrackedRoute{RouteId: 9, ConsecutiveOver: 2, LastScore: 70000,
				Explanation: &api.Explanation{Reason: api.Reason_REASON_COUNTING, Score: 70000, ConsecutiveOver: 2, AtMs: nowMs - 1000}}},
			want: []string{"verdict      not split yet: counting (2 of 3 consecutive columns over threshold)"},
		},
		{
			// Issue 13: a route that cooled shows the explanation's own
			// column, never a stale counter beside a fresh score.
			name: "below threshold after being hot",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: &api.TrackedRoute{RouteId: 9, ConsecutiveOver: 0, LastScore: 1200,
				Explanation: &api.Explanation{Reason: api.Reason_REASON_BELOW_THRESHOLD, Score: 36000, AtMs: nowMs - 60000,
					Threshold: 60000, CandidateWindows: 3}}},
			want: []string{
				"verdict      not split: below_threshold since 2024-08-12 09:58:49.012Z (score 36000, threshold 60000: the count went back to 0)",
				"score        36000 weighted ops/min (threshold 60000)",
				"consecutive  0 columns over threshold (needs 3)",
				"last column  score 1200, 0 columns over threshold (explained above: the column of 2024-08-12 09:58:49.012Z)",
			},
		},
		{
			name: "hold band",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: &api.TrackedRoute{RouteId: 9, ConsecutiveOver: 2, LastScore: 45000,
				Explanation: &api.Explanation{Reason: api.Reason_REASON_HOLD_BAND, Score: 45000, ConsecutiveOver: 2, AtMs: nowMs,
					Threshold: 50000, CandidateWindows: 3, HoldBandBp: 8000}}},
			want: []string{"verdict      not split yet: hold_band (score 45000 is below the threshold 50000 but within the hold band from 80.00% of it: the count holds at 2 of 3)"},
		},
		{
			name: "no balanced key, with the numbers",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_NO_SPLIT_KEY, IsolationReason: api.Reason_REASON_TOPK_SHARE, Score: 70000, ConsecutiveOver: 3,
				LeftShareBp: 1000, RightShareBp: 9000, MedianBucket: 7, BucketShareBp: 10000})},
			want: []string{
				"verdict      not split: no_split_key (no cut puts 20% of the load on each side by the evidence: the best leaves 10.00% | 90.00%; hotsplit never splits at a blind midpoint)",
				"balance      best cut: 10.00% | 90.00% of the load on each side (each side needs 20.00%); bucket 7 holds 100.00%",
			},
		},
		{
			name: "planned balance split",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_PLANNED, Origin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE, OpId: 13, Score: 70000, ConsecutiveOver: 3,
				SplitKeys: [][]byte{[]byte("user:0050/")}, LeftShareBp: 4900, RightShareBp: 5100, MedianBucket: 7, BucketShareBp: 10000, SamplePoints: 60,
				HotKey: []byte("user:0049"), HotKeyShareBp: 120, HotKeyUpperShareBp: 200, HotKeyLowerPerMin: 840, HotKeyUpperPerMin: 1400,
				SampleRate: 16, Floor: 35000, IsolationReason: api.Reason_REASON_TOPK_SHARE})},
			want: []string{
				`verdict      split planned: op13, origin balance, at "user:0050/"`,
				"balance      49.00% | 51.00% of the load on each side; bucket 7 holds 100.00%, placed among 60 sampled keys",
				`hot key      "user:0049": 840 (99% lower bound)..1400 weighted ops/min, share 1.20%..2.00% of the route (isolation needs 80.00% and 35000 ops/min), sampled 1 in 16`,
			},
		},
		{
			// Cluster version 3: the cut's interval and what placed it.
			name: "planned cut between keys of known load, with its interval",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_PLANNED, Origin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE, OpId: 15, Score: 70000, ConsecutiveOver: 3,
				SplitKeys: [][]byte{[]byte("user:0001\x00")}, LeftShareBp: 3400, RightShareBp: 6600, MedianBucket: 7, BucketShareBp: 10000,
				SplitEvidence: api.SplitEvidence_SPLIT_EVIDENCE_TOP_KEYS, LeftShareLoBp: 3046, LeftShareHiBp: 3754,
				RightShareLoBp: 6246, RightShareHiBp: 6954, KnownKeys: 3})},
			want: []string{
				"balance      34.00% | 66.00% of the load on each side, 98% interval 30.46%..37.54% | 62.46%..69.54%, placed by top-K counts of the keys around it; bucket 7 holds 100.00%, 3 keys of known load",
			},
		},
		{
			name: "planned cut at a bucket boundary is exact",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_PLANNED, Origin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE, OpId: 16, SplitKeys: [][]byte{[]byte("j")},
				LeftShareBp: 6666, RightShareBp: 3334, MedianBucket: 5, BucketShareBp: 3333, SamplePoints: 3,
				SplitEvidence: api.SplitEvidence_SPLIT_EVIDENCE_BUCKETS, LeftShareLoBp: 6666, LeftShareHiBp: 6666, RightShareLoBp: 3334, RightShareHiBp: 3334})},
			want: []string{
				"balance      66.66% | 33.34% of the load on each side (exact), placed by exact bucket loads; bucket 5 holds 33.33%, 3 sampled keys",
			},
		},
		{
			name: "cut uncertain",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_CUT_UNCERTAIN, IsolationReason: api.Reason_REASON_TOPK_SHARE, Score: 70000, ConsecutiveOver: 3,
				LeftShareBp: 3800, RightShareBp: 6200, MedianBucket: 7, BucketShareBp: 10000, SamplePoints: 2, KnownKeys: 3,
				SplitEvidence: api.SplitEvidence_SPLIT_EVIDENCE_SAMPLES, LeftShareLoBp: 1700, LeftShareHiBp: 5900,
				RightShareLoBp: 4100, RightShareHiBp: 8300})},
			want: []string{
				"verdict      not split: cut_uncertain (the best cut leaves 38.00% | 62.00% by the estimate, but its interval admits a side below 20%: 17.00%..59.00% | 41.00%..83.00%; a column with more evidence decides)",
				"balance      best cut: 38.00% | 62.00% of the load on each side, 98% interval 17.00%..59.00% | 41.00%..83.00% (each side's lower bound needs 20.00%), placed by sampled keys inside a bucket; bucket 7 holds 100.00%, 3 keys of known load, 2 sampled keys",
			},
		},
		{
			name: "no evidence",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_NO_EVIDENCE, IsolationReason: api.Reason_REASON_NO_TOPK, Score: 70000})},
			want: []string{
				"verdict      not split: no_evidence (the column carried no bucket counts, top keys or samples for this route, so nothing says where its load lies; the leader sends evidence only for the hottest rows; hotsplit never splits at a blind midpoint)",
			},
		},
		{
			name: "a key isolated by its own load",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_PLANNED, Origin: api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_COMPOUND, OpId: 17,
				SplitKeys: [][]byte{[]byte("k"), []byte("k\x00")}, HotKey: []byte("k"), HotKeyLowerPerMin: 55665, HotKeyUpperPerMin: 60000,
				HotKeyShareBp: 4500, HotKeyUpperShareBp: 5000, Threshold: 50000, Floor: 25000,
				SplitEvidence: api.SplitEvidence_SPLIT_EVIDENCE_KEY_LOAD})},
			want: []string{
				"isolated by  the key's own load: its lower bound 55665 ops/min clears the threshold 50000 and the floor 25000, whatever its share",
			},
		},
		{
			name: "cooldown ended",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: &api.TrackedRoute{RouteId: 9, ConsecutiveOver: 4, LastScore: 61000,
				CooldownUntilMs: nowMs - 5000, Explanation: &api.Explanation{Reason: api.Reason_REASON_COOLDOWN, Score: 61000, ConsecutiveOver: 4, AtMs: nowMs - 9000}}},
			want: []string{
				"verdict      not split: cooldown (ended; the next hot column decides)",
				"cooldown     until 2024-08-12 09:59:44.012Z (ended)",
			},
		},
		{
			name: "route cap",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_ROUTE_CAP, ProjectedRoutes: 1026})},
			want: []string{"verdict      not split: route_cap (the plan would make 1026 routes; max_auto_routes is 1024)"},
		},
		{
			name: "suppressed by the switch",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{
				Reason: api.Reason_REASON_SUPPRESSED_DISABLED, Origin: api.SplitOrigin_SPLIT_ORIGIN_ISOLATION_SINGLE_LOWER_EDGE,
				SplitKeys: [][]byte{[]byte("g\x00")}})},
			want: []string{`verdict      not split: suppressed_disabled (automatic splitting is off; it would have split with origin isolation_single_lower_edge at "g\x00")`},
		},
		{
			name: "cold",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, LastColumnAtMs: nowMs - 1000, AutoSplitEnabled: true},
			want: []string{"verdict      not split: cold (the detector holds no state for this route: its score is below the threshold and it is not in cooldown)"},
		},
		{
			name: "no column yet is not cold",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs},
			want: []string{"verdict      nothing to judge yet: no load column has been committed"},
		},
		{
			name: "created after the last column is not cold",
			resp: &api.ExplainResponse{Route: &api.RouteDescriptor{RouteId: 9, Start: []byte("g"), End: []byte("m"), GroupId: 1,
				State: api.RouteState_ROUTE_STATE_ACTIVE, SplitAtHlc: splitHLC}, NowMs: nowMs, LastColumnAtMs: 1723456780000},
			want: []string{"verdict      nothing to judge yet: no load column has been committed since the route was created at 2024-08-12 09:59:49.012Z; automatic splitting is off"},
		},
		{
			name: "merged after the last column is not cold",
			resp: &api.ExplainResponse{Route: &api.RouteDescriptor{RouteId: 12, Start: []byte("g"), End: []byte("m"), GroupId: 1,
				State: api.RouteState_ROUTE_STATE_ACTIVE, MergedFromLeft: 7, MergedFromRight: 8, MergedAtHlc: splitHLC}, NowMs: nowMs,
				LastColumnAtMs: 1723456780000, AutoSplitEnabled: true},
			want: []string{"verdict      nothing to judge yet: no load column has been committed since the route was created at 2024-08-12 09:59:49.012Z"},
		},
		{
			name: "gone, with its plan's numbers from the decision ring",
			resp: &api.ExplainResponse{NowMs: nowMs, Decisions: []*api.Decision{{Seq: 51, AtHlc: splitHLC, Kind: api.DecisionKind_DECISION_KIND_PLANNED,
				RouteId: 9, OpId: 14, Origin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE, Reason: api.Reason_REASON_PLANNED, SplitKeys: [][]byte{[]byte("h")},
				Explanation: &api.Explanation{Reason: api.Reason_REASON_PLANNED, Origin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE, OpId: 14,
					SplitKeys: [][]byte{[]byte("h")}, LeftShareBp: 5000, RightShareBp: 5000, MedianBucket: 3, BucketShareBp: 9000, SamplePoints: 12}}}},
			want: []string{
				"route        r9 (no longer exists)",
				`verdict      the route no longer exists; its last explanation (decision 51): split planned: op14, origin balance, at "h"`,
				"explained    decision 51 kept in the decision ring",
				"balance      50.00% | 50.00% of the load on each side; bucket 3 holds 90.00%, placed among 12 sampled keys",
			},
		},
		{
			name: "gone",
			resp: &api.ExplainResponse{NowMs: nowMs, Decisions: []*api.Decision{{Seq: 50, AtHlc: splitHLC, Kind: api.DecisionKind_DECISION_KIND_MANUAL_SPLIT,
				RouteId: 9, SplitKeys: [][]byte{[]byte("h")}, Actor: "bob"}}},
			want: []string{
				"route        r9 (no longer exists)",
				"verdict      the route no longer exists and the detector holds no state for it (see decisions)",
				`50   1723456789012.3 (2024-08-12 09:59:49.012Z)  manual_split  r9     -   -       -       -      keys "h"; by bob`,
			},
		},
		{
			name: "a cold route held back by the merge delay",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: &api.TrackedRoute{RouteId: 9, Explanation: &api.Explanation{},
				MergeExplanation: &api.Explanation{Reason: api.Reason_REASON_MERGE_DELAY, MergePartnerRouteId: 10, MergedEstimate: 300,
					MergeLimit: 25000, ColdColumns: 10, MergeWindows: 10, MergeDelayLeftMs: 90_000, AtMs: nowMs - 1000, FirstAtMs: nowMs - 61000, Repeats: 1}},
				Ops: []*api.Op{{OpId: 3, Kind: api.OpKind_OP_KIND_MERGE, ParentRouteId: 8, TargetRouteId: 8, RightRouteId: 9,
					NextStep: 2, State: api.OpState_OP_STATE_ABORTED, AbortReason: api.OpAbortReason_OP_ABORT_REASON_OPERATOR}}},
			want: []string{
				"verdict      cold: not merged with r10: merge_delay (1m30s left since a route of the pair was created; merged estimate 300, limit 25000; cold 10 of 10 columns) at 2024-08-12 09:59:48.012Z (same since 2024-08-12 09:58:48.012Z, 1 repeats)",
				"op3  r8+r9  merge  aborted (operator)  -  -  -",
			},
		},
		{
			name: "a merge planned beside a split explanation",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: &api.TrackedRoute{RouteId: 9,
				Explanation:      &api.Explanation{Reason: api.Reason_REASON_BELOW_THRESHOLD, Score: 1000, AtMs: nowMs - 600_000},
				MergeExplanation: &api.Explanation{Reason: api.Reason_REASON_MERGE_PLANNED, MergePartnerRouteId: 8, OpId: 4, MergeLimit: 25000, ColdColumns: 10, MergeWindows: 10}}},
			want: []string{"merge        merge planned with r8: op4 (merged estimate 0, limit 25000; cold 10 of 10 columns)"},
		},
		{
			name: "unknown reason from a newer server",
			resp: &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: tracked(&api.Explanation{Reason: api.Reason(99)})},
			want: []string{"verdict      not split: REASON(99)"},
		},
	}
	f := startCluster(t)
	f.set("GetConfig", &api.GetConfigResponse{Config: configFixture()})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f.set("Explain", withDetectorNumbers(tc.resp, currentMinSideShareBP, currentZMilli))
			r := ctl(t, f, "autosplit", "explain", "9")
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			// Column widths depend on which rows are present; the
			// table test checks alignment, this one the words.
			for _, w := range tc.want {
				if !strings.Contains(squash(r.stdout), squash(w)+"\n") {
					t.Errorf("output lacks line %q:\n%s", w, r.stdout)
				}
			}
		})
	}
}

// The detector's numbers as this repository's server sends them
// (detector.MinSideShareBP, detector.ConfidenceZMilli).
const (
	currentMinSideShareBP = 2000
	currentZMilli         = 2326
)

// withDetectorNumbers is r as a server with the given detector numbers
// answers it.
func withDetectorNumbers(r *api.ExplainResponse, minSideBP, zMilli uint32) *api.ExplainResponse {
	r = proto.Clone(r).(*api.ExplainResponse)
	r.MinSideShareBp, r.ConfidenceZMilli = minSideBP, zMilli
	return r
}

// The least side share and the confidence levels are the server's: other
// numbers from the server show as such, and a server that sends none (it
// predates them) gets words without a number, never this build's guess.
func TestAutosplitExplainDetectorNumbers(t *testing.T) {
	route := &api.RouteDescriptor{RouteId: 9, Start: []byte("g"), End: []byte("m"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE}
	explained := func(e *api.Explanation) *api.ExplainResponse {
		return &api.ExplainResponse{Route: route, NowMs: nowMs, Tracked: &api.TrackedRoute{RouteId: 9, ConsecutiveOver: 3, LastScore: 70000, Explanation: e}}
	}
	uncertain := explained(&api.Explanation{Reason: api.Reason_REASON_CUT_UNCERTAIN, Score: 70000, ConsecutiveOver: 3,
		LeftShareBp: 3800, RightShareBp: 6200, MedianBucket: 7, BucketShareBp: 10000, SamplePoints: 2,
		SplitEvidence: api.SplitEvidence_SPLIT_EVIDENCE_SAMPLES, LeftShareLoBp: 1700, LeftShareHiBp: 5900, RightShareLoBp: 4100, RightShareHiBp: 8300,
		HotKey: []byte("k"), HotKeyShareBp: 120, HotKeyUpperShareBp: 200, HotKeyLowerPerMin: 840, HotKeyUpperPerMin: 1400})
	noKey := explained(&api.Explanation{Reason: api.Reason_REASON_NO_SPLIT_KEY, Score: 70000, ConsecutiveOver: 3,
		LeftShareBp: 1000, RightShareBp: 9000, MedianBucket: 7, BucketShareBp: 10000})
	tests := []struct {
		name          string
		minSide, zMil uint32
		want, absent  []string
	}{
		{
			name: "other numbers", minSide: 2500, zMil: 1960,
			want: []string{
				"verdict      not split: cut_uncertain (the best cut leaves 38.00% | 62.00% by the estimate, but its interval admits a side below 25%: 17.00%..59.00% | 41.00%..83.00%; a column with more evidence decides)",
				"balance      best cut: 38.00% | 62.00% of the load on each side, 95% interval 17.00%..59.00% | 41.00%..83.00% (each side's lower bound needs 25.00%), placed by sampled keys inside a bucket; bucket 7 holds 100.00%, 2 sampled keys",
				`hot key      "k": 840 (97.5% lower bound)..1400 weighted ops/min, share 1.20%..2.00% of the route (isolation needs 80.00% and 25000 ops/min)`,
				"verdict      not split: no_split_key (no cut puts 25% of the load on each side by the evidence: the best leaves 10.00% | 90.00%; hotsplit never splits at a blind midpoint)",
				"balance      best cut: 10.00% | 90.00% of the load on each side (each side needs 25.00%); bucket 7 holds 100.00%",
			},
		},
		{
			name: "a server that predates them",
			want: []string{
				"verdict      not split: cut_uncertain (the best cut leaves 38.00% | 62.00% by the estimate, but its interval admits a side below what a split needs: 17.00%..59.00% | 41.00%..83.00%; a column with more evidence decides)",
				"balance      best cut: 38.00% | 62.00% of the load on each side, interval 17.00%..59.00% | 41.00%..83.00%, placed by sampled keys inside a bucket; bucket 7 holds 100.00%, 2 sampled keys",
				`hot key      "k": 840 (lower bound)..1400 weighted ops/min, share 1.20%..2.00% of the route (isolation needs 80.00% and 25000 ops/min)`,
				"verdict      not split: no_split_key (no cut puts enough of the load on each side by the evidence: the best leaves 10.00% | 90.00%; hotsplit never splits at a blind midpoint)",
				"balance      best cut: 10.00% | 90.00% of the load on each side; bucket 7 holds 100.00%",
			},
			absent: []string{" 20%", " 20.00%", " 98%", "(99%"},
		},
	}
	f := startCluster(t)
	f.set("GetConfig", &api.GetConfigResponse{Config: configFixture()})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			for _, resp := range []*api.ExplainResponse{uncertain, noKey} {
				f.set("Explain", withDetectorNumbers(resp, tc.minSide, tc.zMil))
				r := ctl(t, f, "autosplit", "explain", "9")
				if r.code != 0 {
					t.Fatalf("exit %d: %s", r.code, r.stderr)
				}
				out += squash(r.stdout)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, squash(w)+"\n") {
					t.Errorf("output lacks line %q:\n%s", w, out)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(out, a) {
					t.Errorf("output names %q, a number the server did not send:\n%s", a, out)
				}
			}
		})
	}
}

func TestAutosplitExplainWithoutConfig(t *testing.T) {
	f := startCluster(t)
	f.set("Explain", explainCooldown())
	f.fail("GetConfig", status.Error(codes.PermissionDenied, "config hidden"))
	r := ctl(t, f, "autosplit", "explain", "9")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{
		"score        61000 weighted ops/min\n",
		"consecutive  4 columns over threshold\n",
		"note         thresholds not shown: PermissionDenied from " + f.addr + ": config hidden\n",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.stdout)
		}
	}
}

// squash collapses runs of spaces, line by line.
func squash(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(strings.Join(strings.Fields(line), " "))
		if strings.HasSuffix(line, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}
