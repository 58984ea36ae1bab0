package node

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// Load pipeline tests at node level: reporters with known
// contributions drive Load.Report through the cluster, so every committed
// column can be checked against exactly the reporters it lists.

const loadStepMs = 500

// contribution is what reporter r puts into the column starting at w:
// distinct per (reporter, column) so a double count or a loss shows.
func contribution(r int, w uint64) uint64 { return uint64(r)*1000 + (w/loadStepMs)%997 + 1 }

func reportColumn(r int, w uint64) *api.ReportColumn {
	n := contribution(r, w)
	buckets := make([]uint64, 16) // the whole-key-space route has 16 buckets
	buckets[0] = 4 * n
	return &api.ReportColumn{WindowStartMs: w, StepMs: loadStepMs, Buckets: 16, WriteWeight: 4, ReadWeight: 1,
		Rows: []*api.ReportRow{{RouteId: 1, Writes: n, Buckets: buckets, SampleRate: 1}}}
}

// testReporter keeps unacknowledged columns and resends them, as keyviz's
// reporter does, recording what was acknowledged as counted or as late.
type testReporter struct {
	id      int
	mu      sync.Mutex
	pending map[uint64]*api.ReportColumn
	counted map[uint64]bool
	late    map[uint64]bool
}

func newTestReporter(id int) *testReporter {
	return &testReporter{id: id, pending: map[uint64]*api.ReportColumn{}, counted: map[uint64]bool{}, late: map[uint64]bool{}}
}

func (r *testReporter) name() string { return fmt.Sprintf("%s/rep-%d", testAdmin, r.id) }

// send reports every pending column through cl; errors keep them pending.
func (r *testReporter) send(ctx context.Context, cl *client.Client) error {
	r.mu.Lock()
	req := &api.ReportRequest{ReporterId: r.name()}
	for _, col := range r.pending {
		req.Columns = append(req.Columns, col)
	}
	r.mu.Unlock()
	if len(req.Columns) == 0 {
		return nil
	}
	resp, err := cl.Report(ctx, req)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	late := map[uint64]bool{}
	for _, w := range resp.LateWindowStarts {
		late[w] = true
	}
	for _, w := range resp.AckedWindowStarts {
		delete(r.pending, w)
		if late[w] {
			r.late[w] = true
		} else {
			r.counted[w] = true
		}
	}
	return nil
}

func (r *testReporter) add(w uint64) {
	r.mu.Lock()
	r.pending[w] = reportColumn(r.id, w)
	r.mu.Unlock()
}

func (r *testReporter) idle() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending) == 0
}

// committedColumns reads a node's log: for every ObserveColumn, its
// reporters and its total writes.
func committedColumns(t testing.TB, n *Node) map[uint64]*api.ObserveColumn {
	t.Helper()
	out := map[uint64]*api.ObserveColumn{}
	for _, e := range commands(t, n) {
		if col := e.cmd.GetObserveColumn(); col != nil {
			if _, dup := out[col.WindowStartMs]; dup {
				t.Fatalf("window %d committed twice", col.WindowStartMs)
			}
			out[col.WindowStartMs] = col
		}
	}
	return out
}

