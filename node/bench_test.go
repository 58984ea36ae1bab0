package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// benchDir returns a directory on a real disk for fsync measurements: the
// test temp dir unless it is tmpfs (then $HOTSPLIT_BENCH_DIR, else skip).
func benchDir(b *testing.B) (string, string) {
	b.Helper()
	dir := b.TempDir()
	if d := os.Getenv("HOTSPLIT_BENCH_DIR"); d != "" {
		var err error
		if dir, err = os.MkdirTemp(d, "hotsplit-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { os.RemoveAll(dir) })
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		b.Fatal(err)
	}
	fs := fsName(st.Type)
	if fs == "tmpfs" {
		b.Skipf("%s is tmpfs: fsync latency would be meaningless; set HOTSPLIT_BENCH_DIR to a directory on disk", dir)
	}
	return dir, fs
}

func fsName(magic int64) string {
	switch magic {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794c7630:
		return "overlayfs"
	}
	return fmt.Sprintf("0x%x", magic)
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// fdatasyncLatency measures a 4 KiB append followed by fdatasync.
func fdatasyncLatency(b *testing.B, dir string, n int) []time.Duration {
	f, err := os.OpenFile(filepath.Join(dir, "fsync.probe"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	out := make([]time.Duration, 0, n)
	for range n {
		t0 := time.Now()
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// boltUpdateLatency measures a single-key bbolt update (one fsynced
// transaction), what one raft log append costs at the store level.
func boltUpdateLatency(b *testing.B, dir string, n int) []time.Duration {
	db, err := bolt.Open(filepath.Join(dir, "probe.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	out := make([]time.Duration, 0, n)
	val := make([]byte, 256)
	for i := range n {
		t0 := time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("b"))
			if err != nil {
				return err
			}
			return bk.Put(fmt.Appendf(nil, "k%08d", i), val)
		})
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(t0))
	}
	return out
}

// timedLogStore records how long each log write takes.
type timedLogStore struct {
	raft.LogStore
	mu   *sync.Mutex
	took *[]time.Duration
}

func (s timedLogStore) StoreLogs(ls []*raft.Log) error {
	t0 := time.Now()
	err := s.LogStore.StoreLogs(ls)
	s.mu.Lock()
	*s.took = append(*s.took, time.Since(t0))
	s.mu.Unlock()
	return err
}

func (s timedLogStore) StoreLog(l *raft.Log) error { return s.StoreLogs([]*raft.Log{l}) }

// transports are the two ways a cluster runs, compared in one run by the
// benchmarks below: mutual TLS (the default) and --insecure.
var transports = []struct {
	name     string
	insecure bool
}{{"tls", false}, {"plaintext", true}}

// BenchmarkSplitCommitLatency reports manual split commit latency on a
// 3-node loopback cluster with fsync on, over TLS and plaintext, beside F
// (fdatasync) and B (bbolt update) measured in the same run on the same
// filesystem, and where the time goes. Run:
// go test -run '^$' -bench SplitCommitLatency -benchtime 500x ./node/
func BenchmarkSplitCommitLatency(b *testing.B) {
	p50 := map[string]time.Duration{}
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) {
			if d := splitCommitLatency(b, tr.insecure); d > 0 {
				p50[tr.name] = d
			}
		})
	}
	if p50["tls"] > 0 && p50["plaintext"] > 0 {
		ratio := float64(p50["tls"]) / float64(p50["plaintext"])
		b.Logf("split commit p50: TLS %v, plaintext %v, ratio %.2f (goal <= 1.2): %v", p50["tls"], p50["plaintext"], ratio, ratio <= 1.2)
	}
}

// splitCommitLatency is one run of BenchmarkSplitCommitLatency; it returns
// the p50, 0 for the framework's probe run.
func splitCommitLatency(b *testing.B, insecure bool) time.Duration {
	dir, fs := benchDir(b)
	const probes = 300
	fd := fdatasyncLatency(b, dir, probes)
	bu := boltUpdateLatency(b, dir, probes)

	var storeMu sync.Mutex
	writes := map[string]*[]time.Duration{}
	c := newTestClusterIn(b, dir, 3, func(cfg *Config) {
		w := &[]time.Duration{}
		writes[cfg.ID] = w
		cfg.wrapLogStore = func(s raft.LogStore) raft.LogStore { return timedLogStore{s, &storeMu, w} }
		cfg.CeilingWindow = 10 * time.Second // keep fence renewals out of the way
		cfg.Insecure = insecure
	})
	leader := c.leader()
	cl := c.catalogClient(leader)
	ctx := context.Background()

	// Round trip of a gRPC call that touches no log, for the breakdown.
	var rpc []time.Duration
	for range 200 {
		t0 := time.Now()
		if _, err := c.clusterClient(leader).Leader(ctx, &api.LeaderRequest{}); err != nil {
			b.Fatal(err)
		}
		rpc = append(rpc, time.Since(t0))
	}
	storeMu.Lock()
	for _, w := range writes {
		*w = (*w)[:0]
	}
	storeMu.Unlock()

	route := uint64(1)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		resp, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: route, SplitKey: fmt.Appendf(nil, "k%08d", i), RequestId: requestID()})
		if err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		route = resp.Right.RouteId
	}
	b.StopTimer()
	if b.N < 100 {
		return 0 // the framework's probe run: too few splits to report
	}
	storeMu.Lock()
	defer storeMu.Unlock()
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	F, B := percentile(fd, 0.5), percentile(bu, 0.5)
	b.ReportMetric(float64(p50.Microseconds()), "p50-us")
	b.ReportMetric(float64(p99.Microseconds()), "p99-us")
	b.ReportMetric(float64(F.Microseconds()), "F-us")
	b.ReportMetric(float64(B.Microseconds()), "B-us")
	target := 2*B + time.Millisecond
	b.Logf("filesystem %s (%s); splits %d", fs, dir, len(lat))
	b.Logf("split commit latency p50 %v p99 %v; fdatasync F p50 %v p99 %v; bbolt update B p50 %v p99 %v; target p50 <= 2B+1ms = %v: %v",
		p50, p99, F, percentile(fd, 0.99), B, percentile(bu, 0.99), target, p50 <= target)
	var follower []time.Duration
	for id, w := range writes {
		if len(*w) == 0 {
			continue
		}
		if id == leader {
			b.Logf("breakdown: leader log write p50 %v (%d writes)", percentile(*w, 0.5), len(*w))
		} else {
			follower = append(follower, *w...)
		}
	}
	if len(follower) > 0 {
		b.Logf("breakdown: follower log write p50 %v; client gRPC round trip p50 %v; remainder (replication hop, apply, response) ~%v",
			percentile(follower, 0.5), percentile(rpc, 0.5), p50-percentile(*writes[leader], 0.5)-percentile(follower, 0.5)-percentile(rpc, 0.5))
	}
	return p50
}

