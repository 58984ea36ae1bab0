package checker

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/model"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

const ms = 1 << 16

// fixture is a small, correct run: a log, a client history that agrees
// with it, and three nodes that report the log's catalog history and one
// state hash. Each test breaks one thing and expects the checker to say so.
type fixture struct {
	log   []raftlog.Entry
	logs  map[string][]raftlog.Entry // by node; nil: every node has log
	ops   []history.Op
	nodes []NodeFinal
	hlc   uint64
}

func (f *fixture) add(cmd *api.Command) {
	if cmd.Hlc == 0 {
		f.hlc += ms
		cmd.Hlc = f.hlc
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		panic(err)
	}
	f.log = append(f.log, raftlog.Entry{Index: uint64(len(f.log) + 1), Term: 1, Type: raft.LogCommand, Command: cmd, Data: data})
}

func (f *fixture) op(op history.Op) { op.ID = len(f.ops); f.ops = append(f.ops, op) }

func split(rid string, route uint64, key string, expected uint64) *api.Command {
	return &api.Command{RequestId: rid, Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: route, SplitKey: []byte(key), ExpectedVersion: &expected}}}
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{hlc: 5_000_000 * ms}
	f.add(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", GroupId: 1, InitialSplits: [][]byte{[]byte("user:")},
		AutoSplit: true, Config: &api.Config{CooldownMs: 1000}}}}) // r1 ["", user:), r2 [user:, +inf)
	f.add(split("s1", 1, "k5", 1))                                                                                                            // v2: r3, r4
	f.add(split("s2", 4, "k7", 1))                                                                                                            // refused: stale
	f.add(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{OpId: 1, Step: 1, RouteId: 2, SplitKey: []byte("user:9")}}}) // v3: r5, r6
	f.add(&api.Command{RequestId: "e1", Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: false, Reason: "x", Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR}}})
	f.add(split("s3", 4, "k8", 3)) // v4, its client saw no answer
	replay, err := model.Run(f.log, uint64(len(f.log)))
	if err != nil {
		t.Fatal(err)
	}
	hash := func(v uint64) string { c, _ := replay.CatalogAt(v); return c.Hash().Hex() }
	count := func(v uint64) int { c, _ := replay.CatalogAt(v); return len(c.Routes) }
	ev := func(v uint64) *uint64 { return &v }
	s1 := replay.Requests["s1"]
	f.op(history.Op{Client: 0, Kind: history.ListRoutes, Status: history.OK, Call: 10, Return: 20, Version: 1, RoutesHash: hash(1), RouteCount: count(1)})
	f.op(history.Op{Client: 1, Kind: history.Split, Status: history.OK, Call: 30, Return: 40, RequestID: "s1", RouteID: 1, SplitKey: []byte("k5"), ExpectedVersion: ev(1),
		Version: 2, LeftID: s1.Children[0].ID, RightID: s1.Children[1].ID, CommitHLC: s1.HLC})
	f.op(history.Op{Client: 0, Kind: history.ListRoutes, Status: history.OK, Call: 50, Return: 60, Version: 2, RoutesHash: hash(2), RouteCount: count(2)})
	f.op(history.Op{Client: 2, Kind: history.Split, Status: history.Fail, Code: "FailedPrecondition", Call: 70, Return: 80, RequestID: "s2", RouteID: 4, SplitKey: []byte("k7"), ExpectedVersion: ev(1)})
	f.op(history.Op{Client: 0, Kind: history.ListRoutes, Status: history.OK, Call: 85, Return: 88, Version: 3, RoutesHash: hash(3), RouteCount: count(3)})
	f.op(history.Op{Client: 1, Kind: history.SetEnabled, Status: history.OK, Call: 90, Return: 100, RequestID: "e1", Enabled: false, Reason: "x", SwitchEnabled: false, SwitchReason: "x"})
	f.op(history.Op{Client: 2, Kind: history.ReadSwitch, Status: history.OK, Call: 110, Return: 120, SwitchEnabled: false, SwitchReason: "x"})
	f.op(history.Op{Client: 0, Kind: history.GetTimestamp, Status: history.OK, Call: 130, Return: 140, First: 1000, Count: 10})
	f.op(history.Op{Client: 1, Kind: history.GetTimestamp, Status: history.OK, Call: 150, Return: 160, First: 1010, Count: 10})
	f.op(history.Op{Client: 1, Kind: history.Split, Status: history.Unknown, Code: "DeadlineExceeded", Call: 170, Return: 200, RequestID: "s3", RouteID: 4, SplitKey: []byte("k8"), ExpectedVersion: ev(3)})
	f.op(history.Op{Client: 2, Kind: history.Split, Status: history.Unknown, Code: "Unknown", Call: 175, Return: 210, RequestID: "lost", RouteID: 3, SplitKey: []byte("k1"), ExpectedVersion: ev(4)})
	f.op(history.Op{Client: 0, Kind: history.ListRoutes, Status: history.OK, Call: 220, Return: 230, Version: 4, RoutesHash: hash(4), RouteCount: count(4)})
	f.op(history.Op{Client: 1, Kind: history.Split, Status: history.Fail, Code: "Unavailable", Call: 240, Return: 250, RequestID: "never", RouteID: 3, SplitKey: []byte("k2"), ExpectedVersion: ev(4)})
	var deltas []*api.CatalogDelta
	for _, s := range replay.Splits {
		d := &api.CatalogDelta{Version: s.Version, RemovedRouteIds: []uint64{s.Parent.ID}, CommitHlc: s.HLC}
		for _, c := range s.Children {
			d.Added = append(d.Added, &api.RouteDescriptor{RouteId: c.ID, Start: c.Start, End: c.End, GroupId: c.Group, State: c.State, ParentRouteId: c.Parent, SplitAtHlc: c.SplitAtHLC})
		}
		deltas = append(deltas, d)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		f.nodes = append(f.nodes, NodeFinal{ID: id, Hashes: map[uint64]string{6: "aa", 7: "bb"}, WatchFrom: 1, Deltas: deltas})
	}
	return f
}

