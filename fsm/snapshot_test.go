package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// memSink is a raft.SnapshotSink in memory.
type memSink struct {
	bytes.Buffer
	closed, canceled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.canceled = true; return nil }
func (s *memSink) Close() error  { s.closed = true; return nil }

var _ raft.SnapshotSink = (*memSink)(nil)

// fataler is the part of testing.TB (and rapid.T) the helpers need.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

func persist(t fataler, f *FSM) []byte {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil || !sink.closed {
		t.Fatalf("persist: %v (closed %v)", err, sink.closed)
	}
	return sink.Bytes()
}

func restore(f *FSM, b []byte) error { return f.Restore(io.NopCloser(bytes.NewReader(b))) }

// richState exercises every part of the state: splits, members, a live
// op, a finished op, tracked routes, decisions, requests, ceiling, fence
// violations, a column.
func richState(t testing.TB) *harness {
	h := opState(t.(*testing.T), true, compoundOp(1), medianOp(2))
	h.run(member("n1", clusterversion.Version2))
	h.run(member("n2", clusterversion.Version2))
	h.run(admit("n3", "127.0.0.1:9"))
	c := split(2, "p")
	c.RequestId = "r1"
	h.run(c)
	h.run(step(1, 1, 1, []byte("k")))
	h.run(abort(2, "bye"))
	h.run(&api.Command{Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{CeilingMs: startMs + 5000}}})
	fenced := split(3, "b")
	fenced.Hlc = 1
	h.run(fenced)
	h.run(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{WindowStartMs: 0, AtMs: 1000, Reporters: []string{"a", "b"}}}})
	return h
}

func TestSnapshotRoundTrip(t *testing.T) {
	h := richState(t)
	src := h.state()
	b := persist(t, h.f)
	f2 := newQuiet(Options{HistorySize: 8})
	if err := restore(f2, b); err != nil {
		t.Fatal(err)
	}
	got := f2.State()
	if got.Hash() != src.Hash() || !proto.Equal(got.Proto(), src.Proto()) {
		t.Fatalf("restored state differs:\n%v\n%v", got.Proto(), src.Proto())
	}
	if got.Index() != src.Index() || got.History().Base() != src.Catalog().Version() || got.History().Len() != 0 {
		t.Fatalf("index %d/%d, history base %d len %d", got.Index(), src.Index(), got.History().Base(), got.History().Len())
	}
	if r, ok := got.RequestResult("r1"); !ok || r.CatalogVersion == 0 {
		t.Fatal("request table not restored")
	}
	// The restored FSM continues exactly like the original.
	for _, f := range []*FSM{h.f, f2} {
		b, _ := EncodeCommand(&api.Command{Hlc: h.stamp(0) + 1, Body: step(1, 2, 4, []byte("k\x00")).Body})
		f.Apply(&raft.Log{Index: src.Index() + 1, Data: b})
	}
	if h.f.State().Hash() != f2.State().Hash() {
		t.Fatal("original and restored diverge on the next entry")
	}
}

func TestSnapshotOfEmptyState(t *testing.T) {
	f := newQuiet(Options{})
	f.StoreConfiguration(3, raft.Configuration{})
	b := persist(t, f)
	f2 := newQuiet(Options{})
	if err := restore(f2, b); err != nil {
		t.Fatal(err)
	}
	if f2.State().Bootstrapped() || f2.State().Index() != 3 || f2.State().Hash() != f.State().Hash() {
		t.Fatal("empty state round trip")
	}
}

// Many routes span several pages.
func TestSnapshotPages(t *testing.T) {
	var splits [][]byte
	for i := range routePage*2 + 10 {
		splits = append(splits, fmt.Appendf(nil, "k%06d", i))
	}
	h := bootstrapped(t, splits, nil)
	b := persist(t, h.f)
	f2 := newQuiet(Options{})
	if err := restore(f2, b); err != nil {
		t.Fatal(err)
	}
	if f2.State().Hash() != h.state().Hash() || f2.State().Catalog().Len() != len(splits)+1 {
		t.Fatal("paged round trip")
	}
}

