package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// loadCluster is an in-process gRPC server with what `hotsplitctl sim`
// needs: the catalog watch (one route), the config (a 100 ms step) and the
// load service, which acknowledges every column and keeps one copy per
// (reporter, window).
type loadCluster struct {
	api.UnimplementedCatalogServer
	api.UnimplementedAutoSplitServer
	api.UnimplementedLoadServer

	addr string

	mu      sync.Mutex
	columns map[string]map[uint64]*api.ReportColumn
}

func startLoadCluster(t *testing.T) *loadCluster {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &loadCluster{addr: lis.Addr().String(), columns: map[string]map[uint64]*api.ReportColumn{}}
	s := grpc.NewServer(testServerCreds(t))
	api.RegisterCatalogServer(s, c)
	api.RegisterAutoSplitServer(s, c)
	api.RegisterLoadServer(s, c)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return c
}

func (c *loadCluster) config() *api.Config {
	return &api.Config{StepMs: 100, Buckets: 16, WriteWeight: new(uint32(4)), ReadWeight: new(uint32(1))}
}

func (c *loadCluster) GetConfig(context.Context, *api.GetConfigRequest) (*api.GetConfigResponse, error) {
	return &api.GetConfigResponse{Config: c.config()}, nil
}

func (c *loadCluster) WatchRoutes(req *api.WatchRoutesRequest, s grpc.ServerStreamingServer[api.WatchRoutesResponse]) error {
	if req.GetFromVersion() == 0 {
		err := s.Send(&api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_SnapshotPage{SnapshotPage: &api.SnapshotPage{
			Version: 1, NextRouteId: 2, Last: true,
			Routes: []*api.RouteDescriptor{{RouteId: 1, GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE}}}}})
		if err != nil {
			return err
		}
	}
	<-s.Context().Done()
	return nil
}

func (c *loadCluster) Report(_ context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	cols := c.columns[req.GetReporterId()]
	if cols == nil {
		cols = map[uint64]*api.ReportColumn{}
		c.columns[req.GetReporterId()] = cols
	}
	resp := &api.ReportResponse{Config: c.config()}
	for _, col := range req.GetColumns() {
		if _, ok := cols[col.GetWindowStartMs()]; !ok {
			cols[col.GetWindowStartMs()] = col
		}
		resp.AckedWindowStarts = append(resp.AckedWindowStarts, col.GetWindowStartMs())
	}
	return resp, nil
}

// ops sums the reads and writes of every acknowledged column.
func (c *loadCluster) ops() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for _, cols := range c.columns {
		for _, col := range cols {
			for _, r := range col.GetRows() {
				n += r.GetReads() + r.GetWrites()
			}
		}
	}
	return n
}

