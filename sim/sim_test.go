package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

const testStepMs = 50

// snapshotOf is a one-page snapshot of the initial catalog with splits.
func snapshotOf(t *testing.T, splits [][]byte) (*catalog.Catalog, *api.WatchRoutesResponse) {
	t.Helper()
	cat, err := catalog.New(splits, 1)
	if err != nil {
		t.Fatal(err)
	}
	s := cat.ToProto()
	return cat, page(s.Version, s.NextRouteId, true, s.Routes...)
}

// replay serves the first n operations of w with seed against cat, as the
// driver does, and counts them per route.
func replay(w Workload, seed uint64, n uint64, rate int, cat *catalog.Catalog) map[uint64]counts {
	st := w.Stream(rand.New(rand.NewPCG(seed, 0)))
	out := map[uint64]counts{}
	var key []byte
	for i := range n {
		k, write := st.Next(time.Duration(mulDiv(i, uint64(time.Second), uint64(rate))))
		key = w.Keys().AppendKey(key[:0], k)
		c := out[cat.Lookup(key).ID]
		if write {
			c.writes++
		} else {
			c.reads++
		}
		out[cat.Lookup(key).ID] = c
	}
	return out
}

func newSim(t *testing.T, cfg Config) *Sim {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runFor runs s with a deadline and returns Run's error.
func runFor(t *testing.T, s *Sim, d time.Duration) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return s.Run(ctx)
}

// TestRunCountsEveryOpOnce: a run against an in-process cluster ends with
// every operation it issued in exactly one acknowledged column, on the node
// that served it and in the route that holds its key — the same per-route
// counts, whatever the number of nodes, as replaying the seed's sequence.
func TestRunCountsEveryOpOnce(t *testing.T) {
	w := mustWorkload(t, HotRange, nil)
	cat, snap := snapshotOf(t, w.Keys().SplitKeys(4))
	for _, nodes := range []int{1, 3} {
		fc := newFakeCluster(testStepMs, snap)
		s := newSim(t, Config{Cluster: fc, Workload: w, Nodes: nodes, Rate: 20_000, Duration: 300 * time.Millisecond, Seed: 9, RunID: "t"})
		if err := runFor(t, s, 10*time.Second); err != nil {
			t.Fatalf("nodes=%d: Run: %v", nodes, err)
		}
		st := s.Stats()
		if st.Phase != PhaseDone || st.Planned != 6000 || st.Ops != st.Planned || st.Reads+st.Writes != st.Ops || st.Step != testStepMs*time.Millisecond {
			t.Fatalf("nodes=%d: stats %+v", nodes, st)
		}
		if st.OpsAcked != st.Ops || st.OpsLate != 0 || st.OpsRefused != 0 {
			t.Errorf("nodes=%d: ops acked %d, late %d, refused %d of %d", nodes, st.OpsAcked, st.OpsLate, st.OpsRefused, st.Ops)
		}
		if st.UnknownRoute != 0 || fc.conflicts != 0 {
			t.Errorf("nodes=%d: %d unknown-route drops, %d conflicting resends", nodes, st.UnknownRoute, fc.conflicts)
		}
		// The first operation waited for a step boundary: each node's first
		// column, a partial window, is empty.
		for id, rows := range fc.firstColumnRows() {
			if rows != 0 {
				t.Errorf("nodes=%d: the first column of %s has %d rows", nodes, id, rows)
			}
		}
		byReporter, byRoute := fc.totals()
		var sum counts
		for i, ns := range st.Nodes {
			got := byReporter[ns.ReporterID]
			if ns.ReporterID != "sim/t-"+string(rune('0'+i)) || got.reads != ns.Reads || got.writes != ns.Writes {
				t.Errorf("nodes=%d: %s served %d/%d, the cluster has %d/%d", nodes, ns.ReporterID, ns.Reads, ns.Writes, got.reads, got.writes)
			}
			sum.reads += got.reads
			sum.writes += got.writes
		}
		if sum.reads != st.Reads || sum.writes != st.Writes {
			t.Errorf("nodes=%d: reported %d reads + %d writes, issued %d + %d", nodes, sum.reads, sum.writes, st.Reads, st.Writes)
		}
		want := replay(w, 9, st.Planned, 20_000, cat)
		if len(byRoute) != len(want) {
			t.Errorf("nodes=%d: rows for %d routes, want %d", nodes, len(byRoute), len(want))
		}
		for id, c := range want {
			if byRoute[id] != c {
				t.Errorf("nodes=%d: route %d has %+v, the seed's sequence gives %+v", nodes, id, byRoute[id], c)
			}
		}
		t.Logf("nodes=%d: %d ops in %v, %d columns acked, per route %v", nodes, st.Ops, st.Elapsed, st.Columns.ColumnsAcked, byRoute)
	}
}

