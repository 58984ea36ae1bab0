package model

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// logBuilder writes a synthetic committed log: every command gets the next
// index and, unless it carries one, the next HLC (1 ms apart).
type logBuilder struct {
	entries []raftlog.Entry
	hlc     uint64
	term    uint64
}

const ms = 1 << 16 // one millisecond of HLC

func newLog(splits ...string) *logBuilder {
	b := &logBuilder{hlc: 1_000_000 * ms, term: 1}
	var keys [][]byte
	for _, s := range splits {
		keys = append(keys, []byte(s))
	}
	b.add(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", GroupId: 1, InitialSplits: keys,
		AutoSplit: true, Config: &api.Config{CooldownMs: 1000, OpTtlMs: 5000}}}})
	return b
}

func (b *logBuilder) add(cmd *api.Command) uint64 {
	if cmd.Hlc == 0 {
		b.hlc += ms
		cmd.Hlc = b.hlc
	}
	idx := uint64(len(b.entries) + 1)
	b.entries = append(b.entries, raftlog.Entry{Index: idx, Term: b.term, Type: raft.LogCommand, Command: cmd})
	return idx
}

func (b *logBuilder) noop() {
	b.entries = append(b.entries, raftlog.Entry{Index: uint64(len(b.entries) + 1), Term: b.term, Type: raft.LogNoop})
}

func (b *logBuilder) wait(d uint64) { b.hlc += d * ms }

func (b *logBuilder) manual(rid string, route uint64, key string, expected ...uint64) uint64 {
	s := &api.SplitRange{RouteId: route, SplitKey: []byte(key)}
	if len(expected) > 0 {
		s.ExpectedVersion = &expected[0]
	}
	return b.add(&api.Command{RequestId: rid, Body: &api.Command_SplitRange{SplitRange: s}})
}

// version sets the cluster version the log bootstraps at.
func (b *logBuilder) version(v uint32) { b.entries[0].Command.GetBootstrap().ClusterVersion = v }

func (b *logBuilder) merge(rid string, left, right uint64, expected ...uint64) uint64 {
	m := &api.MergeRange{LeftRouteId: left, RightRouteId: right}
	if len(expected) > 0 {
		m.ExpectedVersion = &expected[0]
	}
	return b.add(&api.Command{RequestId: rid, MinVersion: 3, Body: &api.Command_MergeRange{MergeRange: m}})
}

func (b *logBuilder) mergeStep(op, left, right uint64) uint64 {
	return b.add(&api.Command{MinVersion: 3, Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{OpId: op, Step: 1, LeftRouteId: left, RightRouteId: right}}})
}

func (b *logBuilder) step(op uint64, step uint32, route uint64, key string) uint64 {
	return b.add(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{OpId: op, Step: step, RouteId: route, SplitKey: []byte(key)}}})
}

func (b *logBuilder) setSwitch(on bool, reason string) uint64 {
	return b.add(&api.Command{RequestId: "sw-" + reason, Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: on, Reason: reason,
		Source: api.SwitchSource_SWITCH_SOURCE_OPERATOR}}})
}