// BenchmarkListRoutesLinearizable measures linearizable ListRoutes of a
// 1000-route catalog (one page) against the leader, 8 concurrent callers.
func BenchmarkListRoutesLinearizable(b *testing.B) {
	c := newTestCluster(b, 3, nil)
	leader := c.leader()
	cl := c.catalogClient(leader)
	ctx := context.Background()
	route := uint64(1)
	for i := range 999 {
		resp, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: route, SplitKey: fmt.Appendf(nil, "k%08d", i), RequestId: requestID()})
		if err != nil {
			b.Fatal(err)
		}
		route = resp.Right.RouteId
	}
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := cl.ListRoutes(ctx, &api.ListRoutesRequest{PageSize: 1000})
			if err != nil || len(resp.Routes) != 1000 {
				b.Errorf("list: %v (%d routes)", err, len(resp.GetRoutes()))
				return
			}
		}
	})
}

// BenchmarkGetTimestamp measures GetTimestamp batches (of 100) per second
// against the leader, 8 concurrent callers, over TLS and plaintext.
func BenchmarkGetTimestamp(b *testing.B) {
	for _, tr := range transports {
		b.Run(tr.name, func(b *testing.B) { getTimestamp(b, tr.insecure) })
	}
}

func getTimestamp(b *testing.B, insecure bool) {
	c := newTestCluster(b, 3, func(cfg *Config) { cfg.Insecure = insecure })
	cl := c.catalogClient(c.leader())
	ctx := context.Background()
	var fails atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := cl.GetTimestamp(ctx, &api.GetTimestampRequest{Count: 100}); err != nil {
				fails.Add(1)
			}
		}
	})
	if fails.Load() > 0 {
		b.Fatalf("%d GetTimestamp calls failed", fails.Load())
	}
}