// TestRunRoutesAcrossSplit: when the catalog splits during the run, every
// operation still lands in the route that held its key when it was served:
// each row's keys (all of them in the sketch: sample rate 1, few keys) lie
// inside the row's route, the parent and both children have rows, and
// nothing is dropped.
func TestRunRoutesAcrossSplit(t *testing.T) {
	w := mustWorkload(t, Uniform, func(o *WorkloadOptions) { o.KeySpace = 200 })
	k := w.Keys()
	_, snap := snapshotOf(t, [][]byte{k.Key(0), k.End()})
	parent := snap.GetSnapshotPage().GetRoutes()[1] // [Key(0), End)
	split := k.Key(100)
	left := rd(4, string(k.Key(0)), string(split))
	right := rd(5, string(split), string(k.End()))
	fc := newFakeCluster(testStepMs, snap)
	s := newSim(t, Config{Cluster: fc, Workload: w, Nodes: 2, Rate: 20_000, Duration: 2 * time.Second, Seed: 1, // long enough that the split lands mid-run on a loaded machine
		SampleRate: 1, TopK: 256})
	done := make(chan error, 1)
	go func() { done <- runFor(t, s, 10*time.Second) }()
	testutil.WaitFor(t, waitLimit, "a third of the operations", func() bool { return s.Stats().Ops >= s.Planned()/3 })
	fc.push(delta(2, []uint64{parent.GetRouteId()}, left, right))
	testutil.WaitFor(t, waitLimit, "the split to reach the driver", func() bool { return s.Stats().CatalogVersion == 2 })
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	st := s.Stats()
	bounds := map[uint64]*api.RouteDescriptor{parent.GetRouteId(): parent, 4: left, 5: right}
	seen := map[uint64]uint64{}
	var total uint64
	for _, r := range fc.rows() {
		b := bounds[r.GetRouteId()]
		if b == nil {
			t.Fatalf("a row for route %d, which holds no generated key", r.GetRouteId())
		}
		rt := catalog.RouteFromProto(b)
		for _, tk := range r.GetTopKeys() {
			if !rt.Contains(tk.GetKey()) {
				t.Errorf("key %q counted on route %s", tk.GetKey(), rt)
			}
		}
		seen[r.GetRouteId()] += r.GetReads() + r.GetWrites()
		total += r.GetReads() + r.GetWrites()
	}
	if seen[parent.GetRouteId()] == 0 || seen[4] == 0 || seen[5] == 0 {
		t.Errorf("ops per route %v: want the parent and both children", seen)
	}
	if total != st.Ops || st.Ops != st.Planned || st.UnknownRoute != 0 {
		t.Errorf("reported %d ops, issued %d of %d, %d dropped as unknown", total, st.Ops, st.Planned, st.UnknownRoute)
	}
	t.Logf("ops per route %v", seen)
}