func (f *fixture) check(t *testing.T) *Report {
	t.Helper()
	logs := f.logs
	if logs == nil {
		logs = map[string][]raftlog.Entry{}
		for _, n := range f.nodes {
			logs[n.ID] = f.log
		}
	}
	r, err := Check(Input{Ops: f.ops, Logs: logs, Committed: uint64(len(f.log)), Nodes: f.nodes})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestCheckPassesACorrectRun(t *testing.T) {
	f := newFixture(t)
	r := f.check(t)
	if !r.OK() {
		t.Fatalf("a correct run was judged:\n%s", r.Summary())
	}
	if r.Stats.AutoSplits != 1 || r.Stats.ManualSplits != 2 || r.Stats.Unknown != 2 || r.Stats.UnknownApplied != 1 {
		t.Fatalf("stats %+v", r.Stats)
	}
	res := map[string]string{}
	for _, op := range r.Resolved {
		res[op.RequestID] = op.Resolution
	}
	if !strings.HasPrefix(res["s3"], "applied at index 6") || res["lost"] != "not in the log" {
		t.Fatalf("resolutions %v", res)
	}
}

func TestCheckCatchesEachKindOfBug(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(f *fixture)
		want   []string
	}{
		{"stale read after a newer split returned", func(f *fixture) {
			f.ops[11].Version, f.ops[11].RoutesHash, f.ops[11].RouteCount = f.ops[2].Version, f.ops[2].RoutesHash, f.ops[2].RouteCount
		}, []string{CheckMonotonic, CheckLinearizable}},
		{"read with the wrong routes", func(f *fixture) { f.ops[2].RoutesHash = f.ops[0].RoutesHash }, []string{CheckClientVsLog, CheckLinearizable}},
		{"split acknowledged but not in the log", func(f *fixture) {
			f.ops[12].Status, f.ops[12].Code, f.ops[12].Version = history.OK, "", 5
		}, []string{CheckClientVsLog}},
		{"split told unavailable but applied", func(f *fixture) { f.ops[1].Status, f.ops[1].Code = history.Fail, "Unavailable" }, []string{CheckClientVsLog}},
		{"CAS ignored: a stale split acknowledged", func(f *fixture) {
			f.ops[3].Status, f.ops[3].Code, f.ops[3].Version = history.OK, "", 3
		}, []string{CheckClientVsLog}},
		{"split acknowledged with other children", func(f *fixture) { f.ops[1].LeftID = 9 }, []string{CheckClientVsLog, CheckLinearizable}},
		{"switch read of a value never written", func(f *fixture) { f.ops[6].SwitchReason = "y" }, []string{CheckLinearizable}},
		{"overlapping timestamps", func(f *fixture) { f.ops[8].First = 1005 }, []string{CheckTimestamps}},
		{"timestamps going back in real time", func(f *fixture) { f.ops[8].First = 900 }, []string{CheckTimestamps}},
		{"diverged state hash", func(f *fixture) { f.nodes[2].Hashes = map[uint64]string{6: "aa", 7: "cc"} }, []string{CheckStateHash}},
		{"no common sample", func(f *fixture) { f.nodes[2].Hashes = map[uint64]string{8: "dd"} }, []string{CheckStateHash}},
		{"node applied other routes", func(f *fixture) {
			d := proto.CloneOf(f.nodes[1].Deltas[1])
			d.Added[0].End = []byte("user:8")
			d.Added[1].Start = []byte("user:8")
			f.nodes[1].Deltas = append([]*api.CatalogDelta{f.nodes[1].Deltas[0], d}, f.nodes[1].Deltas[2:]...)
		}, []string{CheckNodeHistory}},
		{"committed logs disagree", func(f *fixture) {
			other := append([]raftlog.Entry{}, f.log...)
			other[2].Term = 9
			f.logs = map[string][]raftlog.Entry{"n1": other, "n2": f.log, "n3": f.log}
		}, []string{CheckLogAgreement}},
		{"fence refusal committed", func(f *fixture) { f.log[2].Command.Hlc = 1 }, []string{CheckInvariant}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.mutate(f)
			r := f.check(t)
			for _, w := range tc.want {
				if !r.Has(w) {
					t.Errorf("no %s violation; got:\n%s", w, r.Summary())
				}
			}
		})
	}
}

