package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// startOne starts a single bootstrapped TLS node with extra flags and
// waits until it leads.
func startOne(t *testing.T, extra ...string) (*proc, certDir) {
	t.Helper()
	hotsplitd, hotsplitctl := binaries(t)
	dir := t.TempDir()
	certs := makeCerts(t, hotsplitctl, filepath.Join(dir, "certs"), "n1")
	p := &proc{id: "n1", dataDir: filepath.Join(dir, "n1"), raft: freePort(t), grpc: freePort(t), http: freePort(t),
		logPath: filepath.Join(dir, "n1.log"), args: append(append(certs.nodeArgs("n1"), "--bootstrap"), extra...)}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			t.Logf("--- n1 log ---\n%s", b)
		}
	})
	p.start(t, hotsplitd)
	testutil.Eventually(t, 20*time.Second, "a ready leader", func() error {
		_, err := ctl(t, hotsplitctl, certs.adminEnv(), p.grpc, "routes", "list")
		return err
	})
	return p, certs
}

// adminClient connects to endpoints as the test admin.
func (d certDir) adminClient(t *testing.T, cfg client.Config, endpoints ...string) *client.Client {
	t.Helper()
	f := func(n string) string { return filepath.Join(string(d), n) }
	cfg.Endpoints = endpoints
	cfg.CACertFile, cfg.CertFile, cfg.KeyFile = f("ca.crt"), f("client-admin.crt"), f("client-admin.key")
	cl, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// adminHTTP is an HTTPS client presenting the test admin's certificate.
func (d certDir) adminHTTP(t *testing.T) *http.Client {
	t.Helper()
	f := func(n string) string { return filepath.Join(string(d), n) }
	pair, err := tls.LoadX509KeyPair(f("client-admin.crt"), f("client-admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(f("ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}}}
}

// procStatus reads a field of /proc/PID/status in bytes (VmHWM, VmRSS).
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %v", field, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("%s not in /proc/%d/status", field, pid)
	return 0
}

// metric reads one sample of a node's /metrics (as the admin), 0 if absent.
func metric(t *testing.T, hc *http.Client, httpAddr, name string) float64 {
	t.Helper()
	resp, err := hc.Get("https://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// floodReport is a valid report of about 4 MiB: for each live route, 256
// top keys of 4000 bytes.
func floodReport(routes []*api.RouteDescriptor, cfg *api.Config, reporter string, window uint64) *api.ReportRequest {
	col := &api.ReportColumn{WindowStartMs: window, StepMs: cfg.GetStepMs(), Buckets: cfg.GetBuckets(), WriteWeight: cfg.GetWriteWeight(), ReadWeight: cfg.GetReadWeight()}
	for _, r := range routes {
		row := &api.ReportRow{RouteId: r.GetRouteId(), Reads: 1000, Writes: 1000, SampleRate: 1,
			Buckets: make([]uint64, catalog.NewLayout(r.GetStart(), r.GetEnd(), int(cfg.GetBuckets())).K())}
		for k := range 256 {
			key := []byte(fmt.Sprintf("%s%s-%04d-", r.GetStart(), reporter, k))
			key = append(key, make([]byte, 4000-len(key))...)
			row.TopKeys = append(row.TopKeys, &api.TopKeyCount{Key: key, Count: 1})
		}
		col.Rows = append(col.Rows, row)
	}
	return &api.ReportRequest{ReporterId: reporter, Columns: []*api.ReportColumn{col}}
}

// 64 reporters send 4 MiB reports at once, three rounds: the leader admits
// them against its report budget, every report is counted or refused with
// ResourceExhausted (and then resent until counted), and the leader's peak
// RSS stays under 1 GiB.
func TestIntegrationReportFloodStaysBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs hotsplitd processes")
	}
	p, certs := startOne(t, "--autoSplitStep", "1s", "--initialSplits", "b,c,d")
	cl := certs.adminClient(t, client.Config{MaxRetries: -1, RequestTimeout: 20 * time.Second}, p.grpc)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	list, err := cl.ListRoutes(ctx, &api.ListRoutesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfgResp, err := cl.GetConfig(ctx, &api.GetConfigRequest{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := cfgResp.GetConfig()
	base := procStatus(t, p.cmd.Process.Pid, "VmRSS")

	const reporters, rounds = 64, 3
	var counted, refused atomic.Int64
	for round := range rounds {
		step := cfg.GetStepMs()
		window := uint64(time.Now().UnixMilli()) / step * step
		var wg sync.WaitGroup
		errs := make(chan error, reporters)
		for i := range reporters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := floodReport(list.GetRoutes(), cfg, fmt.Sprintf("admin/flood-%d", i), window)
				for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
					_, err := cl.Report(ctx, req)
					switch status.Code(err) {
					case codes.OK:
						counted.Add(1)
						return
					case codes.ResourceExhausted:
						refused.Add(1)
						select {
						case <-time.After(backoff):
							continue
						case <-ctx.Done():
						}
					}
					errs <- fmt.Errorf("round %d reporter %d: %v", round, i, err)
					return
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	hwm := procStatus(t, p.cmd.Process.Pid, "VmHWM")
	heap := metric(t, certs.adminHTTP(t), p.http, "go_memstats_heap_inuse_bytes")
	t.Logf("%d reports of %d bytes counted, %d refusals (ResourceExhausted, resent); leader RSS before %d MiB, peak %d MiB, heap in use after %.0f MiB",
		counted.Load(), proto.Size(floodReport(list.GetRoutes(), cfg, "flood/0", 0)), refused.Load(), base>>20, hwm>>20, heap/(1<<20))
	if counted.Load() != reporters*rounds {
		t.Fatalf("%d of %d reports counted", counted.Load(), reporters*rounds)
	}
	if hwm > 1<<30 {
		t.Fatalf("leader peak RSS %d MiB exceeds 1 GiB", hwm>>20)
	}
}

// A flood of idle connections is capped per listener: the excess is closed
// at accept and counted, the node keeps serving once the flood ends, and
// its raft and HTTP listeners are not affected.
func TestIntegrationConnectionFloodIsCapped(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: builds and runs hotsplitd processes")
	}
	const limit, flood = 200, 600
	raiseFileLimit(t, flood+200)
	p, certs := startOne(t, "--maxConnections", strconv.Itoa(limit))
	_, hotsplitctl := binaries(t)
	hc := certs.adminHTTP(t)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := net.DialTimeout("tcp", p.grpc, 2*time.Second)
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		conns = append(conns, c)
	}
	testutil.Eventually(t, 10*time.Second, "the excess refused", func() error {
		refusedN := metric(t, hc, p.http, `hotsplit_connections_refused_total{listener="grpc"}`)
		open := metric(t, hc, p.http, `hotsplit_connections_open{listener="grpc"}`)
		if open > limit || refusedN < flood-limit {
			return fmt.Errorf("open %v (cap %d), refused %v of %d", open, limit, refusedN, flood)
		}
		return nil
	})
	for _, c := range conns {
		c.Close()
	}
	conns = nil
	testutil.Eventually(t, 10*time.Second, "served again after the flood", func() error {
		_, err := ctl(t, hotsplitctl, certs.adminEnv(), p.grpc, "routes", "list")
		return err
	})
}

// raiseFileLimit lifts the soft file-descriptor limit to at least n, or
// skips when the hard limit is lower.
func raiseFileLimit(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("getrlimit: %v", err)
	}
	if lim.Cur >= n {
		return
	}
	if lim.Max < n {
		t.Skipf("file-descriptor hard limit %d below %d", lim.Max, n)
	}
	lim.Cur = n
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("setrlimit: %v", err)
	}
}
