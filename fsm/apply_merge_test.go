package fsm

import (
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/hlc"
)

func merge(left, right uint64) *api.Command {
	return &api.Command{Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{
		LeftRouteId: left, RightRouteId: right, Actor: "olga", Note: "cold pair"}}}
}

func mergeCAS(left, right, version uint64) *api.Command {
	c := merge(left, right)
	c.GetMergeRange().ExpectedVersion = proto.Uint64(version)
	return c
}

// mergeState is a version 3 harness with r1 ["", f), r2 [f, m), r3 [m, t),
// r4 [t, +inf) in group 7 and a 60 s cooldown.
func mergeState(t *testing.T) *harness {
	t.Helper()
	return bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("f"), []byte("m"), []byte("t")}, &api.Config{CooldownMs: 60_000, StepMs: 1000})
}

func TestManualMerge(t *testing.T) {
	m := NewMetrics(prometheus.NewRegistry())
	h := newHarness(t, Options{Metrics: m})
	wantCode(t, h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1", GroupId: 7,
		InitialSplits: [][]byte{[]byte("f"), []byte("m"), []byte("t")}, Config: &api.Config{CooldownMs: 60_000, StepMs: 1000},
		ClusterVersion: clusterversion.Version3}}}), api.ResultCode_RESULT_CODE_OK)
	// Both parents carry detector state that must not outlive them.
	h.editState(func(p *api.StateSnapshot) {
		p.Tracked = []*api.TrackedRoute{
			{RouteId: 2, ConsecutiveOver: 3, CooldownUntilMs: startMs + 900_000, Explanation: &api.Explanation{Reason: api.Reason_REASON_COOLDOWN}},
			{RouteId: 3, ConsecutiveOver: 1, Explanation: &api.Explanation{}},
			{RouteId: 4, ConsecutiveOver: 2, Explanation: &api.Explanation{}},
		}
	})
	r := h.run(merge(2, 3))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	s := h.state()
	commit := s.LastHLC()
	if r.CatalogVersion != 2 || r.CommitHlc != commit || len(r.Children) != 1 {
		t.Fatalf("result %v", r.CommandResult)
	}
	got := r.Children[0]
	// The operator removes the bootstrap's boundary "m" (operator
	// boundaries are only kept from automatic merges); the merged route
	// starts at "f", the left's initial key, and keeps its mark.
	want := &api.RouteDescriptor{RouteId: 5, Start: []byte("f"), End: []byte("t"), GroupId: 7, State: api.RouteState_ROUTE_STATE_ACTIVE,
		MergedFromLeft: 2, MergedFromRight: 3, MergedAtHlc: commit, OperatorStart: true}
	if !proto.Equal(got, want) {
		t.Fatalf("merged route %v, want %v", got, want)
	}
	if live, ok := s.Catalog().Route(5); !ok || !proto.Equal(live.ToProto(), want) || s.Catalog().Len() != 3 || s.Catalog().NextRouteID() != 6 {
		t.Fatalf("catalog %v", s.Catalog().ToProto())
	}
	deltas, ok := s.History().Since(1)
	if !ok || len(deltas) != 1 {
		t.Fatalf("history %v %v", deltas, ok)
	}
	if d := deltas[0].ToProto(); d.Version != 2 || len(d.RemovedRouteIds) != 2 || d.RemovedRouteIds[0] != 2 || d.RemovedRouteIds[1] != 3 ||
		len(d.Added) != 1 || !proto.Equal(d.Added[0], want) || d.CommitHlc != commit {
		t.Fatalf("delta %v", d)
	}
	// Tracked state: both parents gone, the merged route in cooldown from
	// the merge, the neighbour untouched.
	for _, id := range []uint64{2, 3} {
		if _, ok := s.Detector().Get(id); ok {
			t.Fatalf("parent %d still tracked", id)
		}
	}
	if tr, ok := s.Detector().Get(5); !ok || tr.CooldownUntilMs != hlc.Physical(commit)+60_000 || tr.ConsecutiveOver != 0 {
		t.Fatalf("merged route tracked %+v %v", tr, ok)
	}
	if tr, ok := s.Detector().Get(4); !ok || tr.ConsecutiveOver != 2 {
		t.Fatalf("route 4 tracked %+v %v", tr, ok)
	}
	ds := s.Decisions()
	d := ds[len(ds)-1]
	if d.Kind != api.DecisionKind_DECISION_KIND_MANUAL_MERGE || d.RouteId != 2 || d.AtHlc != commit || d.Actor != "olga" ||
		d.Note != "cold pair" || len(d.SplitKeys) != 1 || string(d.SplitKeys[0]) != "m" || !strings.Contains(d.Detail, "r2 and r3 into r5") {
		t.Fatalf("decision %v", d)
	}
	if n := testutil.ToFloat64(m.merges.WithLabelValues(mergeOriginManual)); n != 1 {
		t.Fatalf("manual merges counted %v", n)
	}
	if n := testutil.ToFloat64(m.merges.WithLabelValues(mergeOriginAutomatic)); n != 0 {
		t.Fatalf("automatic merges counted %v", n)
	}
	if n := testutil.ToFloat64(m.liveRoutes); n != 3 {
		t.Fatalf("live routes gauge %v", n)
	}
	// The merged route merges again and splits again like any other.
	wantCode(t, h.run(mergeCAS(1, 5, 2)), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(split(6, "g")), api.ResultCode_RESULT_CODE_OK)
	if err := h.state().Catalog().CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// Every refusal reason has its own result code, names its reason, and