// One node's committed log diverges: the checker reports it and judges the
// clients against the majority's log, not the outlier's.
func TestCheckJudgesAgainstTheMajorityLog(t *testing.T) {
	f := newFixture(t)
	outlier := append([]raftlog.Entry{}, f.log...)
	cmd := split("other", 1, "k1", 1) // would make version 2 differently
	cmd.Hlc = outlier[1].Command.GetHlc()
	data, _ := proto.Marshal(cmd)
	outlier[1] = raftlog.Entry{Index: 2, Term: 1, Type: raft.LogCommand, Command: cmd, Data: data}
	f.logs = map[string][]raftlog.Entry{"n1": outlier, "n2": f.log, "n3": f.log}
	r := f.check(t)
	if !r.Has(CheckLogAgreement) {
		t.Fatalf("divergence not reported:\n%s", r.Summary())
	}
	for _, v := range r.Violations {
		if v.Check != CheckLogAgreement {
			t.Errorf("judged against the outlier: %s", v)
		}
	}
}

func merge(rid string, left, right uint64, expected uint64) *api.Command {
	return &api.Command{RequestId: rid, MinVersion: 3, Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: left, RightRouteId: right, ExpectedVersion: &expected}}}
}

// deltasOf is the catalog history a correct node streams for the replay.
func deltasOf(replay *model.Replay) []*api.CatalogDelta {
	toAPI := func(r model.Route) *api.RouteDescriptor {
		return &api.RouteDescriptor{RouteId: r.ID, Start: r.Start, End: r.End, GroupId: r.Group, State: r.State, ParentRouteId: r.Parent,
			SplitAtHlc: r.SplitAtHLC, MergedFromLeft: r.MergedLeft, MergedFromRight: r.MergedRight, MergedAtHlc: r.MergedAtHLC, OperatorStart: r.OperatorStart}
	}
	byVersion := map[uint64]*api.CatalogDelta{}
	for _, s := range replay.Splits {
		byVersion[s.Version] = &api.CatalogDelta{Version: s.Version, RemovedRouteIds: []uint64{s.Parent.ID}, CommitHlc: s.HLC,
			Added: []*api.RouteDescriptor{toAPI(s.Children[0]), toAPI(s.Children[1])}}
	}
	for _, m := range replay.Merges {
		byVersion[m.Version] = &api.CatalogDelta{Version: m.Version, RemovedRouteIds: []uint64{m.Left.ID, m.Right.ID}, CommitHlc: m.HLC,
			Added: []*api.RouteDescriptor{toAPI(m.Merged)}}
	}
	var out []*api.CatalogDelta
	for v := uint64(model.InitialVersion + 1); v <= replay.Final().Version; v++ {
		out = append(out, byVersion[v])
	}
	return out
}