func simCtl(t *testing.T, ctx context.Context, addr string, args ...string) result {
	t.Helper()
	var out, errOut testutil.LogBuffer
	code := run(ctx, append([]string{"--endpoints", addr, "--timeout", "5s", "sim"}, args...), testEnv, &out, &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func TestSimFlagValidation(t *testing.T) {
	f := startCluster(t)
	base := []string{"--workload", "hotkey", "--rate", "100", "--duration", "1s"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--rate", "100", "--duration", "1s"}, "sim: --workload is required: one of uniform, zipf, hotrange, hotkey, shift"},
		{with("--workload", "pareto"), `workload "pareto": want one of uniform, zipf, hotrange, hotkey, shift`},
		{[]string{"--workload", "hotkey", "--duration", "1s"}, "sim: --rate is required"},
		{with("--rate", "0"), "sim: --rate 0: want 1 to 1000000 operations per second"},
		{with("--rate", "2000000"), "sim: --rate 2000000: want 1 to 1000000"},
		{[]string{"--workload", "hotkey", "--rate", "100"}, "sim: --duration is required"},
		{with("--duration", "0s"), "sim: --duration 0s: want more than 0"},
		{with("--duration", "25h"), "sim: --duration 25h0m0s: want more than 0 and at most 24h0m0s"},
		{with("--nodes", "0"), "sim: --nodes 0: want 1 to 1024"},
		{with("--skew", "1.5"), "sim: --skew does not apply to --workload hotkey (only to zipf)"},
		{with("--shift-every", "5s"), "--shift-every does not apply to --workload hotkey (only to shift)"},
		{with("--prefix-len", "4"), "--prefix-len does not apply to --workload hotkey (only to narrow)"},
		{with("--workload", "narrow", "--prefix-len", "0"), "prefix-len 0: want 1 to 1024 bytes"},
		{with("--workload", "pair", "--pair-share", "0.6"), "pair-share 0.6: want a share in (0, 0.5]"},
		{with("--workload", "incidental", "--incidental-share", "0.5"), "incidental-share 0.5: want a share in (0, 1-hot-share]"},
		{with("--workload", "oscillate", "--amplitude", "1"), "amplitude 1: want [0, 1)"},
		{with("--hot-share", "2"), "hot-share 2: want a share in (0, 1]"},
		{with("--write-fraction", "-1"), "write-fraction -1"},
		{with("--key-space", "1"), "key-space 1: want 2 to"},
		{with("--workload", "zipf", "--skew", "1"), "skew 1: want an exponent"},
		{with("--rate", "1", "--duration", "500ms"), "less than one operation"},
		{with("extra"), "sim: expects no arguments, got 1 argument(s)"},
		{with("--rate", "ten"), `invalid argument "ten" for "--rate"`},
	} {
		r := ctl(t, f, append([]string{"sim"}, tc.args...)...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "see 'hotsplitctl sim --help'") {
			t.Errorf("sim %q: exit %d, stderr %q; want exit 2 naming %q", tc.args, r.code, r.stderr, tc.want)
		}
		if r.stdout != "" {
			t.Errorf("sim %q printed %q", tc.args, r.stdout)
		}
	}
	for _, m := range []string{"GetConfig", "WatchRoutes"} {
		if n := f.calls(m); n != 0 {
			t.Errorf("%d %s calls from refused command lines", n, m)
		}
	}
}

func TestSimHelp(t *testing.T) {
	r := ctl(t, nil, "sim", "--help")
	for _, want := range []string{"hotsplitctl sim --workload hotkey --nodes 3 --rate 20000 --duration 60s", "--shift-every", "hotkey    --hot-share"} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("sim --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestSimRunSummary(t *testing.T) {
	c := startLoadCluster(t)
	r := simCtl(t, context.Background(), c.addr, "--workload", "hotkey", "--nodes", "2", "--rate", "2000", "--duration", "300ms",
		"--seed", "3", "--run-id", "t")
	if r.code != 0 {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{
		"workload   hotkey: 90% of ops on user:00618033, the rest uniform over 1000000 keys, writes 50%\n",
		"run        t, seed 3, 2 nodes\n",
		"ops        600 of 600 in ",
		"completed): ",
		"catalog    version 1, 1 routes (1 versions received, 0 watch failures)\n",
		"committed  600 ops in acknowledged columns, 0 in late columns (dropped by the cluster), 0 in refused columns\n",
		"flushed    yes: every column holding an operation is settled\n",
		"NODE       READS",
		"\nalice/t-0  ",
		"\nalice/t-1  ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.HasPrefix(r.stderr, "\r") || !strings.HasSuffix(r.stderr, "\n") || !strings.Contains(r.stderr, "done ") ||
		!strings.Contains(r.stderr, "ops 600/600") {
		t.Errorf("progress line %q", r.stderr)
	}
	if got := c.ops(); got != 600 {
		t.Errorf("the cluster has %d ops in its columns, want 600", got)
	}
}

func TestSimRunJSON(t *testing.T) {
	c := startLoadCluster(t)
	r := simCtl(t, context.Background(), c.addr, "--workload", "zipf", "--skew", "1.2", "--nodes", "3", "--rate", "3000",
		"--duration", "200ms", "--progress=false", "-o", "json")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d\nstdout %s\nstderr %q", r.code, r.stdout, r.stderr)
	}
	var sum simSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil {
		t.Fatalf("%v in %s", err, r.stdout)
	}
	var perNode uint64
	for _, n := range sum.PerNode {
		perNode += n.Reads + n.Writes
	}
	if sum.Workload != "zipf" || sum.Ops != 600 || sum.PlannedOps != 600 || sum.Reads+sum.Writes != 600 || perNode != 600 ||
		sum.OpsAcked != 600 || !sum.Flushed || sum.Interrupted || len(sum.PerNode) != 3 || sum.Seed != 1 {
		t.Errorf("summary %+v", sum)
	}
	if got := c.ops(); got != 600 {
		t.Errorf("the cluster has %d ops in its columns, want 600", got)
	}
}

// TestSimInterrupt: Ctrl-C (the context ending) stops the run at once and
// still prints the summary; the exit code is 0.
func TestSimInterrupt(t *testing.T) {
	c := startLoadCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() {
		done <- simCtl(t, ctx, c.addr, "--workload", "uniform", "--rate", "1000", "--duration", "1h", "--progress=false", "-o", "json")
	}()
	testutil.WaitFor(t, 5*time.Second, "load at the cluster", func() bool { return c.ops() > 0 })
	cancel()
	r := <-done
	var sum simSummary
	if err := json.Unmarshal([]byte(r.stdout), &sum); err != nil || r.code != 0 {
		t.Fatalf("exit %d, %v in %s (stderr %q)", r.code, err, r.stdout, r.stderr)
	}
	if !sum.Interrupted || sum.Flushed || sum.Ops == 0 || sum.Ops >= sum.PlannedOps {
		t.Errorf("summary %+v", sum)
	}
}

// TestSimUnavailable: with no cluster to read the config from, the run
// fails before issuing anything, with exit code 3 and no summary.
func TestSimUnavailable(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	var out, errOut testutil.LogBuffer
	code := run(context.Background(), []string{"--endpoints", addr, "--timeout", "1s", "sim", "--workload", "hotkey",
		"--rate", "100", "--duration", "1s", "--progress=false"}, testEnv, &out, &errOut)
	if code != exitUnavailable || out.String() != "" || !strings.Contains(errOut.String(), "sim: reading the cluster's load config: ") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