func clientFor(t testing.TB, addrs ...string) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Endpoints: addrs, RequestTimeout: 5 * time.Second, TLS: adminTLS(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func loadCluster(t *testing.T) *testCluster {
	c := newTestCluster(t, 3, func(n *Config) {
		n.BootstrapConfig = &api.Config{StepMs: loadStepMs, GraceMs: 400, Threshold: 1 << 40}
	})
	return c
}

// waitWindowEnd blocks until wall time passes the end of window w plus d.
func waitWindowEnd(w uint64, d time.Duration) {
	if wait := time.Until(time.UnixMilli(int64(w + loadStepMs)).Add(d)); wait > 0 {
		time.Sleep(wait)
	}
}

func TestIntegrationLoadExactlyOnceAcrossLeaderKill(t *testing.T) {
	skipShort(t)
	c := loadCluster(t)
	reps := []*testReporter{newTestReporter(1), newTestReporter(2), newTestReporter(3)}
	addrs := map[string]string{}
	for _, n := range c.running() {
		addrs[n.ID()] = n.GRPCAddr()
	}
	first := uint64(time.Now().UnixMilli())/loadStepMs*loadStepMs + loadStepMs
	const columns, killAt = 10, 4
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// rep-1 reports as each window closes; rep-2 150 ms later; rep-3 200 ms
	// later and through every node in turn (the same column three times).
	delays := []time.Duration{0, 150 * time.Millisecond, 200 * time.Millisecond}
	firstSent := make(chan struct{}, columns)
	for i, r := range reps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range columns {
				w := first + uint64(k)*loadStepMs
				waitWindowEnd(w, delays[i])
				r.add(w)
				var targets []string
				if r.id == 3 {
					targets = []string{addrs["n1"], addrs["n2"], addrs["n3"]}
				} else {
					targets = []string{addrs[fmt.Sprintf("n%d", k%3+1)], addrs["n1"], addrs["n2"], addrs["n3"]}
				}
				if r.id == 1 {
					firstSent <- struct{}{}
				}
				var sends sync.WaitGroup
				for j, a := range targets {
					if r.id != 3 && j > 0 {
						break
					}
					sends.Add(1)
					go func() {
						defer sends.Done()
						r.send(ctx, clientFor(t, a, addrs["n1"], addrs["n2"], addrs["n3"]))
					}()
				}
				sends.Wait()
			}
			// Resend what is still unacknowledged until it is.
			for !r.idle() && ctx.Err() == nil {
				r.send(ctx, clientFor(t, addrs["n1"], addrs["n2"], addrs["n3"]))
			}
		}()
	}
	// Kill the leader while it holds rep-1's report of column killAt and
	// waits for the others: between receipt and commit.
	for k := 0; k <= killAt; k++ {
		<-firstSent
	}
	leader := c.leader()
	testutil.WaitFor(t, 2*time.Second, "the leader to hold an open column", func() bool {
		return metricValue(t, c.node(leader), "hotsplit_columns_open") > 0
	})
	killedWindow := first + killAt*loadStepMs
	c.kill(leader)
	t.Logf("killed leader %s holding column %d", leader, killedWindow)
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("reporters did not get every column acknowledged in time")
	}
	c.waitLeaderReady(5 * time.Second)
	c.waitConverged(10 * time.Second)

	cols := committedColumns(t, c.leaderNode())
	countedTotal, committedTotal := uint64(0), uint64(0)
	for k := range columns {
		w := first + uint64(k)*loadStepMs
		col, ok := cols[w]
		var want uint64
		listed := map[string]bool{}
		if ok {
			for _, id := range col.Reporters {
				listed[id] = true
				var n int
				fmt.Sscanf(id, testAdmin+"/rep-%d", &n)
				want += contribution(n, w)
			}
			var got uint64
			for _, g := range col.GroupTotals {
				got += g.Writes
			}
			// Exactly once: the column holds each listed reporter's load once.
			if got != want {
				t.Fatalf("window %d: %d writes committed, listed reporters %v contributed %d", w, got, col.Reporters, want)
			}
			committedTotal += got
		}
		for _, r := range reps {
			if r.counted[w] {
				countedTotal += contribution(r.id, w)
				// Acknowledged as counted => in that window's entry.
				if !listed[r.name()] {
					t.Fatalf("%s got window %d acknowledged as counted, but the entry lists %v", r.name(), w, col.GetReporters())
				}
			}
		}
	}
	lates := 0
	for _, r := range reps {
		lates += len(r.late)
	}
	t.Logf("%d windows committed; %d writes acknowledged as counted, %d committed, %d acknowledgements late", len(cols), countedTotal, committedTotal, lates)
	if countedTotal == 0 || countedTotal > committedTotal {
		t.Fatalf("acknowledged %d, committed %d", countedTotal, committedTotal)
	}
}

// metricValue sums the samples of a gauge or counter in n's registry.
func metricValue(t *testing.T, n *Node, name string) float64 {
	t.Helper()
	mfs, err := n.cfg.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			v += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return v
}

func TestIntegrationLoadReporterFromTheFutureIsRejected(t *testing.T) {
	skipShort(t)
	c := loadCluster(t)
	ctx := ctxT(t, 30*time.Second)
	cl := clientFor(t, c.node("n1").GRPCAddr(), c.node("n2").GRPCAddr())
	ahead := newTestReporter(9)
	day := uint64(24 * time.Hour / time.Millisecond)
	w := uint64(time.Now().UnixMilli())/loadStepMs*loadStepMs + day
	ahead.add(w)
	err := ahead.send(ctx, cl)
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a column a day ahead: err = %v, want InvalidArgument", err)
	}
	// The others' columns commit regardless.
	normal := newTestReporter(1)
	now := uint64(time.Now().UnixMilli()) / loadStepMs * loadStepMs
	waitWindowEnd(now, 0)
	normal.add(now)
	if err := normal.send(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if !normal.counted[now] {
		t.Fatalf("the on-time reporter's column was not acknowledged as counted: late=%v", normal.late)
	}
	cols := committedColumns(t, c.leaderNode())
	if col := cols[now]; col == nil || len(col.Reporters) != 1 || col.Reporters[0] != testAdmin+"/rep-1" {
		t.Fatalf("column %d: %v", now, col)
	}
	if _, ok := cols[w]; ok {
		t.Fatal("the future column was committed")
	}
	if n := metricValue(t, c.leaderNode(), "hotsplit_columns_rejected_reports_total"); n < 1 {
		t.Fatalf("the rejected report was not counted (%v)", n)
	}
}