// newMergeFixture is a correct run at cluster version 3 with manual merges
// among the splits: one acknowledged, one refused as stale after an
// unrelated split, one whose client saw no answer (applied), one sent by
// no recorded client, one refused as not adjacent, one lost before the log.
func newMergeFixture(t *testing.T) (*fixture, map[string]int) {
	t.Helper()
	f := &fixture{hlc: 5_000_000 * ms}
	f.add(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", GroupId: 1, InitialSplits: [][]byte{[]byte("user:")},
		AutoSplit: true, Config: &api.Config{CooldownMs: 1000}, ClusterVersion: 3}}}) // r1 ["", user:), r2 [user:, +inf)
	f.add(split("s1", 1, "k5", 1)) // v2: r3 ["", k5), r4 [k5, user:)
	f.add(split("s2", 4, "k7", 2)) // v3: r5 [k5, k7), r6 [k7, user:)
	f.add(merge("m1", 5, 6, 3))    // v4: r7 [k5, user:)
	f.add(split("s3", 3, "k2", 4)) // v5: r8 ["", k2), r9 [k2, k5)
	f.add(merge("m2", 8, 9, 4))    // stale: refused
	f.add(merge("m3", 9, 7, 5))    // v6: r10 [k2, user:), the client saw no answer
	f.add(merge("m4", 10, 2, 6))   // v7: r11 [k2, +inf), no recorded client
	f.add(merge("m5", 11, 8, 7))   // not adjacent: r11 starts where r8 ends
	replay, err := model.Run(f.log, uint64(len(f.log)))
	if err != nil {
		t.Fatal(err)
	}
	read := func(v uint64, call int64) history.Op {
		c, _ := replay.CatalogAt(v)
		return history.Op{Client: 0, Kind: history.ListRoutes, Status: history.OK, Call: call, Return: call + 5, Version: v, RoutesHash: c.Hash().Hex(), RouteCount: len(c.Routes)}
	}
	ev := func(v uint64) *uint64 { return &v }
	req := replay.Requests
	at := map[string]int{}
	op := func(name string, o history.Op) { at[name] = len(f.ops); f.op(o) }
	splitOp := func(rid string, route uint64, key string, exp uint64, call int64) history.Op {
		r := req[rid]
		return history.Op{Client: 1, Kind: history.Split, Status: history.OK, Call: call, Return: call + 10, RequestID: rid, RouteID: route, SplitKey: []byte(key),
			ExpectedVersion: ev(exp), Version: r.Version, LeftID: r.Children[0].ID, RightID: r.Children[1].ID, CommitHLC: r.HLC}
	}
	mergeOp := func(rid string, l, r uint64, exp uint64, call int64) history.Op {
		return history.Op{Client: 2, Kind: history.Merge, Call: call, Return: call + 10, RequestID: rid, RouteID: l, RightRouteID: r, ExpectedVersion: ev(exp)}
	}
	op("read1", read(1, 10))
	op("s1", splitOp("s1", 1, "k5", 1, 20))
	op("s2", splitOp("s2", 4, "k7", 2, 40))
	m1 := mergeOp("m1", 5, 6, 3, 60)
	m1.Status, m1.Version, m1.MergedID, m1.CommitHLC = history.OK, req["m1"].Version, req["m1"].Merged.ID, req["m1"].HLC
	op("m1", m1)
	op("read4", read(4, 75))
	v4, _ := replay.CatalogAt(4)
	r7, _ := v4.Route(7)
	r7hash := model.HashRoutes([]model.Route{r7}).Hex()
	op("get7", history.Op{Client: 3, Kind: history.GetRoute, Status: history.OK, Call: 76, Return: 78, RouteID: 7, Version: 4, RoutesHash: r7hash})
	op("getk6", history.Op{Client: 3, Kind: history.GetRoute, Status: history.OK, Call: 79, Return: 80, ByKey: true, Key: []byte("k6"), RouteID: 7, Version: 4, RoutesHash: r7hash})
	op("get5gone", history.Op{Client: 3, Kind: history.GetRoute, Status: history.OK, Call: 76, Return: 79, RouteID: 5, Gone: true})
	op("s3", splitOp("s3", 3, "k2", 4, 80))
	m2 := mergeOp("m2", 8, 9, 4, 100)
	m2.Status, m2.Code = history.Fail, "FailedPrecondition"
	op("m2", m2)
	m3 := mergeOp("m3", 9, 7, 5, 120)
	m3.Status, m3.Code = history.Unknown, "DeadlineExceeded"
	op("m3", m3)
	m5 := mergeOp("m5", 11, 8, 7, 200)
	m5.Status, m5.Code = history.Fail, "FailedPrecondition"
	op("m5", m5)
	lost := mergeOp("lost", 8, 10, 7, 210)
	lost.Status, lost.Code = history.Unknown, "Unknown"
	op("lost", lost)
	op("read7", read(7, 230))
	deltas := deltasOf(replay)
	for _, id := range []string{"n1", "n2", "n3"} {
		f.nodes = append(f.nodes, NodeFinal{ID: id, Hashes: map[uint64]string{9: "aa"}, WatchFrom: 1, Deltas: deltas})
	}
	return f, at
}

