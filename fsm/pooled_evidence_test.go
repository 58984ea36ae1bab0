package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
)

// sampledRow is a hot row of route 1 whose evidence is a few sampled keys:
// not enough for a cut, so the route stays counted column after column.
func sampledRow(keys ...string) *api.ColumnRow {
	r := &api.ColumnRow{RouteId: 1, Writes: 6000, SampleRate: 16}
	for _, k := range keys {
		r.Samples = append(r.Samples, &api.WeightedKey{Key: []byte(k), Weight: 100})
	}
	return r
}

// TestPooledEvidenceReplicated: at version 3 a counted route's entry keeps
// the key evidence of its previous columns; it survives a snapshot to the
// byte and the hash, is left out of the status answer, and a version 2
// state refuses it. At version 2 no entry ever holds one.
func TestPooledEvidenceReplicated(t *testing.T) {
	cfg := hotConfig()
	cfg.CandidateWindows = 10
	h := bootstrappedAt(t, clusterversion.Version3, nil, cfg)
	for i, keys := range [][]string{{"a", "b"}, {"c"}, {"b", "d"}} {
		row := sampledRow(keys...)
		at := uint64(1000 * (i + 2))
		wantCode(t, h.run(loadsColumn(at-1000, at, []api.RouteLoad{loadOf(row)}, row)), api.ResultCode_RESULT_CODE_OK)
	}
	tr, ok := h.state().Detector().Get(1)
	if !ok || len(tr.Pool) != 3 || string(tr.Pool[0].Key) != "b" || tr.Pool[0].Age != 0 || string(tr.Pool[2].Key) != "c" || tr.Pool[2].Age != 1 {
		t.Fatalf("pool %+v", tr.Pool)
	}
	src := h.state()
	f2 := newQuiet(Options{})
	if err := restore(f2, persist(t, h.f)); err != nil {
		t.Fatal(err)
	}
	if got := f2.State(); got.Hash() != src.Hash() || !proto.Equal(got.Proto(), src.Proto()) {
		t.Fatalf("restored state differs:\n%v\n%v", got.Proto(), src.Proto())
	}
	if p := TrackedProto(tr); len(p.GetPooledEvidence()) != 0 {
		t.Errorf("status answer carries the pool: %v", p.GetPooledEvidence())
	}

	// A version 2 state holding a pool is refused, naming the field.
	p := proto.Clone(src.Proto()).(*api.StateSnapshot)
	p.ClusterVersion = clusterversion.Version2
	clearMerge(p.Config) // the other version 3 state, which version 2 refuses too
	p.Cold, p.Ops, p.HeatHistory = nil, nil, nil
	dropMergeExplanations(p)
	if _, err := stateFromProto(p, h.f.limits()); err == nil || !strings.Contains(err.Error(), "pooled_evidence") {
		t.Errorf("pool at version 2: %v, want an error naming pooled_evidence", err)
	}
	// A pool the detector would not write is refused.
	p = proto.Clone(src.Proto()).(*api.StateSnapshot)
	p.Tracked[0].PooledEvidence[0].Age = 5
	if _, err := stateFromProto(p, h.f.limits()); err == nil || !strings.Contains(err.Error(), "pool") {
		t.Errorf("a pool aged 5: %v, want an error naming the pool", err)
	}

	h2 := bootstrappedAt(t, clusterversion.Version2, nil, cfg)
	for i := range 3 {
		at := uint64(1000 * (i + 2))
		wantCode(t, h2.run(column(at-1000, at, sampledRow("a", "b"))), api.ResultCode_RESULT_CODE_OK)
	}
	if tr, ok := h2.state().Detector().Get(1); !ok || tr.Pool != nil {
		t.Fatalf("version 2 entry %v pool %+v", ok, tr.Pool)
	}
}