func (b *logBuilder) run(t *testing.T) *Replay {
	t.Helper()
	r, err := Run(b.entries, uint64(len(b.entries)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func outcomeAt(r *Replay, idx uint64) (Outcome, bool) {
	for _, s := range r.Steps {
		if s.Index == idx {
			return s.Outcome, true
		}
	}
	return Outcome{}, false
}

func TestReplayManualSplits(t *testing.T) {
	b := newLog()
	b.noop()
	b.manual("a", 1, "m", 1)        // v2: r2 ["", m), r3 [m, +inf)
	b.manual("b", 3, "t", 1)        // stale CAS: refused
	b.manual("c", 3, "t", 2)        // v3
	b.manual("a", 2, "c", 1)        // duplicate request id: first answer, no change
	b.manual("d", 9, "q")           // unknown route
	b.manual("e", 2, "c")           // no CAS: v4
	fenced := b.manual("f", 5, "x") // HLC set below: refused by the fence
	b.entries[fenced-1].Command.Hlc = 5
	r := b.run(t)

	want := map[string]Code{"a": OK, "b": VersionMismatch, "c": OK, "d": RouteNotFound, "e": OK, "f": FenceViolation}
	for rid, code := range want {
		if got := r.Requests[rid].Code; got != code {
			t.Errorf("request %s: %s, want %s", rid, got, code)
		}
	}
	if r.Requests["a"].Version != 2 || r.Requests["c"].Version != 3 || r.Requests["e"].Version != 4 {
		t.Errorf("versions a=%d c=%d e=%d", r.Requests["a"].Version, r.Requests["c"].Version, r.Requests["e"].Version)
	}
	if got := r.Final(); got.Version != 4 || len(got.Routes) != 4 {
		t.Fatalf("final catalog v%d %v", got.Version, got.Routes)
	}
	if len(r.Splits) != 3 || len(r.FenceRejections) != 1 || r.FenceRejections[0] != fenced {
		t.Fatalf("splits %d, fence rejections %v", len(r.Splits), r.FenceRejections)
	}
	if errs := r.CheckCatalogs(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if errs := CheckChanges(r.Splits, r.Merges, r.EnabledBefore); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestReplayManualMerges(t *testing.T) {
	b := newLog("f", "m", "t") // r1 ["", f), r2 [f, m), r3 [m, t), r4 [t, +inf)
	b.version(3)
	b.manual("s", 2, "h", 1) // v2: r5 [f, h), r6 [h, m)
	b.merge("a", 5, 6, 2)    // v3: r7 [f, m) from r5 and r6
	b.merge("b", 7, 3, 2)    // stale CAS
	b.merge("c", 3, 7)       // right before left
	b.merge("d", 1, 3)       // not neighbours
	b.merge("e", 7, 9)       // unknown route
	b.merge("f", 7, 7)       // the same route twice
	b.merge("a", 1, 7)       // duplicate request id: the first answer
	b.merge("g", 7, 3, 3)    // v4: r8 [f, t)
	b.manual("h", 8, "m", 4) // v5: the merged route splits at the old boundary: r9, r10
	b.merge("i", 1, 9)       // v6: no CAS: r11 ["", m)
	fenced := b.merge("j", 11, 10)
	b.entries[fenced-1].Command.Hlc = 5
	r := b.run(t)

	want := map[string]Code{"a": OK, "b": VersionMismatch, "c": NotAdjacent, "d": NotAdjacent, "e": RouteNotFound, "f": InvalidArgument,
		"g": OK, "h": OK, "i": OK, "j": FenceViolation}
	for rid, code := range want {
		if got := r.Requests[rid].Code; got != code {
			t.Errorf("request %s: %s, want %s", rid, got, code)
		}
	}
	a := r.Requests["a"]
	if a.Version != 3 || !a.Merged.Equal(Route{ID: 7, Start: []byte("f"), End: []byte("m"), Group: 1, State: active, MergedLeft: 5, MergedRight: 6, MergedAtHLC: a.HLC,
		OperatorStart: true /* f, the bootstrap's, kept from r5 */}) {
		t.Errorf("merge a: v%d %+v", a.Version, a.Merged)
	}
	if got := r.Final(); got.Version != 6 || got.NextID != 12 || len(got.Routes) != 3 {
		t.Fatalf("final catalog v%d next %d %v", got.Version, got.NextID, got.Routes)
	}
	if len(r.Merges) != 3 || len(r.Splits) != 2 || len(r.FenceRejections) != 1 {
		t.Fatalf("merges %d, splits %d, fence rejections %v", len(r.Merges), len(r.Splits), r.FenceRejections)
	}
	if m := r.Merges[1]; m.Left.ID != 7 || m.Right.ID != 3 || m.Merged.ID != 8 || m.RequestID != "g" || m.Version != 4 {
		t.Fatalf("second merge %+v", m)
	}
	if errs := r.CheckCatalogs(); len(errs) > 0 {
		t.Fatal(errs)
	}
	if errs := CheckChanges(r.Splits, r.Merges, r.EnabledBefore); len(errs) > 0 {
		t.Fatal(errs)
	}
}

// Merges are refused below cluster version 3 (feature manual_merge), and a
// command whose min_version the cluster has not reached changes nothing;
// member records raise the version to the lowest one every member
// supports.
func TestReplayMergesNeedClusterVersion3(t *testing.T) {
	b := newLog("m") // cluster version 1
	member := func(id string, v uint32) {
		b.add(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: id, SupportedVersion: v}}}})
	}
	b.merge("early", 1, 2)
	b.add(&api.Command{RequestId: "nomin", Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: 1, RightRouteId: 2}}})
	member("n2", 2)
	member("n1", 3) // n2 holds the cluster at 2
	b.merge("held", 1, 2)
	member("n2", 3)
	b.merge("ok", 1, 2)
	r := b.run(t)
	for rid, code := range map[string]Code{"early": InvalidArgument, "nomin": InvalidArgument, "held": InvalidArgument, "ok": OK} {
		if got := r.Requests[rid].Code; got != code {
			t.Errorf("request %s: %s, want %s", rid, got, code)
		}
	}
	if len(r.Merges) != 1 || r.Final().Version != 2 {
		t.Fatalf("merges %d, final v%d", len(r.Merges), r.Final().Version)
	}
}