// encodeProto writes a snapshot file straight from a (possibly broken)
// StateSnapshot, bypassing the checks a State would have passed.
func encodeProto(t fataler, p *api.StateSnapshot, index uint64) []byte {
	t.Helper()
	core := proto.Clone(p).(*api.StateSnapshot)
	parts := snapshotParts{index: index, core: core, tracked: core.Tracked, requests: core.Requests, heat: core.HeatHistory}
	core.Tracked, core.Requests, core.HeatHistory = nil, nil, nil
	if core.Catalog != nil {
		routes := core.Catalog.Routes
		core.Catalog.Routes = nil
		parts.routes = len(routes)
		parts.ascend = func(fn func(*api.RouteDescriptor) bool) {
			for _, r := range routes {
				if !fn(r) {
					return
				}
			}
		}
	}
	var buf bytes.Buffer
	if err := writeParts(&buf, parts); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestRestoreRejects(t *testing.T) {
	h := richState(t)
	good := h.state().Proto()
	if err := restore(newQuiet(Options{}), encodeProto(t, good, 9)); err != nil {
		t.Fatalf("encodeProto of a good state: %v", err)
	}
	edit := func(fn func(p *api.StateSnapshot)) []byte {
		p := proto.Clone(good).(*api.StateSnapshot)
		fn(p)
		return encodeProto(t, p, 9)
	}
	valid := encodeProto(t, good, 9)
	withUnknown := func() []byte {
		// Append an unknown field to the core frame: rebuild it by hand.
		core := proto.Clone(good).(*api.StateSnapshot)
		core.Catalog.Routes, core.Tracked, core.Requests = nil, nil, nil
		cb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(core)
		cb = protowire.AppendTag(cb, 999, protowire.VarintType)
		cb = protowire.AppendVarint(cb, 1)
		b := []byte(snapshotMagic)
		for _, v := range []uint64{1, 9, 0, 0, 0} {
			b = protowire.AppendVarint(b, v)
		}
		return protowire.AppendBytes(b, cb)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"bad magic", append([]byte("NOTASNAP"), valid[8:]...)},
		{"trailing byte", append(append([]byte(nil), valid...), 0)},
		{"format version 2", append([]byte(snapshotMagic), append([]byte{2}, valid[9:]...)...)},
		{"unknown field", withUnknown()},
		{"overlapping routes", edit(func(p *api.StateSnapshot) { p.Catalog.Routes[1].Start = []byte("a") })},
		{"gap in routes", edit(func(p *api.StateSnapshot) { p.Catalog.Routes = p.Catalog.Routes[1:] })},
		{"duplicate route id", edit(func(p *api.StateSnapshot) { p.Catalog.Routes[1].RouteId = p.Catalog.Routes[0].RouteId })},
		{"cluster version above supported", edit(func(p *api.StateSnapshot) { p.ClusterVersion = clusterversion.Supported + 1 })},
		{"invalid config", edit(func(p *api.StateSnapshot) { p.Config.Buckets = 0 })},
		{"no switch", edit(func(p *api.StateSnapshot) { p.Switch = nil })},
		{"ops unsorted", edit(func(p *api.StateSnapshot) { p.Ops[0], p.Ops[1] = p.Ops[1], p.Ops[0] })},
		{"op id not below next", edit(func(p *api.StateSnapshot) { p.NextOpId = 2 })},
		{"op next_step beyond keys", edit(func(p *api.StateSnapshot) { p.Ops[0].NextStep = 4 })},
		{"op step results mismatch", edit(func(p *api.StateSnapshot) { p.Ops[0].StepResults = nil })},
		{"live op with every step applied", edit(func(p *api.StateSnapshot) {
			p.Ops[0].NextStep = 3
			p.Ops[0].StepResults = append(p.Ops[0].StepResults, &api.CommandResult{})
		})},
		{"op targets a never-route", edit(func(p *api.StateSnapshot) { p.Ops[0].TargetRouteId = 999 })},
		{"op state unknown", edit(func(p *api.StateSnapshot) { p.Ops[0].State = 42 })},
		{"tracked unsorted", edit(func(p *api.StateSnapshot) {
			p.Tracked = []*api.TrackedRoute{{RouteId: 5, Explanation: &api.Explanation{}}, {RouteId: 3, Explanation: &api.Explanation{}}}
		})},
		{"decisions unsorted", edit(func(p *api.StateSnapshot) { p.Decisions[0], p.Decisions[1] = p.Decisions[1], p.Decisions[0] })},
		{"decision seq not below next", edit(func(p *api.StateSnapshot) { p.NextDecisionSeq = 1 })},
		{"members unsorted", edit(func(p *api.StateSnapshot) { p.Members[0], p.Members[1] = p.Members[1], p.Members[0] })},
		{"admission of a member", edit(func(p *api.StateSnapshot) { p.Admissions[0].NodeId = "n1" })},
		{"admission repeated", edit(func(p *api.StateSnapshot) { p.Admissions = append(p.Admissions, p.Admissions[0]) })},
		{"admission without raft address", edit(func(p *api.StateSnapshot) { p.Admissions[0].RaftAddr = "" })},
		{"request id repeated", edit(func(p *api.StateSnapshot) {
			r := proto.Clone(p.Requests[0]).(*api.RequestRecord)
			r.Seq = p.NextRequestSeq
			p.NextRequestSeq++
			p.Requests = append(p.Requests, r)
		})},
		{"reporters unsorted", edit(func(p *api.StateSnapshot) { p.LastColumnReporters = []string{"b", "a"} })},
		{"not bootstrapped with members", edit(func(p *api.StateSnapshot) { p.Catalog = nil; p.Config = nil; p.Switch = nil; p.Tracked = nil })},
	}
	halts := len(h.halts)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := h.state()
			err := restore(h.f, tc.data)
			if !errors.Is(err, ErrSnapshot) {
				t.Fatalf("restore: %v, want ErrSnapshot", err)
			}
			t.Log(err)
			if h.state() != before {
				t.Fatal("a failed restore replaced the state")
			}
			// Only a version this build cannot apply halts; any other bad
			// snapshot lets raft try an older one.
			wantHalt := errors.Is(err, ErrVersion)
			if got := len(h.halts) > halts; got != wantHalt {
				t.Fatalf("halted=%v, want %v (err %v)", got, wantHalt, err)
			}
			halts = len(h.halts)
		})
	}
}