// applies nothing.
func TestManualMergeRefusals(t *testing.T) {
	tests := []struct {
		name    string
		version uint32
		prep    func(h *harness)
		c       *api.Command
		code    api.ResultCode
		msg     string
	}{
		{name: "below version 3", version: clusterversion.Version2, c: merge(2, 3),
			code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, msg: "manual_merge needs cluster version 3, the cluster runs 2"},
		{name: "below version 3, even a malformed one", version: clusterversion.Version1, c: merge(2, 2),
			code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, msg: "manual_merge needs cluster version 3"},
		{name: "same route", c: merge(2, 2), code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, msg: "route 2 given as both"},
		{name: "route 0", c: merge(0, 1), code: api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, msg: "route 0 (left)"},
		{name: "unknown left", c: merge(9, 1), code: api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, msg: "route 9 (left)"},
		{name: "unknown right", c: merge(1, 9), code: api.ResultCode_RESULT_CODE_ROUTE_NOT_FOUND, msg: "route 9 (right)"},
		{name: "not adjacent", c: merge(1, 3), code: api.ResultCode_RESULT_CODE_ROUTES_NOT_ADJACENT, msg: "does not end where"},
		{name: "swapped", c: merge(3, 2), code: api.ResultCode_RESULT_CODE_ROUTES_NOT_ADJACENT, msg: "give the left route first"},
		{name: "different group", prep: func(h *harness) {
			h.editState(func(p *api.StateSnapshot) { p.Catalog.Routes[2].GroupId = 8 })
		}, c: merge(2, 3), code: api.ResultCode_RESULT_CODE_ROUTES_IN_DIFFERENT_GROUPS, msg: "group 8"},
		{name: "left not active", prep: func(h *harness) {
			h.editState(func(p *api.StateSnapshot) { p.Catalog.Routes[1].State = api.RouteState_ROUTE_STATE_WRITE_FENCED })
		}, c: merge(2, 3), code: api.ResultCode_RESULT_CODE_MERGE_ROUTE_NOT_ACTIVE, msg: "route 2 is ROUTE_STATE_WRITE_FENCED"},
		{name: "right not active", prep: func(h *harness) {
			h.editState(func(p *api.StateSnapshot) { p.Catalog.Routes[2].State = api.RouteState_ROUTE_STATE_MIGRATING_SOURCE })
		}, c: merge(2, 3), code: api.ResultCode_RESULT_CODE_MERGE_ROUTE_NOT_ACTIVE, msg: "route 3 is ROUTE_STATE_MIGRATING_SOURCE"},
		{name: "left in a live op", prep: func(h *harness) { installOp(h, 2, api.OpState_OP_STATE_PENDING) },
			c: merge(2, 3), code: api.ResultCode_RESULT_CODE_ROUTE_IN_LIVE_OP, msg: "route 2 belongs to live op 1 (pending)"},
		{name: "right in a paused op", prep: func(h *harness) { installOp(h, 3, api.OpState_OP_STATE_PAUSED) },
			c: merge(2, 3), code: api.ResultCode_RESULT_CODE_ROUTE_IN_LIVE_OP, msg: "route 3 belongs to live op 1 (paused)"},
		{name: "stale expected version", prep: func(h *harness) { h.run(split(4, "x")) },
			c: mergeCAS(2, 3, 1), code: api.ResultCode_RESULT_CODE_VERSION_MISMATCH, msg: "expected version 1, catalog is at 2"},
		{name: "step without op", c: func() *api.Command { c := merge(2, 3); c.GetMergeRange().Step = 1; return c }(),
			code: api.ResultCode_RESULT_CODE_INVALID_ARGUMENT, msg: "step: 1"},
		// A step of an op is a merge op's (apply_merge_op.go): an unknown op.
		{name: "op step", c: func() *api.Command { c := merge(2, 3); c.GetMergeRange().OpId, c.GetMergeRange().Step = 4, 1; return c }(),
			code: api.ResultCode_RESULT_CODE_OP_NOT_FOUND, msg: "op 4 not found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.version
			if v == 0 {
				v = clusterversion.Version3
			}
			h := bootstrappedAt(t, v, [][]byte{[]byte("f"), []byte("m"), []byte("t")}, &api.Config{CooldownMs: 60_000, StepMs: 1000})
			if tc.prep != nil {
				tc.prep(h)
			}
			before := h.state()
			r := h.run(tc.c)
			wantCode(t, r, tc.code)
			if !strings.Contains(r.Message, tc.msg) {
				t.Fatalf("message %q does not mention %q", r.Message, tc.msg)
			}
			assertUnchanged(t, before, h.state())
		})
	}
}

