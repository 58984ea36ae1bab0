package node

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/sim"
)

// lossyCluster is the simulator's view of the cluster with one Report
// response lost on purpose: once armed, the first report of the named
// reporter is delivered and counted, but its answer — which announces a
// pending step change — never reaches the reporter.
type lossyCluster struct {
	*client.Client
	armed    atomic.Bool
	dropOnce sync.Once
	victim   string
	dropped  atomic.Bool
}

func (l *lossyCluster) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	resp, err := l.Client.Report(ctx, req)
	if err == nil && l.armed.Load() && strings.HasSuffix(req.GetReporterId(), l.victim) {
		lose := false
		l.dropOnce.Do(func() { lose = true })
		if lose {
			l.dropped.Store(true)
			return nil, status.Error(codes.Unavailable, "test: the answer to this report was lost")
		}
	}
	return resp, err
}

// TestIntegrationStepChangeUnderLoad: an operator changes the step while
// three data nodes report under load. The change takes effect at a
// boundary both steps share, announced in Report responses ahead of time:
// every column commits — contiguous windows, old step then new — and no
// report is refused or late, although one reporter misses the response
// that first announced the change.
func TestIntegrationStepChangeUnderLoad(t *testing.T) {
	skipShort(t)
	const oldStep, newStep, rate = 200, 400, 2000
	// The longest grace allowed: a reporter held up a moment by a loaded
	// machine must not make its column late.
	cfg := &api.Config{StepMs: oldStep, GraceMs: oldStep, Threshold: 100 * totalPerMin(rate, 0.5)}
	c, _ := newAutoCluster(t, cfg, nil)
	var eps []string
	for _, n := range c.running() {
		eps = append(eps, n.GRPCAddr())
	}
	cl, err := client.New(client.Config{Endpoints: eps, TLS: adminTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	lossy := &lossyCluster{Client: cl, victim: "-0"}
	w, err := sim.ParseWorkload(sim.Uniform, sim.DefaultWorkloadOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(sim.Config{Cluster: lossy, Workload: w, Nodes: 3, Rate: rate, Duration: 8 * time.Second, Seed: 13,
		Identity: testAdmin, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	// Under load for a while, then the step changes.
	testutil.WaitFor(t, 20*time.Second, "columns with load", func() bool {
		return c.leaderNode().FSM().State().LastColumnAtMs() > 0 && s.Stats().OpsAcked > 2*rate/5
	})
	leader := c.leader()
	resp, err := c.autoClient(leader).SetConfig(ctx, &api.SetConfigRequest{Actor: "test",
		Patch: &api.ConfigPatch{StepMs: proto.Uint64(newStep)}})
	if err != nil {
		t.Fatalf("set config: %v", err)
	}
	lossy.armed.Store(true)
	at := resp.GetConfig().GetNextStepAtMs()
	if resp.GetConfig().GetStepMs() != oldStep || resp.GetConfig().GetNextStepMs() != newStep || at == 0 {
		t.Fatalf("config after the change: %v", resp.GetConfig())
	}
	if err := <-done; err != nil {
		t.Fatalf("sim: %v", err)
	}
	st := s.Stats()
	t.Logf("ops %d acked %d late %d refused %d; columns rejected %d dropped %d; step change at %d; a response lost: %v",
		st.Ops, st.OpsAcked, st.OpsLate, st.OpsRefused, st.Columns.ColumnsRejected, st.Columns.ColumnsDropped, at, lossy.dropped.Load())
	if !lossy.dropped.Load() {
		t.Fatal("no response was lost: the test did not exercise a reporter that misses one")
	}
	if st.OpsAcked != st.Ops || st.OpsLate != 0 || st.OpsRefused != 0 || st.Columns.ColumnsRejected != 0 || st.Columns.ColumnsDropped != 0 {
		t.Fatalf("operations lost across the step change: %+v", st)
	}
	c.waitConverged(10 * time.Second)
	// Every committed column follows the last: old step up to the
	// boundary, new step from it.
	var prevAt uint64
	var before, after int
	for _, e := range commands(t, c.leaderNode()) {
		col := e.cmd.GetObserveColumn()
		if col == nil {
			continue
		}
		if prevAt != 0 && col.WindowStartMs != prevAt {
			t.Fatalf("column [%d, %d) does not follow the previous one ending at %d", col.WindowStartMs, col.AtMs, prevAt)
		}
		prevAt = col.AtMs
		want := uint64(oldStep)
		if col.WindowStartMs >= at {
			want = newStep
			after++
		} else {
			before++
		}
		if col.StepMs != want || col.AtMs-col.WindowStartMs != want {
			t.Fatalf("column [%d, %d) has step %d, want %d (boundary %d)", col.WindowStartMs, col.AtMs, col.StepMs, want, at)
		}
	}
	if before == 0 || after < 3 {
		t.Fatalf("%d columns before the boundary and %d after: the change was not under load", before, after)
	}
	if got := c.leaderNode().FSM().State().Config(); got.GetStepMs() != newStep || got.GetNextStepAtMs() != 0 {
		t.Fatalf("config at the end: %v", got)
	}
}