func TestCheckPassesARunWithMerges(t *testing.T) {
	f, at := newMergeFixture(t)
	r := f.check(t)
	if !r.OK() {
		t.Fatalf("a correct run was judged:\n%s", r.Summary())
	}
	// The manual merges removed k7, k5 and the bootstrap's user:; k2, a
	// manual split's key, is left.
	if r.Stats.PinsReleased != 3 || r.Stats.PinnedStarts != 1 {
		t.Fatalf("operator boundaries: %d released, %d left; want 3 and 1", r.Stats.PinsReleased, r.Stats.PinnedStarts)
	}
	if r.Stats.ManualMerges != 3 || r.Stats.ManualSplits != 3 || r.Stats.Versions != 7 || r.Stats.Unknown != 2 || r.Stats.UnknownApplied != 1 {
		t.Fatalf("stats %+v", r.Stats)
	}
	if m3 := r.Resolved[at["m3"]]; !strings.HasPrefix(m3.Resolution, "applied at index 7") || m3.MergedID != 10 || m3.Version != 6 {
		t.Fatalf("m3 resolved as %+v", m3)
	}
	if lost := r.Resolved[at["lost"]]; lost.Resolution != "not in the log" {
		t.Fatalf("lost resolved as %q", lost.Resolution)
	}
	if r.Stats.MergeRefusals["version_mismatch"] != 1 || r.Stats.MergeRefusals["routes_not_adjacent"] != 1 || len(r.Stats.MergeRefusals) != 2 {
		t.Fatalf("merge refusals %v", r.Stats.MergeRefusals)
	}
	if !strings.Contains(r.Summary(), "manual merges 3") {
		t.Fatalf("summary:\n%s", r.Summary())
	}
}

