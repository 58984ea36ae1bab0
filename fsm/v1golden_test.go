package fsm

import (
	"encoding/hex"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// v1GoldenHash is the state hash the version 1 release
// (testdata/upgrade/baseline, commit 07c094c) computes for v1Scenario: this
// file, copied into that commit's fsm package, prints it with
// `go test -run TestVersion1RulesGolden -v`. A build whose version 1 rules
// drift from the release fails here, before a mixed-version cluster's
// replicas disagree.
const v1GoldenHash = "e0fb95c55d335193f7e551e402a02df88a19e1d73cacbd9e4055beab81b2c549"

// v1Scenario drives an FSM at cluster version 1 through everything that
// version 2 changes: a zero weight at bootstrap, isolation, a median
// split, a column in the 80% band and a cold one after hot ones, an absent
// route, an operator abort before step 1 followed by hot columns, a config
// change of the threshold and a zero weight, and a step change. It uses
// only what the version 1 release has.
func v1Scenario(t testing.TB) *FSM {
	f := New(Options{Logger: slog.New(slog.DiscardHandler), Halt: func(err error) { t.Fatalf("halt: %v", err) }})
	var index uint64
	ms := uint64(1_700_000_000_000)
	run := func(c *api.Command) *api.CommandResult {
		t.Helper()
		ms++
		c.Hlc = hlc.Make(ms, 0)
		b, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		index++
		res := f.Apply(&raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: b})
		return res.(*Result).CommandResult
	}
	col := func(start uint64, rows ...*api.ColumnRow) *api.CommandResult {
		return run(&api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
			WindowStartMs: start, AtMs: start + 1000, StepMs: 1000, Rows: rows, Reporters: []string{"n1"}}}})
	}
	keyRow := func(id uint64, key string, writes uint64) *api.ColumnRow {
		return &api.ColumnRow{RouteId: id, Writes: writes, TopKeys: []*api.KeyEstimate{{Key: []byte(key), Lower: 4 * writes * 95 / 100, Upper: 4 * writes}}}
	}
	bucketRow := func(id, writes uint64) *api.ColumnRow {
		b := make([]uint64, 16)
		b[3], b[9] = 2*writes, 2*writes
		return &api.ColumnRow{RouteId: id, Writes: writes, Buckets: b}
	}
	step := func(op uint64, n uint32) *api.CommandResult {
		o, _ := f.State().Op(op)
		return run(&api.Command{Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{
			RouteId: o.GetTargetRouteId(), SplitKey: o.GetSplitKeys()[n-1], OpId: op, Step: n}}})
	}
	// JSON so that the file compiles against the release too, where the
	// weights have no presence.
	cfg := &api.Config{}
	if err := protojson.Unmarshal([]byte(`{"threshold":"100000","candidateWindows":2,"stepMs":"1000","cooldownMs":"5000","readWeight":0}`), cfg); err != nil {
		t.Fatal(err)
	}
	run(&api.Command{Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "golden", ClusterVersion: 1,
		InitialSplits: [][]byte{[]byte("m")}, AutoSplit: true, Config: cfg}}})
	// Route 1 ["", m): a hot key, isolated in two steps.
	col(1000, keyRow(1, "g42", 6000))
	col(2000, keyRow(1, "g42", 6000))
	step(1, 1)
	step(1, 2)
	// Route 2 [m, +inf): spread load, a median split; one band column
	// (80%) and a cold one between hot ones.
	col(3000, bucketRow(2, 6000))
	col(4000, bucketRow(2, 350)) // 84000/min: in a version 2 hold band
	col(5000, bucketRow(2, 6000), &api.ColumnRow{RouteId: 4, Writes: 100})
	col(6000, bucketRow(2, 6000))
	for _, id := range f.State().Ops() {
		if id.GetState() == api.OpState_OP_STATE_PENDING {
			// Abort before step 1, then the route stays hot.
			run(&api.Command{Body: &api.Command_AbortOp{AbortOp: &api.AbortOp{OpId: id.GetOpId(), Actor: "golden", Reason: "test"}}})
		}
	}
	col(7000, bucketRow(2, 6000))
	col(8000, bucketRow(2, 6000))
	for _, o := range f.State().Ops() {
		if o.GetState() == api.OpState_OP_STATE_PENDING {
			step(o.GetOpId(), 1)
		}
	}
	col(9000, bucketRow(2, 100)) // 24000/min: cold
	col(10000)
	run(&api.Command{Body: &api.Command_SetConfig{SetConfig: &api.SetConfig{Actor: "golden", Patch: &api.ConfigPatch{
		Threshold: proto.Uint64(90_000), WriteWeight: proto.Uint32(0), StepMs: proto.Uint64(2000)}}}})
	col(11000, bucketRow(2, 6000))
	return f
}

// TestVersion1RulesGolden: at cluster version 1 this build computes what
// the version 1 release computes, to the byte.
func TestVersion1RulesGolden(t *testing.T) {
	f := v1Scenario(t)
	h := f.State().Hash()
	got := hex.EncodeToString(h[:])
	t.Logf("version 1 scenario state hash %s (%d ops, %d decisions, catalog version %d)", got,
		len(f.State().Ops()), len(f.State().Decisions()), f.State().Catalog().Version())
	if got != v1GoldenHash {
		t.Fatalf("state hash %s, the version 1 release computes %s", got, v1GoldenHash)
	}
}