// Every strict prefix of a valid snapshot is refused.
func TestRestoreTruncated(t *testing.T) {
	h := richState(t)
	b := persist(t, h.f)
	f := newQuiet(Options{})
	for n := range len(b) {
		if err := restore(f, b[:n]); !errors.Is(err, ErrSnapshot) {
			t.Fatalf("prefix of %d/%d bytes: %v", n, len(b), err)
		}
	}
}

// A snapshot with more entries than the local bounds came from a replica
// configured differently: refused rather than silently trimmed.
func TestRestoreAboveLocalBounds(t *testing.T) {
	h := richState(t)
	b := persist(t, h.f)
	if err := restore(newQuiet(Options{DecisionRingSize: 1}), b); !errors.Is(err, ErrSnapshot) {
		t.Fatalf("decision ring above bound: %v", err)
	}
	if err := restore(newQuiet(Options{}), b); err != nil {
		t.Fatalf("default bounds: %v", err)
	}
}

// fillRoute must stay catalog's ToProto: same fields, and a field added to
// RouteDescriptor fails here until fillRoute copies it too.
func TestFillRouteMatchesToProto(t *testing.T) {
	with := func(r *catalog.RouteDescriptor, merge *catalog.MergeInfo, move *catalog.MoveInfo) *catalog.RouteDescriptor {
		r.SetMergedFrom(merge)
		r.SetMoving(move)
		return r
	}
	for _, r := range []*catalog.RouteDescriptor{
		{ID: 7, Start: []byte("a"), End: []byte("b"), GroupID: 3, State: catalog.StateWriteFenced, ParentID: 2, SplitAtHLC: 99},
		with(&catalog.RouteDescriptor{ID: 9, Start: []byte("a"), GroupID: 3, State: catalog.StateActive}, &catalog.MergeInfo{Left: 7, Right: 8, AtHLC: 120}, nil),
		{ID: 11, Start: []byte("a"), GroupID: 3, State: catalog.StateActive, OperatorStart: true, ParentID: 9, SplitAtHLC: 130},
		with(&catalog.RouteDescriptor{ID: 12, Start: []byte("a"), GroupID: 3, State: catalog.StateMigratingSource}, nil, &catalog.MoveInfo{TargetGroupID: 4, OpID: 17}),
	} {
		var m api.RouteDescriptor
		// A reused slot: every field is overwritten.
		fillRoute(&m, with(&catalog.RouteDescriptor{ID: 1, ParentID: 5, SplitAtHLC: 6, OperatorStart: true},
			&catalog.MergeInfo{Left: 1, Right: 2, AtHLC: 3}, &catalog.MoveInfo{TargetGroupID: 9, OpID: 9}))
		fillRoute(&m, r)
		if !proto.Equal(&m, r.ToProto()) {
			t.Fatalf("fillRoute %v, ToProto %v", &m, r.ToProto())
		}
	}
	if n := (&api.RouteDescriptor{}).ProtoReflect().Descriptor().Fields().Len(); n != 13 {
		t.Fatalf("RouteDescriptor has %d fields; update fillRoute and this test", n)
	}
}