func TestCheckCatchesEachKindOfMergeBug(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(f *fixture, at map[string]int)
		want   []string
	}{
		{"CAS ignored: the stale merge after a split acknowledged", func(f *fixture, at map[string]int) {
			m := &f.ops[at["m2"]]
			m.Status, m.Code, m.Version, m.MergedID, m.CommitHLC = history.OK, "", 6, 10, f.log[5].Command.GetHlc()
		}, []string{CheckClientVsLog, CheckLinearizable}},
		{"merge acknowledged with another merged route", func(f *fixture, at map[string]int) { f.ops[at["m1"]].MergedID = 9 },
			[]string{CheckClientVsLog, CheckLinearizable}},
		{"merge acknowledged but not in the log", func(f *fixture, at map[string]int) {
			m := &f.ops[at["lost"]]
			m.Status, m.Code, m.Version, m.MergedID = history.OK, "", 8, 12
		}, []string{CheckClientVsLog}},
		{"merge told unavailable but applied", func(f *fixture, at map[string]int) {
			m := &f.ops[at["m1"]]
			m.Status, m.Code = history.Fail, "Unavailable"
		}, []string{CheckClientVsLog}},
		{"stale read after a merge returned", func(f *fixture, at map[string]int) {
			r := &f.ops[at["read7"]]
			old := f.ops[at["read1"]]
			r.Version, r.RoutesHash, r.RouteCount = old.Version, old.RoutesHash, old.RouteCount
		}, []string{CheckMonotonic, CheckLinearizable}},
		{"a route read as gone while it was live", func(f *fixture, at map[string]int) {
			g := &f.ops[at["get5gone"]]
			g.Call, g.Return = 52, 55 // after s2 made r5, before m1 merged it away
		}, []string{CheckLinearizable}},
		{"a stale route read after a merge returned", func(f *fixture, at map[string]int) {
			g := &f.ops[at["get7"]]
			g.Call, g.Return = 236, 240 // after read7 returned version 7, where r7 is gone
		}, []string{CheckMonotonic, CheckLinearizable}},
		{"a route read by key that does not hold it", func(f *fixture, at map[string]int) { f.ops[at["getk6"]].Key = []byte("k1") },
			[]string{CheckClientVsLog, CheckLinearizable}},
		{"a route read with other fields", func(f *fixture, at map[string]int) { f.ops[at["get7"]].RoutesHash = f.ops[at["read1"]].RoutesHash },
			[]string{CheckClientVsLog, CheckLinearizable}},
		{"a node's merge delta removes the right route first", func(f *fixture, at map[string]int) {
			ds := slices.Clone(f.nodes[1].Deltas)
			d := proto.CloneOf(ds[2])
			d.RemovedRouteIds = []uint64{d.RemovedRouteIds[1], d.RemovedRouteIds[0]}
			ds[2] = d
			f.nodes[1].Deltas = ds
		}, []string{CheckNodeHistory}},
		{"a node's merged route names other parents", func(f *fixture, at map[string]int) {
			ds := slices.Clone(f.nodes[2].Deltas)
			d := proto.CloneOf(ds[2])
			d.Added[0].MergedFromLeft = 3
			ds[2] = d
			f.nodes[2].Deltas = ds
		}, []string{CheckNodeHistory}},
		{"a node applied the stale merge", func(f *fixture, at map[string]int) {
			// n3 ignored the merge's CAS at index 6: from version 6 on its
			// catalog is not the log's.
			ds := slices.Clone(f.nodes[2].Deltas[:4])
			ds = append(ds, &api.CatalogDelta{Version: 6, RemovedRouteIds: []uint64{8, 9}, CommitHlc: f.log[5].Command.GetHlc(),
				Added: []*api.RouteDescriptor{{RouteId: 10, End: []byte("k5"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE,
					MergedFromLeft: 8, MergedFromRight: 9, MergedAtHlc: f.log[5].Command.GetHlc()}}})
			f.nodes[2].Deltas = ds
		}, []string{CheckNodeHistory}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, at := newMergeFixture(t)
			tc.mutate(f, at)
			r := f.check(t)
			for _, w := range tc.want {
				if !r.Has(w) {
					t.Errorf("no %s violation; got:\n%s", w, r.Summary())
				}
			}
		})
	}
}

func mergeStep(op, left, right uint64) *api.Command {
	return &api.Command{MinVersion: 3, Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{OpId: op, Step: 1, LeftRouteId: left, RightRouteId: right}}}
}

