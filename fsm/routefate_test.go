package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// One sentence for a route that is gone, from whatever this node still
// holds: the delta that removed it, else its live children, else the
// decision that split it; never created ids say so; live routes have none.
func TestRouteFate(t *testing.T) {
	h := bootstrapped(t, nil, nil)
	wantCode(t, h.run(split(1, "m")), api.ResultCode_RESULT_CODE_OK) // r1 -> r2, r3
	wantCode(t, h.run(split(3, "t")), api.ResultCode_RESULT_CODE_OK) // r3 -> r4, r5
	r2, _ := h.state().Catalog().Route(2)
	when := HLCTime(r2.SplitAtHLC)
	for _, tc := range []struct {
		id   uint64
		want string
	}{
		{1, "r1 was split into r2, r3 at " + when + " (catalog version 2)"},
		{3, "r3 was split into r4, r5 at "},
		{9, "r9 was never created (the next route id is 6)"},
	} {
		got, ok := h.state().RouteFate(tc.id)
		if !ok || !strings.HasPrefix(got, tc.want) {
			t.Errorf("fate of r%d: %q, want %q", tc.id, got, tc.want)
		}
	}
	if got, ok := h.state().RouteFate(2); ok {
		t.Errorf("a live route has a fate: %q", got)
	}

	// A node restored from a snapshot has no history: r3's children are
	// both live; of r1's only r2 is; once r2 splits too, the decision
	// that split r1 says what is known.
	r := newHarness(t, Options{})
	r.install(proto.Clone(h.state().Proto()).(*api.StateSnapshot))
	r.index, r.ms = h.index, h.ms
	r4, _ := r.state().Catalog().Route(4)
	for id, want := range map[uint64]string{
		3: "r3 was split into r4, r5 at " + HLCTime(r4.SplitAtHLC),
		1: "r1 was split at " + when + " (r2 is one of its two children)",
	} {
		if got, _ := r.state().RouteFate(id); got != want {
			t.Errorf("fate of r%d from its live children: %q, want %q", id, got, want)
		}
	}
	wantCode(t, r.run(split(2, "g")), api.ResultCode_RESULT_CODE_OK) // r2 -> r6, r7
	q := newHarness(t, Options{})
	q.install(proto.Clone(r.state().Proto()).(*api.StateSnapshot))
	if got, _ := q.state().RouteFate(1); got != `r1 was split at "m" at `+when+" (its children are gone too)" {
		t.Errorf("fate of r1 from the decision ring: %q", got)
	}
}

// A merged route's fate names its partner and the route the merge made,
// from the history and, without it, from the merged route's lineage.
func TestRouteFateOfAMerge(t *testing.T) {
	h := bootstrappedAt(t, clusterversion.Version3, nil, nil)
	wantCode(t, h.run(split(1, "m")), api.ResultCode_RESULT_CODE_OK) // r1 -> r2 ["", m), r3 [m, +inf)
	wantCode(t, h.run(split(3, "t")), api.ResultCode_RESULT_CODE_OK) // r3 -> r4 [m, t), r5 [t, +inf)
	wantCode(t, h.run(merge(2, 4)), api.ResultCode_RESULT_CODE_OK)   // r2 + r4 -> r6
	r6, ok := h.state().Catalog().Route(6)
	if !ok || !r6.Merged() {
		t.Fatal("the merge made no r6")
	}
	when := HLCTime(r6.MergedFrom().AtHLC)
	if got, _ := h.state().RouteFate(4); got != "r4 was merged with r2 into r6 at "+when+" (catalog version 4)" {
		t.Errorf("fate of r4 from the history: %q", got)
	}
	r := newHarness(t, Options{})
	r.install(proto.Clone(h.state().Proto()).(*api.StateSnapshot))
	if got, _ := r.state().RouteFate(2); got != "r2 was merged with r4 into r6 at "+when {
		t.Errorf("fate of r2 from the merged route's lineage: %q", got)
	}
}