// Route pages skip the reflective unknown-field walk; they must still
// refuse an unknown field inside a route.
func TestRestoreUnknownFieldInRoute(t *testing.T) {
	h := bootstrapped(t, [][]byte{[]byte("m")}, nil)
	b := persist(t, h.f)
	// Rebuild the file with an unknown field appended to the first route.
	core := h.state().coreProto()
	coreBytes, _ := proto.MarshalOptions{Deterministic: true}.Marshal(core)
	routes := h.state().Catalog().ToProto().Routes
	var page []byte
	for i, r := range routes {
		rb, _ := proto.Marshal(r)
		if i == 0 {
			rb = protowire.AppendTag(rb, 50, protowire.VarintType)
			rb = protowire.AppendVarint(rb, 1)
		}
		page = protowire.AppendTag(page, 3, protowire.BytesType)
		page = protowire.AppendBytes(page, rb)
	}
	bad := []byte(snapshotMagic)
	for _, v := range []uint64{1, h.state().Index(), uint64(len(routes)), 0, 0} {
		bad = protowire.AppendVarint(bad, v)
	}
	bad = protowire.AppendBytes(protowire.AppendBytes(bad, coreBytes), page)
	if err := restore(newQuiet(Options{}), bad); !errors.Is(err, ErrSnapshot) || !bytes.Contains([]byte(err.Error()), []byte("route 0: unknown")) {
		t.Fatalf("unknown field in a route: %v", err)
	}
	// The same construction without the extra field restores.
	if err := restore(newQuiet(Options{}), b); err != nil {
		t.Fatal(err)
	}
}

// The snapshot goes through raft's FileSnapshotStore (which adds its CRC
// and finalizes on Close) and back.
func TestFileSnapshotStoreRoundTrip(t *testing.T) {
	h := richState(t)
	store, err := raft.NewFileSnapshotStore(t.TempDir(), 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := store.Create(raft.SnapshotVersionMax, h.state().Index(), 1, raft.Configuration{}, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, _ := h.f.Snapshot()
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	metas, err := store.List()
	if err != nil || len(metas) != 1 {
		t.Fatalf("list: %v %v", metas, err)
	}
	_, rc, err := store.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	f := newQuiet(Options{})
	if err := f.Restore(rc); err != nil {
		t.Fatal(err)
	}
	if f.State().Hash() != h.state().Hash() {
		t.Fatal("hash differs after FileSnapshotStore round trip")
	}
}

// WriteSnapshot of a state's own Proto() restores to the same hash, and of
// a state whose catalog breaks an invariant is refused by Restore.
func TestWriteSnapshotRoundTripAndRefusal(t *testing.T) {
	h := bootstrapped(t, [][]byte{[]byte("m")}, nil)
	st := h.f.State()
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, st.Index(), st.Proto()); err != nil {
		t.Fatal(err)
	}
	g := newQuiet(Options{})
	if err := g.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	if g.State().Hash() != st.Hash() || g.State().Index() != st.Index() {
		t.Fatalf("round trip through WriteSnapshot changed the state")
	}
	broken := st.Proto()
	broken.Catalog.Routes[0].End = []byte("zz") // the catalog no longer reaches +inf
	buf.Reset()
	if err := WriteSnapshot(&buf, st.Index()+1, broken); err != nil {
		t.Fatal(err)
	}
	before := g.State().Hash()
	err := g.Restore(io.NopCloser(&buf))
	if err == nil || !strings.Contains(err.Error(), "invariant") {
		t.Fatalf("restore of a broken catalog: err = %v", err)
	}
	if g.State().Hash() != before {
		t.Fatalf("a refused restore changed the state")
	}
}