// newAutoMergeFixture: an automatic split (or, manual, a split by a
// client), then, past the 1 s merge delay, an automatic merge of its
// children from the log, read back by a client. The merge of a manual
// split's children removes an operator's boundary.
func newAutoMergeFixture(t *testing.T, gapMs uint64, switchOff, manual bool) (*fixture, *model.Replay) {
	t.Helper()
	f := &fixture{hlc: 5_000_000 * ms}
	delay := uint64(1000)
	f.add(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", GroupId: 1, InitialSplits: [][]byte{[]byte("user:")},
		AutoSplit: true, Config: &api.Config{CooldownMs: 1000, MergeDelayMs: &delay}, ClusterVersion: 3}}})
	if manual {
		f.add(split("s1", 1, "k5", 1)) // v2: r3, r4 [k5, user:), k5 the operator's
	} else {
		f.add(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{OpId: 9, Step: 1, RouteId: 1, SplitKey: []byte("k5")}}}) // v2: r3, r4, k5 the detector's
	}
	if switchOff {
		f.add(&api.Command{RequestId: "off", Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: false, Reason: "x", Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR}}})
	}
	f.hlc += gapMs * ms
	f.add(mergeStep(1, 3, 4)) // v3: r5 ["", user:)
	replay, err := model.Run(f.log, uint64(len(f.log)))
	if err != nil {
		t.Fatal(err)
	}
	if manual {
		s1 := replay.Requests["s1"]
		ev := uint64(1)
		f.op(history.Op{Client: 1, Kind: history.Split, Status: history.OK, Call: 10, Return: 20, RequestID: "s1", RouteID: 1, SplitKey: []byte("k5"),
			ExpectedVersion: &ev, Version: 2, LeftID: 3, RightID: 4, CommitHLC: s1.HLC})
	}
	final := replay.Final()
	f.op(history.Op{Client: 0, Kind: history.ListRoutes, Status: history.OK, Call: 30, Return: 40, Version: final.Version,
		RoutesHash: final.Hash().Hex(), RouteCount: len(final.Routes)})
	for _, id := range []string{"n1", "n2", "n3"} {
		f.nodes = append(f.nodes, NodeFinal{ID: id, Hashes: map[uint64]string{4: "aa"}, WatchFrom: 1, Deltas: deltasOf(replay)})
	}
	return f, replay
}

func TestCheckAutomaticMerges(t *testing.T) {
	f, _ := newAutoMergeFixture(t, 1500, false, false)
	r := f.check(t)
	if !r.OK() || r.Stats.AutoMerges != 1 || r.Stats.AutoSplits != 1 {
		t.Fatalf("a correct run with an automatic merge was judged (stats %+v):\n%s", r.Stats, r.Summary())
	}

	// Merged 500 ms after the split that made both routes: within the delay.
	f, _ = newAutoMergeFixture(t, 500, false, false)
	r = f.check(t)
	if !r.HasAbout(CheckInvariant, "before the merge delay") || !r.HasAbout(CheckNodeHistory, "before the merge delay") {
		t.Fatalf("a merge within the merge delay passed:\n%s", r.Summary())
	}

	// The merged routes were a client's split: the merge op removed an
	// operator's boundary, on the log and on every node's own history.
	f, _ = newAutoMergeFixture(t, 1500, false, true)
	r = f.check(t)
	if !r.HasAbout(CheckInvariant, `removed the boundary "k5"`) || !r.HasAbout(CheckNodeHistory, `removed the boundary "k5"`) {
		t.Fatalf("an automatic merge across an operator's boundary passed:\n%s", r.Summary())
	}

	// The switch went off before the merge step: the op pauses. Nodes that
	// merged anyway are caught on their own histories.
	f, replay := newAutoMergeFixture(t, 1500, true, false)
	if len(replay.Merges) != 0 {
		t.Fatalf("the model merged while the switch was off: %+v", replay.Merges)
	}
	merged := model.Route{ID: 5, End: []byte("user:"), Group: 1, State: api.RouteState_ROUTE_STATE_ACTIVE, MergedLeft: 3, MergedRight: 4, MergedAtHLC: f.log[3].Command.GetHlc()}
	for i := range f.nodes {
		f.nodes[i].Deltas = append(f.nodes[i].Deltas, &api.CatalogDelta{Version: 3, RemovedRouteIds: []uint64{3, 4}, CommitHlc: merged.MergedAtHLC,
			Added: []*api.RouteDescriptor{{RouteId: 5, End: merged.End, GroupId: 1, State: merged.State, MergedFromLeft: 3, MergedFromRight: 4, MergedAtHlc: merged.MergedAtHLC}}})
	}
	f.ops = f.ops[:1]
	r = f.check(t)
	if !r.HasAbout(CheckNodeHistory, "make no version 3") {
		t.Fatalf("nodes that merged while the switch was off passed:\n%s", r.Summary())
	}
}