// A manual merge of a route that a live op will still change is refused
// (route_in_live_op): the model knows of the op from a pending step entry,
// or from a step entry later in the log.
func TestReplayMergeOfARouteInALiveOp(t *testing.T) {
	b := newLog("f", "m", "t")
	b.version(3)
	b.setSwitch(false, "off")
	b.step(1, 1, 2, "h") // op 1 pauses before splitting r2: it stays live
	paused := b.merge("paused", 1, 2)
	later := b.merge("later", 3, 4) // op 2, planned before, steps on r4 below
	b.setSwitch(true, "on")
	b.step(1, 1, 2, "h")   // v2: r5, r6
	b.step(2, 1, 4, "w")   // v3: r7, r8
	b.merge("after", 1, 5) // nothing names r1 or r5 later: applies, v4
	r := b.run(t)
	for rid, code := range map[string]Code{"paused": RouteInLiveOp, "later": RouteInLiveOp, "after": OK} {
		if got := r.Requests[rid].Code; got != code {
			t.Errorf("request %s: %s, want %s", rid, got, code)
		}
	}
	if len(r.Notes) != 2 || !strings.Contains(r.Notes[0], fmt.Sprint("index ", paused)) || !strings.Contains(r.Notes[1], fmt.Sprint("index ", later)) {
		t.Fatalf("notes %q", r.Notes)
	}
	if len(r.Merges) != 1 || len(r.Splits) != 2 {
		t.Fatalf("merges %d splits %d", len(r.Merges), len(r.Splits))
	}
}

// An automatic split of a merged route waits out the cooldown from its
// merge, as one of a split route does from its split.
func TestReplayCooldownAfterAMerge(t *testing.T) {
	b := newLog("f", "m")
	b.version(3)
	b.merge("m", 1, 2) // v2: r4 ["", m)
	b.step(1, 1, 4, "c")
	r := b.run(t)
	errs := CheckChanges(r.Splits, r.Merges, r.EnabledBefore)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "before its cooldown ended") {
		t.Fatalf("errors %v, want the cooldown after the merge", errs)
	}
}