func TestRunStopsWhenContextEnds(t *testing.T) {
	w := mustWorkload(t, HotKey, nil)
	_, snap := snapshotOf(t, nil)
	fc := newFakeCluster(testStepMs, snap)
	s := newSim(t, Config{Cluster: fc, Workload: w, Nodes: 3, Rate: 10_000, Duration: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	testutil.WaitFor(t, waitLimit, "operations", func() bool { return s.Stats().Ops > 0 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Run = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if st := s.Stats(); st.Phase != PhaseDone || st.Ops == 0 || st.Ops >= st.Planned {
		t.Fatalf("stats after cancel: phase %v, %d of %d ops", st.Phase, st.Ops, st.Planned)
	}
	if err := s.Run(context.Background()); !errors.Is(err, ErrAlreadyRun) {
		t.Fatalf("second Run = %v, want ErrAlreadyRun", err)
	}
}

func TestRunWithoutCatalog(t *testing.T) {
	fc := newFakeCluster(testStepMs) // a watch that never delivers
	s := newSim(t, Config{Cluster: fc, Workload: mustWorkload(t, Uniform, nil), Nodes: 1, Rate: 100, Duration: time.Second,
		StartTimeout: 200 * time.Millisecond})
	err := runFor(t, s, 10*time.Second)
	if !errors.Is(err, ErrNoCatalog) {
		t.Fatalf("Run = %v, want ErrNoCatalog", err)
	}
	if st := s.Stats(); st.Ops != 0 {
		t.Fatalf("%d ops issued without a catalog", st.Ops)
	}
}

func TestRunConfigUnavailable(t *testing.T) {
	_, snap := snapshotOf(t, nil)
	fc := newFakeCluster(testStepMs, snap)
	fc.configErr = status.Error(codes.Unavailable, "no leader")
	s := newSim(t, Config{Cluster: fc, Workload: mustWorkload(t, Uniform, nil), Nodes: 1, Rate: 100, Duration: time.Second})
	err := runFor(t, s, 10*time.Second)
	if err == nil || status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "load config") {
		t.Fatalf("Run = %v, want the config error", err)
	}
	if fc.reports != 0 || len(fc.watches) != 0 || s.Stats().Ops != 0 {
		t.Fatalf("%d reports, %d watches, %d ops after a failed start", fc.reports, len(fc.watches), s.Stats().Ops)
	}
}

// TestRunDrainTimesOut: a cluster that never acknowledges makes Run say so.
func TestRunDrainTimesOut(t *testing.T) {
	_, snap := snapshotOf(t, nil)
	fc := newFakeCluster(testStepMs, snap)
	fc.noAck = true
	s := newSim(t, Config{Cluster: fc, Workload: mustWorkload(t, Uniform, nil), Nodes: 2, Rate: 1000, Duration: 100 * time.Millisecond,
		DrainTimeout: 300 * time.Millisecond})
	if err := runFor(t, s, 10*time.Second); !errors.Is(err, ErrNotFlushed) || !strings.Contains(err.Error(), "2 of 2 nodes") {
		t.Fatalf("Run = %v, want ErrNotFlushed for 2 nodes", err)
	}
	if st := s.Stats(); st.Ops != st.Planned || st.Columns.ColumnsAcked != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestRunRefusedColumnsEndTheDrain: columns the cluster refuses for good
// (InvalidArgument) are dropped by the reporters and counted; they do not
// hold the run open.
func TestRunRefusedColumnsEndTheDrain(t *testing.T) {
	_, snap := snapshotOf(t, nil)
	fc := newFakeCluster(testStepMs, snap)
	fc.reportErr = status.Error(codes.InvalidArgument, "column from the future")
	s := newSim(t, Config{Cluster: fc, Workload: mustWorkload(t, Uniform, nil), Nodes: 2, Rate: 1000, Duration: 100 * time.Millisecond})
	if err := runFor(t, s, 10*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if st := s.Stats(); st.Columns.ColumnsRejected == 0 || st.Columns.ColumnsAcked != 0 || st.OpsRefused != st.Ops || st.OpsAcked != 0 {
		t.Fatalf("columns %+v, ops %d refused of %d: want refused ones counted", st.Columns, st.OpsRefused, st.Ops)
	}
}

// TestRunRecoversItsWatch: a failed watch is retried, and a gap (a delta
// that skips a version) starts the catalog over from a snapshot.
func TestRunRecoversItsWatch(t *testing.T) {
	w := mustWorkload(t, Uniform, func(o *WorkloadOptions) { o.KeySpace = 200 })
	_, snap := snapshotOf(t, nil)
	fc := newFakeCluster(testStepMs, snap)
	fc.failWatches = 1
	fc.once = delta(3, []uint64{1}, rd(2, "", "m"), rd(3, "m", ""))
	s := newSim(t, Config{Cluster: fc, Workload: w, Nodes: 1, Rate: 1000, Duration: 100 * time.Millisecond})
	if err := runFor(t, s, 10*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	st := s.Stats()
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if st.WatchFailures < 2 || fc.watches[0] != 0 || fc.watches[1] != 0 || fc.watches[2] != 0 {
		t.Fatalf("%d watch failures, watches from %v: want a failure, then a gap, each followed by a snapshot", st.WatchFailures, fc.watches)
	}
	if st.CatalogVersion != 1 || st.Ops != st.Planned {
		t.Fatalf("stats %+v", st)
	}
}

func TestNewRejects(t *testing.T) {
	fc := newFakeCluster(testStepMs)
	w := mustWorkload(t, Uniform, nil)
	good := Config{Cluster: fc, Workload: w, Nodes: 1, Rate: 100, Duration: time.Second}
	for _, tc := range []struct {
		mod  func(*Config)
		want string
	}{
		{func(c *Config) { c.Cluster = nil }, "Cluster is nil"},
		{func(c *Config) { c.Workload = nil }, "Workload is nil"},
		{func(c *Config) { c.Nodes = 0 }, "Nodes 0"},
		{func(c *Config) { c.Nodes = MaxNodes + 1 }, "Nodes 1025"},
		{func(c *Config) { c.Rate = 0 }, "Rate 0"},
		{func(c *Config) { c.Rate = -5 }, "Rate -5"},
		{func(c *Config) { c.Rate = MaxRate + 1 }, "Rate 1000001"},
		{func(c *Config) { c.Duration = 0 }, "Duration 0s"},
		{func(c *Config) { c.Duration = -time.Second }, "Duration -1s"},
		{func(c *Config) { c.Duration = MaxDuration + time.Nanosecond }, "Duration 24h0m0.000000001s"},
		{func(c *Config) { c.Rate, c.Duration = 1, 500*time.Millisecond }, "less than one operation"},
		{func(c *Config) { c.Tick = 2 * time.Second }, "Tick 2s: want 1ms to 1s"},
		{func(c *Config) { c.Tick = time.Microsecond }, "Tick 1µs"},
		{func(c *Config) { c.DrainTimeout = -1 }, "DrainTimeout"},
		{func(c *Config) { c.SampleRate = 1 << 21 }, "SampleRate"},
		{func(c *Config) { c.TopK = 1000 }, "TopK"},
	} {
		cfg := good
		tc.mod(&cfg)
		s, err := New(cfg)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New: %v, %v; want ErrInvalidConfig naming %q", s, err, tc.want)
		}
	}
	if _, err := New(good); err != nil {
		t.Fatalf("New(good): %v", err)
	}
	if fc.reports != 0 || len(fc.watches) != 0 {
		t.Fatal("New contacted the cluster")
	}
}

// TestAckTracker: the flush condition is met only once the column holding
// the last operation and every one before it are settled.
func TestAckTracker(t *testing.T) {
	fc := newFakeCluster(testStepMs)
	fc.noAck = true
	tr := newAckTracker(fc, permanent)
	ctx := context.Background()
	// Column w holds w/50 operations: one row of w/50 reads.
	send := func(ws ...uint64) {
		req := &api.ReportRequest{ReporterId: "r"}
		for _, w := range ws {
			req.Columns = append(req.Columns, &api.ReportColumn{WindowStartMs: w, StepMs: 50,
				Rows: []*api.ReportRow{{RouteId: 1, Reads: w / 50}}})
		}
		_, _ = tr.Report(ctx, req) // errors are the cases under test
	}
	if tr.settledThrough(0, false) {
		t.Fatal("settled before anything was sent")
	}
	send(100, 150)
	if tr.settledThrough(100, true) || tr.settledThrough(0, false) {
		t.Fatal("settled while unacknowledged")
	}
	fc.noAck = false
	send(100)
	if !tr.settledThrough(100, true) || !tr.settledThrough(0, false) || tr.settledThrough(150, true) {
		t.Fatal("100 acknowledged: settled through 100 only")
	}
	if tr.settledThrough(200, true) {
		t.Fatal("200 was never sent")
	}
	fc.reportErr = status.Error(codes.InvalidArgument, "no")
	send(150, 200)
	if !tr.settledThrough(200, true) {
		t.Fatal("refused columns are settled")
	}
	fc.reportErr = status.Error(codes.Unavailable, "later")
	send(250)
	if tr.settledThrough(250, true) {
		t.Fatal("a column that failed to send is not settled")
	}
	fc.reportErr, fc.late = nil, true
	send(250, 300)
	if !tr.settledThrough(300, true) {
		t.Fatal("late columns are settled")
	}
	// 100 acknowledged (2 ops), 150 and 200 refused (3 + 4), 250 and 300
	// late (5 + 6).
	if acked, late, refused := tr.settledOps(); acked != 2 || refused != 7 || late != 11 {
		t.Fatalf("settled ops: acked %d, late %d, refused %d; want 2, 11, 7", acked, late, refused)
	}
}

// waitLimit is how long a test waits for a condition before failing.
const waitLimit = 10 * time.Second