// installOp installs op 1, in the given state, splitting route target next.
func installOp(h *harness, target uint64, state api.OpState) {
	h.editState(func(p *api.StateSnapshot) {
		var route *api.RouteDescriptor
		for _, r := range p.Catalog.Routes {
			if r.RouteId == target {
				route = r
			}
		}
		key := append(append([]byte(nil), route.Start...), 'x')
		op := &api.Op{OpId: 1, ParentRouteId: target, SplitKeys: [][]byte{key}, Origin: api.SplitOrigin_SPLIT_ORIGIN_BALANCE,
			NextStep: 1, State: state, TargetRouteId: target, TargetStart: route.Start, TargetEnd: route.End, RouteDelta: 1,
			CreatedHlc: 1, UpdatedHlc: 1}
		if state == api.OpState_OP_STATE_PAUSED {
			op.PausedAtHlc = 1
		}
		p.Ops, p.NextOpId = []*api.Op{op}, 2
	})
}

// A finished op does not hold its route; after an abort the merge applies.
func TestManualMergeAfterTheOpEnds(t *testing.T) {
	h := mergeState(t)
	installOp(h, 2, api.OpState_OP_STATE_RUNNING)
	wantCode(t, h.run(merge(2, 3)), api.ResultCode_RESULT_CODE_ROUTE_IN_LIVE_OP)
	wantCode(t, h.run(abort(1, "merging instead")), api.ResultCode_RESULT_CODE_OK)
	wantCode(t, h.run(merge(2, 3)), api.ResultCode_RESULT_CODE_OK)
}

