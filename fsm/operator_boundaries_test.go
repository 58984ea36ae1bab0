package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// pinsOf renders the catalog as "start:mark" in key order ("" for the
// first route, * for an operator's start).
func pinsOf(c *catalog.Catalog) string {
	var out []string
	c.Ascend(func(r *catalog.RouteDescriptor) bool {
		s := string(r.Start)
		if r.OperatorStart {
			s += "*"
		}
		out = append(out, s)
		return true
	})
	return strings.Join(out, " ")
}

// mergeKinds counts the decisions of automatic merges, planned or not.
func mergeKinds(s *State) int {
	n := 0
	for _, d := range s.Decisions() {
		switch d.GetKind() {
		case api.DecisionKind_DECISION_KIND_MERGE_PLANNED, api.DecisionKind_DECISION_KIND_MERGE_DECLINED,
			api.DecisionKind_DECISION_KIND_MERGE_SUPPRESSED, api.DecisionKind_DECISION_KIND_MERGE_APPLIED:
			n++
		}
	}
	return n
}

// idleNoPlans commits n idle columns and fails if any plans an op.
func (m *mergeCluster) idleNoPlans(n int, what string) {
	m.t.Helper()
	for i := range n {
		if r := m.column(); len(r.PlannedOpIds) != 0 {
			m.t.Fatalf("%s: column %d planned %v (catalog %s)", what, i+1, r.PlannedOpIds, pinsOf(m.state().Catalog()))
		}
	}
}

// The rule end to end in the state machine: a version 3 bootstrap's
// split keys and a manual split's key are never merged automatically,
// however long their routes stay cold; an automatic split's boundary is,
// and the merged route keeps the mark of the start it kept.
func TestOperatorBoundariesKeptFromAutomaticMerges(t *testing.T) {
	cfg := mergeTestConfig() // merges after 3 cold columns, no delay
	m := &mergeCluster{harness: bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("m")}, cfg)}
	if got := pinsOf(m.state().Catalog()); got != " m*" {
		t.Fatalf("bootstrap marks %q", got)
	}
	windows := int(m.state().Config().GetMergeWindows())
	m.idleNoPlans(4*windows, "a bootstrap split key")
	if n := mergeKinds(m.state()); n != 0 {
		t.Fatalf("%d merge decisions for a pair that is no candidate", n)
	}

	wantCode(t, m.run(split(2, "t")), api.ResultCode_RESULT_CODE_OK) // r3 [m, t), r4 [t, +inf)
	if got := pinsOf(m.state().Catalog()); got != " m* t*" {
		t.Fatalf("after a manual split: marks %q", got)
	}
	m.idleNoPlans(4*windows, "a manual split's key")

	// r4, past the split cooldown (the columns skip it too: a gap), hot
	// at its lower edge: an automatic isolation [t, t·0x00).
	m.ms += m.state().Config().GetCooldownMs()
	m.at += m.state().Config().GetCooldownMs()
	hot := api.RouteLoad{RouteID: 4, Writes: 6000}
	planned := false
	for range 4 {
		if r := m.column(hot); len(r.PlannedOpIds) == 1 {
			planned = true
			break
		}
	}
	if !planned {
		t.Fatal("the hot route was never planned")
	}
	wantCode(t, m.run(m.nextStep()), api.ResultCode_RESULT_CODE_OK)
	if got := pinsOf(m.state().Catalog()); got != " m* t* t\x00" {
		t.Fatalf("after the automatic split: marks %q", got)
	}

	// Cold again: the automatic boundary goes, the operator's stay.
	var mergeOp uint64
	for i := 0; i < windows+2 && mergeOp == 0; i++ {
		if r := m.column(); len(r.PlannedOpIds) == 1 {
			mergeOp = r.PlannedOpIds[0]
		}
	}
	op, ok := m.state().Op(mergeOp)
	if !ok || !isMergeOp(op) || op.GetTargetRouteId() != 5 || op.GetRightRouteId() != 6 {
		t.Fatalf("merge op %d: %v", mergeOp, op)
	}
	wantCode(t, m.run(m.nextStep()), api.ResultCode_RESULT_CODE_OK)
	merged := m.state().Catalog().Lookup([]byte("t"))
	if !merged.Merged() || !merged.OperatorStart || !merged.Unbounded() {
		t.Fatalf("merged route %v, marked %v", merged, merged.OperatorStart)
	}
	m.idleNoPlans(4*windows, "after the merge")
	if got := pinsOf(m.state().Catalog()); got != " m* t*" {
		t.Fatalf("at the end: marks %q", got)
	}
}

