package node

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/loadgen"
	"github.com/hotsplit/hotsplit/transport"
)

// BenchmarkLoadScale: N reporters × 10k routes at a 1 s step on loopback,
// every reporter reporting every route (the worst case: every route's
// summed load is hot), rows of the version 1 or version 2 shape
// (internal/loadgen). Reports declare their size, as keyviz's do. Every
// column must commit within step + grace, list all N reporters, and no
// report may be refused; the run samples the process's peak live heap and
// reports the entry's size. All in one process (3 nodes and the
// reporters): the CPU figure bounds the leader's from above; the leader
// alone is measured by TestLongLoadScaleProcesses (cmd/hotsplitd). Run:
//
//	go test -run '^$' -bench LoadScale -benchtime 1x -timeout 30m ./node/
func BenchmarkLoadScale(b *testing.B) {
	for _, shape := range []loadgen.Shape{loadgen.V1, loadgen.V2} {
		for _, n := range []int{50, 100} {
			b.Run(fmt.Sprintf("%v/reporters=%d", shape, n), func(b *testing.B) { loadScale(b, shape, n) })
		}
	}
}

func loadScale(b *testing.B, shape loadgen.Shape, reporters int) {
	const routes, stepMs, graceMs, columns = 10_000, 1000, 500, 8
	var splits [][]byte
	for i := 1; i < routes; i++ {
		splits = append(splits, fmt.Appendf(nil, "r%05d", i))
	}
	cat, err := catalog.New(splits, 1) // what the bootstrap builds
	if err != nil {
		b.Fatal(err)
	}
	rows, err := loadgen.Build(shape, cat)
	if err != nil {
		b.Fatal(err)
	}
	// The budget an operator sizes for this fleet: every reporter's report
	// in flight at once, and at least the default.
	budget := max(transport.DefaultReportBudgetBytes, int64(reporters)*int64(loadgen.Parts{rows.Encoded[0]}.Len()+64<<10))
	c := newTestCluster(b, 3, func(n *Config) {
		n.InitialSplits = splits
		n.BootstrapConfig = &api.Config{StepMs: stepMs, GraceMs: graceMs, Threshold: 60_000}
		n.CeilingWindow = 2 * time.Second
		n.HeartbeatTimeout, n.ElectionTimeout, n.LeaderLeaseTimeout = time.Second, time.Second, 500*time.Millisecond
		n.Limits.ReportBudgetBytes = budget
	})
	leader := c.leaderNode()
	// A connection per reporter, as data nodes have: one shared connection
	// would push every report through one reader and one TLS stream.
	conns := make([]*grpc.ClientConn, reporters)
	for r := range conns {
		if conns[r], err = grpc.NewClient(leader.GRPCAddr(), adminCreds(b)); err != nil {
			b.Fatal(err)
		}
		defer conns[r].Close()
	}
	// Window 0 warms up: the leader learns whom to wait for (a column waits
	// for the reporters seen in the last steps), as in steady state; windows
	// 1..columns are measured.
	first := uint64(time.Now().UnixMilli())/stepMs*stepMs + 2*stepMs
	heads := make([][][]byte, reporters)
	for r := range reporters {
		for k := range columns + 1 {
			h, err := loadgen.Head(fmt.Sprintf("%s/scale-%d", testAdmin, r), first+uint64(k)*stepMs, stepMs, rows.Encoded[r%loadgen.Variants])
			if err != nil {
				b.Fatal(err)
			}
			heads[r] = append(heads[r], h)
		}
	}
	if now := uint64(time.Now().UnixMilli()); now >= first {
		b.Fatalf("encoding the reports took until %d ms past the first window", now-first)
	}

	runtime.GC()
	heap := newHeapSampler()
	var ru0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	t0 := time.Now()
	committedAt := map[uint64]time.Time{}
	var mu sync.Mutex
	stop := make(chan struct{})
	go func() { // record when each column applies on the leader
		for {
			ch := leader.FSM().Changed()
			at := leader.FSM().State().LastColumnAtMs()
			mu.Lock()
			if _, ok := committedAt[at]; !ok && at != 0 {
				committedAt[at] = time.Now()
			}
			mu.Unlock()
			select {
			case <-ch:
			case <-stop:
				return
			}
		}
	}()
	var refused, late atomic.Int64
	var wg sync.WaitGroup
	for r := range reporters {
		wg.Go(func() {
			enc := rows.Encoded[r%loadgen.Variants]
			for k := range columns + 1 {
				w := first + uint64(k)*stepMs
				time.Sleep(time.Until(loadgen.SendAt(w, stepMs, r, reporters)))
				resp, ok := loadgen.Send(conns[r], loadgen.Parts{heads[r][k], enc}, func(err error) {
					if refused.Add(1) <= 3 {
						b.Logf("reporter %d window %d: %v", r, w, err)
					}
				})
				if ok && len(resp.GetLateWindowStarts()) > 0 && k > 0 {
					late.Add(1)
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(t0)
	close(stop)
	peak := heap.stop()
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime)-syscall.TimevalToNsec(ru0.Utime)) + time.Duration(syscall.TimevalToNsec(ru1.Stime)-syscall.TimevalToNsec(ru0.Stime))

	var lags []time.Duration
	lateCols := 0
	mu.Lock()
	for k := 1; k <= columns; k++ {
		end := first + uint64(k+1)*stepMs
		at, ok := committedAt[end]
		if !ok {
			lateCols++
			continue
		}
		lag := at.Sub(time.UnixMilli(int64(end)))
		lags = append(lags, lag)
		if lag > (stepMs+graceMs)*time.Millisecond {
			lateCols++
		}
	}
	mu.Unlock()
	var sizes, counted []int
	evidenceRows := 0
	for _, e := range commands(b, leader) {
		if col := e.cmd.GetObserveColumn(); col != nil && col.WindowStartMs > first {
			sizes = append(sizes, proto.Size(e.cmd))
			counted = append(counted, len(col.Reporters))
			evidenceRows = len(col.Rows)
		}
	}
	slices.Sort(lags)
	b.ReportMetric(float64(lateCols), "late-columns")
	b.ReportMetric(float64(refused.Load()), "refused")
	b.ReportMetric(float64(peak)/(1<<20), "peak-live-MiB")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-cores")
	b.ReportMetric(cpu.Seconds()*1e6/float64(reporters*rows.Count*(columns+1)), "cpu-µs/row")
	if len(sizes) > 0 {
		b.ReportMetric(float64(slices.Max(sizes)), "entry-bytes")
	}
	if len(lags) > 0 {
		b.ReportMetric(float64(lags[len(lags)/2].Milliseconds()), "p50-lag-ms")
		b.ReportMetric(float64(lags[len(lags)-1].Milliseconds()), "max-lag-ms")
	}
	b.Logf("%v rows, %d reporters × %d routes (%d rows with evidence, %d bytes a report), budget %d MiB: %d/%d columns within step+grace, lag %v; reporters per column %v; %d refusals, %d late acks",
		shape, reporters, rows.Count, rows.WithEvidence, loadgen.Parts{heads[0][0], rows.Encoded[0]}.Len(), budgetOf(c)>>20,
		len(lags)-lateCols, columns, lags, counted, refused.Load(), late.Load())
	b.Logf("process CPU %.2f cores over %v (3 nodes + %d reporters in one process: an upper bound for the leader); peak live heap %d MiB (%d MiB before the run); entries %v bytes, %d rows with evidence",
		cpu.Seconds()/wall.Seconds(), wall.Round(time.Millisecond), reporters, peak>>20, heap.base>>20, sizes, evidenceRows)
	if lateCols > 0 {
		b.Errorf("%d of %d columns committed later than step + grace", lateCols, columns)
	}
	if refused.Load() > 0 || late.Load() > 0 {
		b.Errorf("%d reports refused, %d acknowledged late", refused.Load(), late.Load())
	}
	if len(counted) != columns || slices.Min(counted) != reporters {
		b.Errorf("columns counted %v reporters, want %d columns of %d", counted, columns, reporters)
	}
}

func budgetOf(c *testCluster) int64 {
	for _, cfg := range c.cfgs {
		return cfg.Limits.ReportBudgetBytes
	}
	return 0
}

// heapSampler samples the live heap (/gc/heap/live:bytes, as of the last
// GC) every 10 ms until stopped, and keeps the peak.
type heapSampler struct {
	base uint64
	done chan struct{}
	peak chan uint64
}

func newHeapSampler() *heapSampler {
	h := &heapSampler{base: liveHeap(), done: make(chan struct{}), peak: make(chan uint64, 1)}
	go func() {
		peak := h.base
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				peak = max(peak, liveHeap())
			case <-h.done:
				h.peak <- max(peak, liveHeap())
				return
			}
		}
	}()
	return h
}

func (h *heapSampler) stop() uint64 {
	close(h.done)
	return <-h.peak
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