// Compare-and-set: the current version applies, a version moved by an
// unrelated change is refused, and the retry at the new version applies.
func TestManualMergeCAS(t *testing.T) {
	h := mergeState(t)
	wantCode(t, h.run(split(4, "x")), api.ResultCode_RESULT_CODE_OK) // version 2
	before := h.state()
	r := h.run(mergeCAS(1, 2, 1))
	wantCode(t, r, api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
	assertUnchanged(t, before, h.state())
	// The version is compared before the routes: a stale CAS on routes that
	// could not merge anyway says "version".
	wantCode(t, h.run(mergeCAS(1, 3, 1)), api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
	r = h.run(mergeCAS(1, 2, 2))
	wantCode(t, r, api.ResultCode_RESULT_CODE_OK)
	if r.CatalogVersion != 3 {
		t.Fatalf("catalog version %d", r.CatalogVersion)
	}
	// A CAS against the version the merge itself produced applies next.
	wantCode(t, h.run(mergeCAS(r.Children[0].RouteId, 3, 3)), api.ResultCode_RESULT_CODE_OK)
}

// A retried request id answers the first result and merges nothing
// twice, refusals included.
func TestManualMergeRequestID(t *testing.T) {
	h := mergeState(t)
	c := merge(2, 3)
	c.RequestId = "m-1"
	first := h.run(c)
	wantCode(t, first, api.ResultCode_RESULT_CODE_OK)
	before := h.state()
	again := merge(2, 3)
	again.RequestId = "m-1"
	dup := h.run(again)
	if !dup.Duplicate || !proto.Equal(dup.CommandResult, first.CommandResult) {
		t.Fatalf("retry answered %v (duplicate %v), first %v", dup.CommandResult, dup.Duplicate, first.CommandResult)
	}
	assertUnchanged(t, before, h.state())
	if stored, ok := h.state().RequestResult("m-1"); !ok || !proto.Equal(stored, first.CommandResult) {
		t.Fatalf("request table holds %v", stored)
	}
	// A refusal is remembered too: the same request stays refused after
	// the routes have become mergeable; the id with another expected
	// version is another request (request_fingerprints), refused as such.
	bad := mergeCAS(1, 5, 1)
	bad.RequestId = "m-2"
	wantCode(t, h.run(bad), api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
	retry := mergeCAS(1, 5, 1)
	retry.RequestId = "m-2"
	wantCode(t, h.run(retry), api.ResultCode_RESULT_CODE_VERSION_MISMATCH)
	other := mergeCAS(1, 5, 2)
	other.RequestId = "m-2"
	r := h.run(other)
	wantCode(t, r, api.ResultCode_RESULT_CODE_REQUEST_ID_REUSED)
	if !strings.Contains(r.Message, "was used for merge r1 and r5 if the catalog is at version 1") {
		t.Fatalf("refusal %q does not name the first request", r.Message)
	}
}

// The fence is one rule for every catalog change: a split, an op step and a
// merge whose commit HLC does not move forward are all refused, counted,
// and change nothing else; a command that only carries time is not.
func TestFenceIsOneRuleForCatalogChanges(t *testing.T) {
	changes := []struct {
		name string
		prep func(h *harness)
		c    func() *api.Command
	}{
		{"manual split", nil, func() *api.Command { return split(4, "x") }},
		{"op step", func(h *harness) { installOp(h, 4, api.OpState_OP_STATE_PENDING) }, func() *api.Command { return step(1, 1, 4, []byte("tx")) }},
		{"manual merge", nil, func() *api.Command { return merge(2, 3) }},
		{"manual merge with CAS", nil, func() *api.Command { return mergeCAS(2, 3, 1) }},
	}
	for _, ch := range changes {
		for _, tc := range []struct {
			name  string
			delta int64
		}{{"equal", 0}, {"behind", -5}} {
			t.Run(ch.name+"/"+tc.name, func(t *testing.T) {
				h := mergeState(t)
				if ch.prep != nil {
					ch.prep(h)
				}
				before := h.state()
				c := ch.c()
				c.Hlc = uint64(int64(before.LastHLC()) + tc.delta)
				wantCode(t, h.run(c), api.ResultCode_RESULT_CODE_FENCE_VIOLATION)
				after := h.state()
				if after.FenceViolations() != before.FenceViolations()+1 || after.LastHLC() != before.LastHLC() {
					t.Fatalf("fence violations %d, last hlc %d -> %d", after.FenceViolations(), before.LastHLC(), after.LastHLC())
				}
				p := proto.Clone(after.Proto()).(*api.StateSnapshot)
				p.FenceViolations = before.FenceViolations()
				if hashOf(p) != before.Hash() {
					t.Fatal("a fence violation changed more than its counter")
				}
				// The same change stamped forward applies.
				wantCode(t, h.run(ch.c()), api.ResultCode_RESULT_CODE_OK)
			})
		}
	}
	// Below the feature's version a merge is refused for its version, not
	// counted as a fence violation.
	h := bootstrappedAt(t, clusterversion.Version2, [][]byte{[]byte("f"), []byte("m")}, nil)
	c := merge(1, 2)
	c.Hlc = h.state().LastHLC()
	wantCode(t, h.run(c), api.ResultCode_RESULT_CODE_INVALID_ARGUMENT)
	if h.state().FenceViolations() != 0 {
		t.Fatal("a version 2 replica counted a merge it cannot apply")
	}
}

// A merge's −1 counts for the route cap as soon as it applied: a hot route
// declined for the cap is planned in the next column after a merge, and
// the merged route itself is not planned within its cooldown.
func TestMergeFreesRouteCap(t *testing.T) {
	cfg := hotConfig()
	cfg.MaxAutoRoutes = 5
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("f"), []byte("m"), []byte("t")}, cfg)
	// r4 [t, +inf) holds hot key "user42": isolating it adds 2 routes.
	wantCode(t, h.run(column(1000, 2000, hotRow(4, "user42"))), api.ResultCode_RESULT_CODE_OK)
	r := h.run(column(2000, 3000, hotRow(4, "user42")))
	if len(r.PlannedOpIds) != 0 {
		t.Fatalf("planned over the cap: %v", r.PlannedOpIds)
	}
	if tr, _ := h.state().Detector().Get(4); tr.Explanation.Reason != detector.ReasonRouteCap || tr.Explanation.ProjectedRoutes != 6 {
		t.Fatalf("route 4 explained %+v", tr.Explanation)
	}
	merged := h.run(merge(1, 2))
	wantCode(t, merged, api.ResultCode_RESULT_CODE_OK)
	r = h.run(column(3000, 4000, hotRow(4, "user42")))
	if len(r.PlannedOpIds) != 1 {
		t.Fatalf("not planned after the merge freed a route: %v (%+v)", r.PlannedOpIds, func() detector.Explanation {
			tr, _ := h.state().Detector().Get(4)
			return tr.Explanation
		}())
	}
	// The merged route, hot at once, waits out its cooldown.
	m := merged.Children[0].RouteId
	wantCode(t, h.run(column(4000, 5000, hotRow(m, "c"))), api.ResultCode_RESULT_CODE_OK)
	r = h.run(column(5000, 6000, hotRow(m, "c")))
	tr, _ := h.state().Detector().Get(m)
	if len(r.PlannedOpIds) != 0 || tr.Explanation.Reason != detector.ReasonCooldown {
		t.Fatalf("merged route planned within its cooldown: %v %+v", r.PlannedOpIds, tr.Explanation)
	}
}

// Column rows still in flight for merged parents — the reporters closed the
// column before the merge — are dropped and counted, as for split parents;
// the rest of the column applies.
func TestColumnRowsOfMergedParentsDropped(t *testing.T) {
	for _, withLoads := range []bool{false, true} {
		m := NewMetrics(prometheus.NewRegistry())
		h := newHarness(t, Options{Metrics: m})
		h.run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c1", GroupId: 7,
			InitialSplits: [][]byte{[]byte("f"), []byte("m"), []byte("t")}, Config: hotConfig(), ClusterVersion: clusterversion.Version3}}})
		wantCode(t, h.run(merge(2, 3)), api.ResultCode_RESULT_CODE_OK)
		rows := []*api.ColumnRow{{RouteId: 1, Writes: 3}, {RouteId: 2, Writes: 4}, {RouteId: 3, Writes: 5}, {RouteId: 4, Writes: 6}}
		c := column(1000, 2000, rows...)
		if withLoads {
			var loads []api.RouteLoad
			for _, r := range rows {
				loads = append(loads, loadOf(r))
			}
			c = loadsColumn(1000, 2000, loads)
		}
		wantCode(t, h.run(c), api.ResultCode_RESULT_CODE_OK)
		if n := testutil.ToFloat64(m.droppedRows.WithLabelValues("apply")); n != 2 {
			t.Fatalf("route_loads %v: %v rows dropped in apply, want 2", withLoads, n)
		}
		for _, id := range []uint64{2, 3} {
			if _, ok := h.state().Detector().Get(id); ok {
				t.Fatalf("route_loads %v: dead parent %d tracked", withLoads, id)
			}
		}
		if h.state().LastColumnAtMs() != 2000 {
			t.Fatal("the column did not apply")
		}
	}
}