// Below version 3 nothing is marked: a version 2 state stays the version
// 2 release's (the golden hashes pin it).
func TestVersion2RecordsNoPlacement(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version2, [][]byte{[]byte("f"), []byte("m")}, nil)
	wantCode(t, h.run(split(2, "h")), api.ResultCode_RESULT_CODE_OK)
	if got := pinsOf(h.state().Catalog()); got != " f h m" {
		t.Fatalf("version 2 marks %q", got)
	}
	// The catalog part of a version 2 snapshot has no field 11.
	for _, r := range h.state().Proto().GetCatalog().GetRoutes() {
		if r.GetOperatorStart() {
			t.Fatalf("route %d marked at version 2", r.GetRouteId())
		}
	}
}

// The raise to version 3 marks every boundary: a version 2 catalog keeps no
// record of who placed a boundary, and a merge the operator did not ask for
// must not undo their layout (their version 2 split at h included). The
// decision of the raise says how many it marked.
func TestRaiseMarksEveryBoundary(t *testing.T) {
	for _, from := range []uint32{clusterversion.Version1, clusterversion.Version2} {
		h := bootstrappedAt(t, from, [][]byte{[]byte("f"), []byte("m"), []byte("t")}, nil)
		wantCode(t, h.run(split(2, "h")), api.ResultCode_RESULT_CODE_OK) // r5 [f, h), r6 [h, m)
		version := h.state().Catalog().Version()
		before := len(h.state().Decisions())
		wantCode(t, h.run(&api.Command{Body: &api.Command_SetMember{SetMember: &api.SetMember{Member: &api.Member{NodeId: "n1", SupportedVersion: clusterversion.Version3}}}}),
			api.ResultCode_RESULT_CODE_OK)
		s := h.state()
		if got := pinsOf(s.Catalog()); got != " f* h* m* t*" {
			t.Errorf("from %d: marks %q", from, got)
		}
		if s.Catalog().Version() != version {
			t.Errorf("from %d: the raise moved the catalog version %d -> %d", from, version, s.Catalog().Version())
		}
		var details []string
		for _, d := range s.Decisions()[before:] {
			details = append(details, d.GetDetail())
		}
		if got := strings.Join(details, "; "); !strings.Contains(got, "cluster version 3: ") || !strings.Contains(got, " operator_starts=4") {
			t.Errorf("from %d: decisions %q", from, got)
		}
		// A manual split now marks its key.
		wantCode(t, h.run(split(6, "k")), api.ResultCode_RESULT_CODE_OK)
		if got := pinsOf(h.state().Catalog()); got != " f* h* k* m* t*" {
			t.Errorf("from %d: after a version 3 split: marks %q", from, got)
		}
	}
}

// The marks travel in snapshots; restore refuses one below version 3 and
// one on the first route, naming the field.
func TestOperatorStartSnapshotRoundTrip(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, [][]byte{[]byte("f"), []byte("m")}, nil)
	wantCode(t, h.run(splitCAS(2, "h", 1)), api.ResultCode_RESULT_CODE_OK)
	want := pinsOf(h.state().Catalog())
	if want != " f* h* m*" {
		t.Fatalf("marks %q", want)
	}
	b := persist(t, h.f)
	h2 := newHarness(t, Options{})
	if err := restore(h2.f, b); err != nil {
		t.Fatal(err)
	}
	if got := pinsOf(h2.state().Catalog()); got != want || h2.state().Hash() != h.state().Hash() {
		t.Fatalf("restored marks %q (want %q), hash equal %v", got, want, h2.state().Hash() == h.state().Hash())
	}

	good := h.state().Proto()
	for name, tc := range map[string]struct {
		edit func(p *api.StateSnapshot)
		msg  string
	}{
		"a mark at version 2": {func(p *api.StateSnapshot) {
			p.ClusterVersion = clusterversion.Version2
			clearMerge(p.Config)
			p.HeatHistory = nil
		}, "operator_start"},
		"the first route marked": {func(p *api.StateSnapshot) { p.Catalog.Routes[0].OperatorStart = true }, "first route"},
	} {
		p := proto.Clone(good).(*api.StateSnapshot)
		tc.edit(p)
		if _, err := stateFromProto(p, h.f.limits()); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want an error naming %q", name, err, tc.msg)
		}
	}
	// Unmarked, the version 2 state restores.
	p := proto.Clone(good).(*api.StateSnapshot)
	p.ClusterVersion = clusterversion.Version2
	clearMerge(p.Config)
	p.HeatHistory = nil
	unmarkStarts(p)
	if _, err := stateFromProto(p, h.f.limits()); err != nil {
		t.Fatalf("unmarked at version 2: %v", err)
	}
}
