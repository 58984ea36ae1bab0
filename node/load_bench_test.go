package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// BenchmarkLoadScale: 50 reporters × 10k routes at a 1 s step on loopback
// (issue 5). Every column must commit within step + grace. Run:
//
//	go test -run '^$' -bench LoadScale -benchtime 1x ./node/
func BenchmarkLoadScale(b *testing.B) {
	for _, tc := range []struct {
		name     string
		replicas int // reporters per route; 50 = every reporter reports every route
	}{{"replicas=3", 3}, {"replicas=50", 50}} {
		b.Run(tc.name, func(b *testing.B) { loadScale(b, tc.replicas) })
	}
}

func loadScale(b *testing.B, replicas int) {
	const reporters, routes, stepMs, graceMs, columns = 50, 10_000, 1000, 500, 8
	var splits [][]byte
	for i := 1; i < routes; i++ {
		splits = append(splits, fmt.Appendf(nil, "r%05d", i))
	}
	c := newTestCluster(b, 3, func(n *Config) {
		n.InitialSplits = splits
		n.BootstrapConfig = &api.Config{StepMs: stepMs, GraceMs: graceMs, Threshold: 60_000}
		n.CeilingWindow = 2 * time.Second
	})
	leader := c.leaderNode()
	cat := leader.FSM().State().Catalog()
	var descs []*catalog.RouteDescriptor
	cat.Ascend(func(r *catalog.RouteDescriptor) bool { descs = append(descs, r); return true })

	// rows[r] are reporter r's rows: routes it serves, ~1% hot with evidence.
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([][]*api.ReportRow, reporters)
	for i, d := range descs {
		for k := range replicas {
			rep := (i + k*(reporters/replicas+1)) % reporters
			if replicas == reporters {
				rep = k
			}
			w := uint64(1 + rng.IntN(50))
			if i%100 == 0 {
				w = 2000 // hot: 2000 writes/step x 4 x 60 per reporter
			}
			nb := catalog.NewLayout(d.Start, d.End, 16).K()
			buckets := make([]uint64, nb)
			buckets[rng.IntN(nb)] = 4 * w
			row := &api.ReportRow{RouteId: d.ID, Writes: w, Buckets: buckets, SampleRate: 16}
			if w == 2000 {
				for j := range 8 {
					row.TopKeys = append(row.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "%s-key%d", d.Start, j), Count: uint64(400 - j)})
				}
			}
			rows[rep] = append(rows[rep], row)
		}
	}
	// Reporters are data nodes: encoding their reports is their CPU, not
	// the leader's. Every report is encoded before the clock starts and
	// sent as bytes, so the two shared cores go to the cluster.
	cc, err := grpc.NewClient(leader.GRPCAddr(), adminCreds(b))
	if err != nil {
		b.Fatal(err)
	}
	defer cc.Close()
	ctx := context.Background()
	// Each report is the encoded rows, encoded once, behind a small
	// header that names the window: protobuf merges the two parts of the
	// column, so the leader decodes exactly what a marshalled request
	// would give it.
	rowBytes := make([][]byte, reporters)
	for r := range reporters {
		if rowBytes[r], err = proto.Marshal(&api.ReportColumn{Rows: rows[r]}); err != nil {
			b.Fatal(err)
		}
	}
	first := uint64(time.Now().UnixMilli())/stepMs*stepMs + 2*stepMs
	encoded := make([][]preEncoded, reporters)
	for r := range reporters {
		for k := range columns {
			head, err := proto.Marshal(&api.ReportColumn{WindowStartMs: first + uint64(k)*stepMs, StepMs: stepMs, Buckets: 16, WriteWeight: 4, ReadWeight: 1})
			if err != nil {
				b.Fatal(err)
			}
			req, err := proto.Marshal(&api.ReportRequest{ReporterId: fmt.Sprintf("%s/scale-%d", testAdmin, r)})
			if err != nil {
				b.Fatal(err)
			}
			req = protowire.AppendTag(req, 2, protowire.BytesType)
			req = protowire.AppendVarint(req, uint64(len(head)+len(rowBytes[r])))
			encoded[r] = append(encoded[r], append(append(req, head...), rowBytes[r]...))
		}
	}
	if now := uint64(time.Now().UnixMilli()); now >= first {
		b.Fatalf("encoding the reports took until %d ms past the first window", now-first)
	}

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
	var wg sync.WaitGroup
	for r := range reporters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range columns {
				w := first + uint64(k)*stepMs
				waitWindowEnd(w, time.Duration(r)*time.Millisecond) // reporters spread over 50 ms
				for attempt := 0; attempt < 3; attempt++ {
					var resp api.ReportResponse
					if cc.Invoke(ctx, api.Load_Report_FullMethodName, encoded[r][k], &resp, grpc.ForceCodecV2(preEncodedCodec{})) == nil {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	close(stop)
	var ru1 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime)-syscall.TimevalToNsec(ru0.Utime)) + time.Duration(syscall.TimevalToNsec(ru1.Stime)-syscall.TimevalToNsec(ru0.Stime))
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	var lags []time.Duration
	late := 0
	mu.Lock()
	for k := range columns {
		end := first + uint64(k+1)*stepMs
		at, ok := committedAt[end]
		if !ok {
			late++
			continue
		}
		lag := at.Sub(time.UnixMilli(int64(end)))
		lags = append(lags, lag)
		if lag > (stepMs+graceMs)*time.Millisecond {
			late++
		}
	}
	mu.Unlock()
	var sizes []int
	rowsPerEntry := 0
	for _, e := range commands(b, leader) {
		if col := e.cmd.GetObserveColumn(); col != nil && col.WindowStartMs >= first {
			sizes = append(sizes, proto.Size(e.cmd))
			rowsPerEntry = len(col.Rows)
		}
	}
	slices.Sort(lags)
	rowsSent := 0
	for _, r := range rows {
		rowsSent += len(r)
	}
	b.ReportMetric(float64(late), "late-columns")
	if len(lags) > 0 {
		b.ReportMetric(float64(lags[len(lags)/2].Milliseconds()), "p50-lag-ms")
		b.ReportMetric(float64(lags[len(lags)-1].Milliseconds()), "max-lag-ms")
	}
	b.Logf("%d reporters, %d routes, %d rows/step (replicas %d): %d/%d columns committed within step+grace; commit lag after window end %v",
		reporters, routes, rowsSent, replicas, len(lags)-late, columns, lags)
	b.Logf("process CPU %.2f cores over %v (cluster of 3 + 50 reporters sending pre-encoded reports, in one process: an upper bound for the leader); heap in use %d MiB; ObserveColumn entries %v bytes, %d rows each",
		cpu.Seconds()/wall.Seconds(), wall.Round(time.Millisecond), ms.HeapInuse>>20, sizes, rowsPerEntry)
	if late > 0 {
		b.Logf("TARGET MISSED: %d of %d columns committed later than step + grace", late, columns)
	}
}

// preEncoded is a request already in wire form.
type preEncoded []byte

// preEncodedCodec sends a preEncoded request as it is and decodes
// responses with protobuf.
type preEncodedCodec struct{}

func (preEncodedCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(preEncoded)
	if !ok {
		return nil, fmt.Errorf("preEncodedCodec: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (preEncodedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("preEncodedCodec: cannot decode into %T", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

func (preEncodedCodec) Name() string { return encoding.GetCodecV2("proto").Name() }