// Merge ops have one MergeRange step, stepped like a split op's: paused by
// the switch, a duplicate answered with the first result, aborted when a
// route is gone, refused when it names other routes or carries a version.
func TestReplayMergeOps(t *testing.T) {
	b := newLog("f", "m", "t") // r1 ["", f), r2 [f, m), r3 [m, t), r4 [t, +inf)
	b.version(3)
	b.setSwitch(false, "off")
	paused := b.mergeStep(1, 1, 2)
	b.setSwitch(true, "on")
	other := b.mergeStep(1, 2, 3)   // not the routes its first entry named
	applied := b.mergeStep(1, 1, 2) // v2: r5 ["", m)
	dup := b.mergeStep(1, 1, 2)
	b.manual("s", 3, "p", 2) // v3: r3 is split before op 2's step
	gone := b.mergeStep(2, 3, 4)
	again := b.mergeStep(2, 3, 4)
	v := uint64(3)
	withVersion := b.add(&api.Command{MinVersion: 3, Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{OpId: 3, Step: 1, LeftRouteId: 7, RightRouteId: 4, ExpectedVersion: &v}}})
	ahead := b.mergeStep(4, 7, 4)
	b.entries[ahead-1].Command.GetMergeRange().Step = 2
	splitOfMergeOp := b.step(1, 2, 5, "c")
	r := b.run(t)
	for _, tc := range []struct {
		idx  uint64
		code Code
		dup  bool
	}{{paused, OpPaused, false}, {other, InvalidArgument, false}, {applied, OK, false}, {dup, OK, true}, {gone, OpAborted, false},
		{again, OpAborted, false}, {withVersion, InvalidArgument, false}, {ahead, InvalidArgument, false}, {splitOfMergeOp, InvalidArgument, false}} {
		o, ok := outcomeAt(r, tc.idx)
		if !ok || o.Code != tc.code || o.Duplicate != tc.dup {
			t.Errorf("index %d: %+v, want %s duplicate=%v", tc.idx, o, tc.code, tc.dup)
		}
	}
	if len(r.Merges) != 1 || !r.Merges[0].Auto() || r.Merges[0].OpID != 1 || r.Merges[0].Merged.ID != 5 {
		t.Fatalf("merges %+v", r.Merges)
	}
	// Op 1 merged across the bootstrap key f, which the detector never
	// plans (operator_boundaries_kept): that, and nothing else, is against
	// the rules.
	if errs := CheckChanges(r.Splits, r.Merges, r.EnabledBefore); len(errs) != 1 || !strings.Contains(errs[0].Error(), `removed the boundary "f"`) {
		t.Fatalf("errors %v, want the operator's boundary f", errs)
	}
}

// The merge delay is Bootstrap's (30 min when absent), then SetConfig's;
// an automatic merge of a route made less than that long ago breaks the
// rules. Merge settings below cluster version 3 refuse the whole patch.
func TestReplayMergeDelay(t *testing.T) {
	b := newLog("f", "m")
	b.version(3)
	b.step(9, 1, 1, "c") // v2: r4 ["", c), r5 [c, f), made now by the detector
	b.mergeStep(1, 4, 5) // at once: within 30 min
	r := b.run(t)
	if r.MergeDelayMs != 30*60*1000 || r.Merges[0].DelayMs != 30*60*1000 {
		t.Fatalf("merge delay %d, event's %d", r.MergeDelayMs, r.Merges[0].DelayMs)
	}
	errs := CheckChanges(r.Splits, r.Merges, r.EnabledBefore)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "before the merge delay of r4") || !strings.Contains(errs[1].Error(), "of r5") {
		t.Fatalf("errors %v", errs)
	}

	b = newLog()
	b.version(3)
	delay := uint64(2000)
	b.add(&api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Patch: &api.ConfigPatch{MergeDelayMs: &delay}}}})
	b.step(9, 1, 1, "f")  // v2: r2 ["", f), r3 [f, +inf)
	b.wait(1000)          // r2's cooldown
	b.step(10, 1, 2, "c") // v3: r4 ["", c), r5 [c, f)
	b.wait(2000)
	b.mergeStep(1, 4, 5) // 2 s later: allowed; v4: r6 ["", f)
	b.mergeStep(2, 6, 3) // r6 was just made: too early
	r = b.run(t)
	errs = CheckChanges(r.Splits, r.Merges, r.EnabledBefore)
	if len(r.Merges) != 2 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "op 2 merged") {
		t.Fatalf("merges %d, errors %v", len(r.Merges), errs)
	}

	b = newLog("f") // version 1
	b.add(&api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Patch: &api.ConfigPatch{MergeDelayMs: &delay, CooldownMs: &delay}}}})
	if r := b.run(t); r.MergeDelayMs == delay || r.CooldownMs == delay {
		t.Fatalf("a patch with merge settings applied below version 3: delay %d cooldown %d", r.MergeDelayMs, r.CooldownMs)
	}
}

