package transport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/columns"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/scheduler"
)

func decisions(seqs ...uint64) []*api.Decision {
	out := make([]*api.Decision, len(seqs))
	for i, s := range seqs {
		out[i] = &api.Decision{Seq: s}
	}
	return out
}

func seqsOf(ds []*api.Decision) []uint64 {
	out := make([]uint64, len(ds))
	for i, d := range ds {
		out[i] = d.GetSeq()
	}
	return out
}

// Status pages through the whole decision ring, newest page first.
func TestDecisionPage(t *testing.T) {
	ring := decisions(3, 4, 5, 6, 7, 8, 9)
	cases := []struct {
		before   uint64
		limit    int
		want     []uint64
		nextPage uint64
	}{
		{0, 3, []uint64{7, 8, 9}, 7},
		{7, 3, []uint64{4, 5, 6}, 4},
		{4, 3, []uint64{3}, 0},
		{0, 20, []uint64{3, 4, 5, 6, 7, 8, 9}, 0},
		{3, 3, []uint64{}, 0},
		{100, 2, []uint64{8, 9}, 8},
	}
	for _, tc := range cases {
		got, next := decisionPage(ring, tc.before, tc.limit)
		if !slices.Equal(seqsOf(got), tc.want) || next != tc.nextPage {
			t.Errorf("decisionPage(before %d, limit %d) = %v next %d, want %v next %d", tc.before, tc.limit, seqsOf(got), next, tc.want, tc.nextPage)
		}
	}
}

func TestFinishedOps(t *testing.T) {
	ops := []*api.Op{
		{OpId: 1, State: api.OpState_OP_STATE_DONE}, {OpId: 2, State: api.OpState_OP_STATE_RUNNING},
		{OpId: 3, State: api.OpState_OP_STATE_ABORTED}, {OpId: 4, State: api.OpState_OP_STATE_DONE},
	}
	got := finishedOps(ops, 2)
	if len(got) != 2 || got[0].GetOpId() != 4 || got[1].GetOpId() != 3 {
		t.Fatalf("finishedOps = %v, want ops 4 and 3, newest first", got)
	}
}

type refusalSink struct{ refs []columns.Refusal }

func (r refusalSink) Take(context.Context, []byte) (func(context.Context) (*api.ReportResponse, error), error) {
	return nil, nil
}
func (r refusalSink) RecentRefusals() []columns.Refusal { return r.refs }

// Refused reports show up as status warnings with their reason.
func TestWarningsListRefusedReports(t *testing.T) {
	s := &Server{cfg: Config{Loads: refusalSink{[]columns.Refusal{{Reason: "step", Count: 1200, FirstMs: 1_700_000_000_000,
		LastMs: 1_700_000_060_000, Reporter: "dn3", Detail: "columns[0].step_ms: 60000 differs from the replicated step of 5000 for window 1700000055000"}}}}}
	w := s.warnings(fsm.New(fsm.Options{}).State())
	if len(w) != 1 || !strings.Contains(w[0], "load reports refused (reason step): 1200 since") ||
		!strings.Contains(w[0], "last from dn3") || !strings.Contains(w[0], "columns[0].step_ms") {
		t.Fatalf("warnings %q", w)
	}
}

// Status lists one entry per pair the detector explained for a merge in
// the last column, its left route, coldest first.
func TestMergeCandidates(t *testing.T) {
	cfg := &api.Config{StepMs: 1000, MergeWindows: proto.Uint32(4), MergeDelayMs: proto.Uint64(0)}
	boot := bootstrapCmd(4, cfg)
	boot.GetBootstrap().ClusterVersion = clusterversion.Version3
	// The bootstrap's routes stand for automatic splits' pieces: an
	// operator's split keys are never merge candidates.
	f := appliedFSM(t, boot)
	p := f.State().Proto()
	for _, r := range p.GetCatalog().GetRoutes() {
		r.OperatorStart = false
	}
	var snap bytes.Buffer
	if err := fsm.WriteSnapshot(&snap, 1, p); err != nil {
		t.Fatal(err)
	}
	if err := f.Restore(io.NopCloser(&snap)); err != nil {
		t.Fatal(err)
	}
	var cmds []*api.Command
	for i := range uint64(4) {
		// Route 2 carries a little load; the others none.
		cmds = append(cmds, &api.Command{Body: &api.Command_ObserveColumn{ObserveColumn: &api.ObserveColumn{
			WindowStartMs: 1000 * (i + 1), AtMs: 1000 * (i + 2), StepMs: 1000, Reporters: []string{"dn1"},
			RouteLoads: api.NewRouteLoads([]api.RouteLoad{{RouteID: 2, Writes: 10}})}}})
	}
	applyFrom(t, f, 1, cmds...)
	st := f.State()
	got := mergeCandidates(st, st.Detector().Tracked())
	var desc []string
	for _, c := range got {
		desc = append(desc, fmt.Sprintf("r%d+r%d %s", c.RouteID, c.Merge.MergePartner, c.Merge.Reason))
	}
	if want := "r3+r4 merge_planned, r1+r2 merge_budget"; strings.Join(desc, ", ") != want {
		t.Fatalf("merge candidates %q, want %q", strings.Join(desc, ", "), want)
	}
}

// Explain carries the detector's fixed numbers, which the CLI prints
// beside an explanation instead of copies of its own.
func TestExplainCarriesTheDetectorNumbers(t *testing.T) {
	f := appliedFSM(t, bootstrapCmd(2, nil))
	sched := scheduler.New(scheduler.Config{Logger: slog.New(slog.DiscardHandler)}, nil, f, hlc.New(nil), nil)
	s := New(Config{NodeID: "n1", FSM: f, Sched: sched, Logger: slog.New(slog.DiscardHandler)})
	resp, err := (&autoSplitServer{s: s}).Explain(context.Background(), &api.ExplainRequest{RouteId: 1, Consistency: api.Consistency_CONSISTENCY_STALE})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetRoute().GetRouteId() != 1 {
		t.Fatalf("explained route %v, want r1", resp.GetRoute())
	}
	if got, want := resp.GetMinSideShareBp(), uint32(detector.MinSideShareBP); got != want {
		t.Errorf("min_side_share_bp %d, want detector.MinSideShareBP %d", got, want)
	}
	if got, want := resp.GetConfidenceZMilli(), uint32(detector.ConfidenceZMilli); got != want {
		t.Errorf("confidence_z_milli %d, want detector.ConfidenceZMilli %d", got, want)
	}
}