// A state with merged routes survives a snapshot round trip exactly and
// continues like the original; a snapshot claiming a merged route below
// version 3, or breaking a merge's lineage, is refused.
func TestSnapshotRoundTripWithMerges(t *testing.T) {
	h := mergeState(t)
	wantCode(t, h.run(merge(2, 3)), api.ResultCode_RESULT_CODE_OK)   // r5 [f, t)
	wantCode(t, h.run(split(4, "x")), api.ResultCode_RESULT_CODE_OK) // r6 [t, x), r7 [x, +inf)
	wantCode(t, h.run(merge(1, 5)), api.ResultCode_RESULT_CODE_OK)   // r8 ["", t)
	src := h.state()
	b := persist(t, h.f)
	f2 := newQuiet(Options{})
	if err := restore(f2, b); err != nil {
		t.Fatal(err)
	}
	got := f2.State()
	if got.Hash() != src.Hash() || !proto.Equal(got.Proto(), src.Proto()) {
		t.Fatalf("restored state differs:\n%v\n%v", got.Proto(), src.Proto())
	}
	merged := 0
	for _, r := range got.Proto().GetCatalog().GetRoutes() {
		if r.GetMergedAtHlc() != 0 {
			merged++
		}
	}
	if merged == 0 {
		t.Fatal("no merged route in the round trip")
	}
	for _, f := range []*FSM{h.f, f2} {
		b, _ := EncodeCommand(&api.Command{Hlc: h.stamp(0) + 1, Body: merge(6, 7).Body})
		if r := f.Apply(&raft.Log{Index: src.Index() + 1, Data: b}).(*Result); r.Code != api.ResultCode_RESULT_CODE_OK {
			t.Fatalf("next merge: %v %s", r.Code, r.Message)
		}
	}
	if h.f.State().Hash() != f2.State().Hash() {
		t.Fatal("original and restored diverge on the next entry")
	}

	for name, edit := range map[string]func(p *api.StateSnapshot){
		"merged route at version 2": func(p *api.StateSnapshot) { p.ClusterVersion = clusterversion.Version2 },
		"live merge parent": func(p *api.StateSnapshot) {
			for _, r := range p.Catalog.Routes {
				if r.MergedAtHlc != 0 {
					r.MergedFromLeft = p.Catalog.Routes[len(p.Catalog.Routes)-1].RouteId
				}
			}
		},
		"merge parents without a merge hlc": func(p *api.StateSnapshot) {
			for _, r := range p.Catalog.Routes {
				r.MergedAtHlc = 0
			}
		},
	} {
		p := proto.Clone(src.Proto()).(*api.StateSnapshot)
		edit(p)
		f3 := newQuiet(Options{})
		if err := restore(f3, encodeProto(t, p, src.Index())); !errors.Is(err, ErrSnapshot) {
			t.Errorf("%s: restore %v, want ErrSnapshot", name, err)
		}
	}
}