// From cluster version 3 a request id is bound to its request: a retry of
// the same request (its note reworded) gets the first answer, another
// request under that id is refused and changes nothing. Below 3 the id
// answers anything with its first result.
func TestReplayRequestIDsAreBound(t *testing.T) {
	b := newLog()
	b.version(3)
	b.manual("a", 1, "m", 1) // v2
	retry := b.manual("a", 1, "m", 1)
	b.entries[retry-1].Command.GetSplitRange().Note = "again"
	reused := b.manual("a", 3, "t", 2)
	r := b.run(t)
	if len(r.Reused) != 1 || r.Reused[0].Index != reused || r.Final().Version != 2 {
		t.Fatalf("reused %+v, final v%d", r.Reused, r.Final().Version)
	}
	if got := r.Requests["a"]; got.Version != 2 || got.Index != 2 {
		t.Fatalf("the id's first answer changed: %+v", got)
	}

	b = newLog() // version 1
	b.manual("a", 1, "m", 1)
	b.manual("a", 3, "t", 2)
	if r := b.run(t); len(r.Reused) != 0 || r.Final().Version != 2 {
		t.Fatalf("version 1: reused %+v, final v%d", r.Reused, r.Final().Version)
	}
}

func TestReplayTwoStepOpAcrossADisable(t *testing.T) {
	b := newLog("user:")            // r1 ["", user:), r2 [user:, +inf)
	s1 := b.step(1, 1, 2, "user:7") // v2: r3 [user:, user:7), r4 [user:7, +inf)
	dup := b.step(1, 1, 2, "user:7")
	b.setSwitch(false, "off")
	paused := b.step(1, 2, 4, "user:7\x00") // switch off: the op pauses
	b.term = 2
	b.setSwitch(true, "on")
	s2 := b.step(1, 2, 4, "user:7\x00") // v3: r5 [user:7, user:7\x00), r6
	late := b.step(1, 2, 4, "user:7\x00")
	r := b.run(t)

	for _, tc := range []struct {
		idx  uint64
		code Code
		dup  bool
	}{{s1, OK, false}, {dup, OK, true}, {paused, OpPaused, false}, {s2, OK, false}, {late, OK, true}} {
		o, ok := outcomeAt(r, tc.idx)
		if !ok || o.Code != tc.code || o.Duplicate != tc.dup {
			t.Errorf("index %d: %+v, want %s duplicate=%v", tc.idx, o, tc.code, tc.dup)
		}
	}
	if len(r.Splits) != 2 || !r.Splits[1].Middle || r.Splits[0].Middle || r.Splits[1].Term != 2 {
		t.Fatalf("splits %+v", r.Splits)
	}
	iso, ok := r.Final().Route(5)
	if !ok || string(iso.Start) != "user:7" || string(iso.End) != "user:7\x00" {
		t.Fatalf("isolated route %v", iso)
	}
	if errs := CheckChanges(r.Splits, r.Merges, r.EnabledBefore); len(errs) > 0 {
		t.Fatal(errs)
	}
}

func TestReplayOpAbortsWhenItsRouteIsGone(t *testing.T) {
	b := newLog("user:")
	b.manual("m", 2, "user:5", 1) // r2 is split by hand before the op's step
	gone := b.step(1, 1, 2, "user:7")
	again := b.step(1, 1, 2, "user:7")
	r := b.run(t)
	if o, _ := outcomeAt(r, gone); o.Code != OpAborted {
		t.Fatalf("step on a gone route: %s", o.Code)
	}
	if o, _ := outcomeAt(r, again); o.Code != OpAborted {
		t.Fatalf("step of an aborted op: %s", o.Code)
	}
	if len(r.Splits) != 1 {
		t.Fatalf("%d splits, want only the manual one", len(r.Splits))
	}
}

func TestReplayStepRules(t *testing.T) {
	b := newLog("user:")
	ahead := b.step(1, 2, 2, "user:7") // step 2 before step 1
	zero := b.step(2, 0, 2, "user:7")
	b.step(3, 1, 2, "user:7")
	wrongChild := b.step(3, 2, 3, "user:7\x00") // r3 is the left child; the key is in r4
	r := b.run(t)
	for _, idx := range []uint64{ahead, zero, wrongChild} {
		if o, _ := outcomeAt(r, idx); o.Code != InvalidArgument {
			t.Errorf("index %d: %s, want invalid_argument", idx, o.Code)
		}
	}
}

func TestReplayStaleEnableAbortsPausedOpsAndRefusesToGuess(t *testing.T) {
	b := newLog("user:")
	b.step(1, 1, 2, "user:7") // op 1 running
	b.setSwitch(false, "off")
	b.wait(6000) // longer than the op TTL (5000 ms)
	b.setSwitch(true, "on")
	stale := b.step(1, 2, 4, "user:7\x00")
	r := b.run(t)
	if o, _ := outcomeAt(r, stale); o.Code != OpAborted {
		t.Fatalf("step of an op paused past its TTL: %s", o.Code)
	}
	// An op the model never saw before that enable may or may not have been
	// paused by the disable: the model says it cannot tell.
	b.step(2, 1, 4, "user:9")
	if _, err := Run(b.entries, uint64(len(b.entries))); err == nil || !strings.Contains(err.Error(), "cannot tell") {
		t.Fatalf("Run: %v, want an error about an op it cannot place", err)
	}
}

func TestReplaySwitchSources(t *testing.T) {
	b := newLog()
	b.add(&api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: false, Source: api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG}}})
	b.setSwitch(true, "operator")
	ignored := b.add(&api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: false, Source: api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG}}})
	b.add(&api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: false}}}) // no source: refused
	r := b.run(t)
	var applied []bool
	for _, s := range r.Switches {
		applied = append(applied, s.Applied)
	}
	if fmt.Sprint(applied) != "[true true true false false]" {
		t.Fatalf("applied %v", applied)
	}
	if !r.EnabledBefore(ignored+5) || r.EnabledBefore(ignored-1) {
		t.Fatal("switch timeline wrong")
	}
}

func TestReplayForgetsTheOldestRequestID(t *testing.T) {
	b := newLog()
	b.manual("first", 9, "x") // refused (no route 9) but remembered
	for i := range RequestTableSize {
		b.manual(fmt.Sprint("r", i), 9, "x")
	}
	b.manual("first", 1, "k") // forgotten, so it applies now
	r := b.run(t)
	if got := r.Requests["first"]; got.Code != OK || got.Version != 2 {
		t.Fatalf("request re-sent after eviction: %+v", got)
	}
}

func TestRunRefusesAGappedLog(t *testing.T) {
	b := newLog()
	b.manual("a", 1, "k")
	b.entries[1].Index = 7
	if _, err := Run(b.entries, 2); err == nil {
		t.Fatal("Run accepted a log with a gap")
	}
	if _, err := Run(b.entries, 9); err == nil {
		t.Fatal("Run accepted a commit index beyond the log")
	}
}

// From cluster version 3 a bootstrap split key and a manual split's key
// mark the route they start (operator_start); a split's left child and a
// merged route keep the start, and the mark, of the route on their left;
// a manual merge may remove a marked start, an automatic merge may not.
func TestReplayOperatorBoundaries(t *testing.T) {
	b := newLog("f", "m") // r1 ["", f), r2 [f, m), r3 [m, +inf)
	b.version(3)
	b.manual("s", 2, "h")              // v2: r4 [f, h), r5 [h, m)
	b.step(1, 1, 3, "p")               // v3: r6 [m, p), r7 [p, +inf)
	b.merge("mm", 4, 5)                // v4: r8 [f, m), across the operator's h
	b.wait(defaultMergeDelayMs + 1000) // past every merge delay
	b.mergeStep(2, 6, 7)               // v5: r9 [m, +inf), across the detector's p
	b.wait(defaultMergeDelayMs + 1000)
	bad := b.mergeStep(3, 8, 9) // v6: across the bootstrap's m
	r := b.run(t)
	marks := func(v uint64) map[uint64]bool {
		c, _ := r.CatalogAt(v)
		m := map[uint64]bool{}
		for _, x := range c.Routes {
			m[x.ID] = x.OperatorStart
		}
		return m
	}
	for v, want := range map[uint64]map[uint64]bool{
		1: {1: false, 2: true, 3: true},
		2: {1: false, 4: true, 5: true, 3: true},
		3: {1: false, 4: true, 5: true, 6: true, 7: false},
		4: {1: false, 8: true, 6: true, 7: false},
		5: {1: false, 8: true, 9: true},
		6: {1: false, 10: true},
	} {
		if got := marks(v); !maps.Equal(got, want) {
			t.Errorf("version %d: marks %v, want %v", v, got, want)
		}
	}
	if errs := r.CheckCatalogs(); len(errs) > 0 {
		t.Fatal(errs)
	}
	errs := CheckChanges(r.Splits, r.Merges, r.EnabledBefore)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), fmt.Sprintf(`op 3 merged r8["f", "m") and r9["m", +inf) at version 6 (index %d): an automatic merge removed the boundary "m"`, bad)) {
		t.Fatalf("errors %v, want op 3's merge across m", errs)
	}

	// Version 2 records no placement: nothing is marked, and an automatic
	// merge across any boundary keeps the rules.
	b = newLog("f", "m")
	b.version(2)
	b.manual("s", 2, "h")
	b.mergeStep(1, 4, 5) // refused below 3: no merge
	r = b.run(t)
	for _, x := range r.Final().Routes {
		if x.OperatorStart {
			t.Fatalf("version 2 marked %s", x)
		}
	}
}

// The raise to version 3 marks every boundary the catalog has — version 2
// kept no record of who placed one — at the same catalog version; from
// then on a manual split marks its key and an op step's split does not.
func TestReplayRaiseMarksEveryBoundary(t *testing.T) {
	b := newLog("f", "m") // r1 ["", f), r2 [f, m), r3 [m, +inf)
	b.version(2)
	b.manual("s", 2, "h") // v2: r4 [f, h), r5 [h, m), unmarked
	b.add(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: 3}}}})
	b.manual("t", 3, "p") // v3: r6 [m, p) keeps r3's mark, r7 [p, +inf) marked
	b.step(1, 1, 1, "c")  // v4: r8 ["", c), r9 [c, f) unmarked: the detector's key
	r := b.run(t)
	v2, _ := r.CatalogAt(2)
	got := map[uint64]bool{}
	for _, x := range v2.Routes {
		got[x.ID] = x.OperatorStart
	}
	if want := map[uint64]bool{1: false, 4: true, 5: true, 3: true}; !maps.Equal(got, want) || !v2.Pins {
		t.Fatalf("version 2 after the raise: marks %v, want %v (pins %v)", got, want, v2.Pins)
	}
	got = map[uint64]bool{}
	for _, x := range r.Final().Routes {
		got[x.ID] = x.OperatorStart
	}
	if want := map[uint64]bool{8: false, 9: false, 4: true, 5: true, 6: true, 7: true}; !maps.Equal(got, want) {
		t.Fatalf("after the raise: marks %v, want %v", got, want)
	}
	if len(r.Notes) == 0 || !strings.Contains(r.Notes[len(r.Notes)-1], "3 routes' starts marked") {
		t.Fatalf("notes %q", r.Notes)
	}
	if errs := r.CheckCatalogs(); len(errs) > 0 {
		t.Fatal(errs)
	}
}
