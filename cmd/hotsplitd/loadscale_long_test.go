package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/loadgen"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// loadScaleCase is one configuration of TestLongLoadScaleProcesses.
type loadScaleCase struct {
	shape     loadgen.Shape
	reporters int
	tls       bool
}

func (c loadScaleCase) String() string {
	sec := "plaintext"
	if c.tls {
		sec = "tls"
	}
	return fmt.Sprintf("%v/reporters=%d/%s", c.shape, c.reporters, sec)
}

// loadScaleCases are the configurations to run: all of them, or those
// HOTSPLIT_LOADSCALE names ("v1/reporters=100/tls,v2/reporters=50/plaintext").
func loadScaleCases(t *testing.T) []loadScaleCase {
	var all []loadScaleCase
	for _, tls := range []bool{true, false} {
		for _, shape := range []loadgen.Shape{loadgen.V1, loadgen.V2} {
			for _, n := range []int{50, 100} {
				all = append(all, loadScaleCase{shape, n, tls})
			}
		}
	}
	want := os.Getenv("HOTSPLIT_LOADSCALE")
	if want == "" {
		return all
	}
	var out []loadScaleCase
	for _, c := range all {
		if slices.Contains(strings.Split(want, ","), c.String()) {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		t.Fatalf("HOTSPLIT_LOADSCALE=%q names none of %v", want, all)
	}
	return out
}

// TestLongLoadScaleProcesses measures the leader alone: three hotsplitd
// processes (10,000 routes, 1 s step, 500 ms grace), and N reporters in
// this process sending every route each step (internal/loadgen's rows,
// declared sizes, one connection each), with and without TLS. Per case:
// one warm-up round and 5 measured rounds of 8 columns; per round the
// leader's CPU seconds (utime + stime from /proc) over the round ÷ the
// rows committed in it, and at the end the leader's peak RSS (VmHWM).
// The report budget is sized for the fleet: every report in flight at
// once. Not a CI gate: the figures go to docs/benchmarks.md. Run:
//
//	HOTSPLIT_LONG=1 go test -run TestLongLoadScaleProcesses -v -timeout 60m ./cmd/hotsplitd/
//
// HOTSPLIT_LOADSCALE picks cases ("v1/reporters=100/tls,…");
// HOTSPLIT_LOADSCALE_PROFILE=dir saves a CPU profile of the leader there.
func TestLongLoadScaleProcesses(t *testing.T) {
	skipUnlessLong(t)
	for _, c := range loadScaleCases(t) {
		t.Run(c.String(), func(t *testing.T) { loadScaleProcesses(t, c) })
	}
}

func loadScaleProcesses(t *testing.T, c loadScaleCase) {
	const routes, stepMs, columns, rounds = 10_000, 1000, 8, 6 // round 0 warms up
	hotsplitd, hotsplitctl := binaries(t)
	dir := t.TempDir()
	var splits []string
	var splitKeys [][]byte
	for i := 1; i < routes; i++ {
		splits = append(splits, fmt.Sprintf("r%05d", i))
		splitKeys = append(splitKeys, []byte(splits[i-1]))
	}
	cat, err := catalog.New(splitKeys, 1) // what the bootstrap builds
	if err != nil {
		t.Fatal(err)
	}
	rows, err := loadgen.Build(c.shape, cat)
	if err != nil {
		t.Fatal(err)
	}
	// The budget an operator sizes for this fleet: every reporter's report
	// in flight at once, and at least the default.
	budget := max(64<<20, c.reporters*(loadgen.Parts{rows.Encoded[0]}.Len()+64<<10))
	ids := []string{"n1", "n2", "n3"}
	var certs certDir
	if c.tls {
		certs = makeCerts(t, hotsplitctl, filepath.Join(dir, "certs"), ids...)
	}
	procs := map[string]*proc{}
	for _, id := range ids {
		p := &proc{id: id, dataDir: filepath.Join(dir, id), raft: freePort(t), grpc: freePort(t), http: freePort(t), logPath: filepath.Join(dir, id+".log")}
		if c.tls {
			p.args = certs.nodeArgs(id)
		} else {
			p.args = []string{"--insecure"}
		}
		p.args = append(p.args, "--raftHeartbeatTimeout", "1s", "--raftElectionTimeout", "1s", "--raftLeaderLeaseTimeout", "500ms",
			"--reportBudget", strconv.Itoa(budget), "--enablePprof")
		procs[id] = p
	}
	procs["n1"].args = append(procs["n1"].args, "--bootstrap", "--initialSplits", strings.Join(splits, ","),
		"--autoSplitStep", "1s", "--autoSplitThreshold", "60000", "--autoSplit=false")
	procs["n2"].args = append(procs["n2"].args, "--join", procs["n1"].grpc)
	procs["n3"].args = append(procs["n3"].args, "--join", procs["n1"].grpc)
	t.Cleanup(func() {
		for _, id := range ids {
			procs[id].stop()
		}
		if t.Failed() {
			for _, id := range ids {
				b, _ := os.ReadFile(procs[id].logPath)
				// The leadership and raft lines: a lost leader is the usual cause.
				var keep []string
				for _, l := range strings.Split(string(b), "\n") {
					if strings.Contains(l, "raft") || strings.Contains(l, "leader") || strings.Contains(l, "WARN") || strings.Contains(l, "ERROR") {
						keep = append(keep, l)
					}
				}
				t.Logf("--- %s log (raft, leadership, warnings; last 40) ---\n%s", id, strings.Join(keep[max(0, len(keep)-40):], "\n"))
			}
		}
	})
	procs["n1"].start(t, hotsplitd)
	for _, id := range ids[1:] {
		if c.tls {
			admit(t, hotsplitctl, certs.adminEnv(), procs["n1"].grpc, procs[id])
		}
		procs[id].start(t, hotsplitd)
	}
	ccfg := client.Config{RequestTimeout: 10 * time.Second, Insecure: !c.tls}
	var cl *client.Client
	if c.tls {
		cl = certs.adminClient(t, ccfg, procs["n1"].grpc, procs["n2"].grpc, procs["n3"].grpc)
	} else {
		ccfg.Endpoints = []string{procs["n1"].grpc, procs["n2"].grpc, procs["n3"].grpc}
		if cl, err = client.New(ccfg); err != nil {
			t.Fatal(err)
		}
	}
	defer cl.Close()
	var leader string
	testutil.Eventually(t, 60*time.Second, "a healthy cluster of three voters", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		r, err := cl.Health(ctx, &api.HealthRequest{})
		if err != nil {
			return err
		}
		if r.GetStatus() != api.HealthStatus_HEALTH_STATUS_HEALTHY || r.GetVoters() != 3 {
			return fmt.Errorf("%v: %v", r.GetStatus(), r.GetReasons())
		}
		leader = r.GetLeaderId()
		return nil
	})
	lp := procs[leader]
	pid := lp.cmd.Process.Pid

	dial := insecureCreds()
	if c.tls {
		dial = certs.reporterCreds(t)
	}
	conns := make([]*grpc.ClientConn, c.reporters)
	for r := range conns {
		if conns[r], err = grpc.NewClient(lp.grpc, dial); err != nil {
			t.Fatal(err)
		}
		defer conns[r].Close()
	}
	prefix := "admin/"
	if !c.tls {
		prefix = ""
	}
	first := uint64(time.Now().UnixMilli())/stepMs*stepMs + 2*stepMs
	windows := rounds * columns
	// counted[k]: reporters whose report of window k was acknowledged as
	// counted; refused: calls that failed (each is resent).
	counted := make([]atomic.Int64, windows)
	var refused, late atomic.Int64
	var wg sync.WaitGroup
	for r := range c.reporters {
		wg.Go(func() {
			enc := rows.Encoded[r%loadgen.Variants]
			for k := range windows {
				w := first + uint64(k)*stepMs
				time.Sleep(time.Until(loadgen.SendAt(w, stepMs, r, c.reporters)))
				head, err := loadgen.Head(fmt.Sprintf("%sscale-%d", prefix, r), w, stepMs, enc)
				if err != nil {
					t.Error(err)
					return
				}
				resp, ok := loadgen.Send(conns[r], loadgen.Parts{head, enc}, func(err error) {
					if refused.Add(1) <= 3 {
						t.Logf("reporter %d window %d: %v", r, k, err)
					}
				})
				switch {
				case !ok:
				case len(resp.GetLateWindowStarts()) > 0:
					if k >= columns { // round 0 warms up: its first column waits for nobody
						late.Add(1)
					}
				case slices.Contains(resp.GetAckedWindowStarts(), w):
					counted[k].Add(1)
				}
			}
		})
	}
	// Leader CPU at the end of each round: the reports of a round's last
	// window are answered about step + grace after it ends.
	cpuAt := make([]float64, rounds+1)
	cpuAt[0] = procCPUSeconds(t, pid)
	// The followers' and the reporters' (this process), for context: what
	// the two cores had left for the leader.
	pids := map[string]int{"reporters": os.Getpid()}
	for _, id := range ids {
		if id != leader {
			pids[id] = procs[id].cmd.Process.Pid
		}
	}
	cpu0 := map[string]float64{}
	for id, p := range pids {
		cpu0[id] = procCPUSeconds(t, p)
	}
	t0 := time.Now()
	for round := 1; round <= rounds; round++ {
		if dir := os.Getenv("HOTSPLIT_LOADSCALE_PROFILE"); round == 2 && dir != "" {
			// A 5 s CPU profile of the leader during the second round.
			go leaderProfile(t, c, certs, lp.http, filepath.Join(dir, strings.ReplaceAll(c.String(), "/", "_")+".pprof"))
		}
		end := time.UnixMilli(int64(first + uint64(round*columns)*stepMs)).Add(1200 * time.Millisecond)
		time.Sleep(time.Until(end))
		cpuAt[round] = procCPUSeconds(t, pid)
	}
	var otherCPU []string
	for id, c0 := range cpu0 {
		otherCPU = append(otherCPU, fmt.Sprintf("%s %.2f", id, (procCPUSeconds(t, pids[id])-c0)/time.Since(t0).Seconds()))
	}
	slices.Sort(otherCPU)
	wg.Wait()
	hwm := procStatus(t, pid, "VmHWM")

	var perRow, cores []float64
	for round := 2; round <= rounds; round++ {
		n := int64(0)
		for k := (round - 1) * columns; k < round*columns; k++ {
			n += counted[k].Load()
		}
		sec := cpuAt[round] - cpuAt[round-1]
		perRow = append(perRow, sec*1e6/float64(n*int64(rows.Count)))
		cores = append(cores, sec/float64(columns*stepMs/1000))
	}
	short := 0
	for k := columns; k < windows; k++ {
		if counted[k].Load() != int64(c.reporters) {
			short++
		}
	}
	slices.Sort(perRow)
	slices.Sort(cores)
	t.Logf("%v: %d reporters × %d rows (%d with evidence, %d bytes a report), budget %d MiB; leader %s: CPU per round of %d columns %.2f cores (median of %d; all %v), per row %.3f µs (median; all %v), peak RSS %d MiB; %d refusals, %d late, %d of %d measured windows not counting every reporter; other processes' CPU (cores) %s",
		c, c.reporters, rows.Count, rows.WithEvidence, loadgen.Parts{nil, rows.Encoded[0]}.Len(), budget>>20, leader, columns,
		cores[len(cores)/2], len(cores), cores, perRow[len(perRow)/2], perRow, hwm>>20, refused.Load(), late.Load(), short, windows-columns, strings.Join(otherCPU, ", "))
	if refused.Load() > 0 || late.Load() > 0 || short > 0 {
		t.Errorf("%d reports refused, %d late, %d windows short of reporters", refused.Load(), late.Load(), short)
	}
}

// leaderProfile saves a 5 s CPU profile of the node serving HTTP on addr.
func leaderProfile(t *testing.T, c loadScaleCase, certs certDir, addr, path string) {
	hc, scheme := &http.Client{Timeout: 30 * time.Second}, "http"
	if c.tls {
		hc, scheme = certs.adminHTTP(t), "https"
		hc.Timeout = 30 * time.Second
	}
	resp, err := hc.Get(scheme + "://" + addr + "/debug/pprof/profile?seconds=5")
	if err != nil {
		t.Logf("profile: %v", err)
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil {
		err = os.WriteFile(path, b, 0o644)
	}
	t.Logf("leader CPU profile %s (%d bytes): %v", path, len(b), err)
}

// procCPUSeconds is a process's user + system CPU time so far
// (/proc/PID/stat fields 14 and 15, in clock ticks of 1/100 s).
func procCPUSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		t.Fatalf("/proc/%d/stat: %q", pid, b)
	}
	return (utime + stime) / 100
}

func insecureCreds() grpc.DialOption {
	return grpc.WithTransportCredentials(insecure.NewCredentials())
}

// reporterCreds is the admin's client TLS as a gRPC dial option.
func (d certDir) reporterCreds(t *testing.T) grpc.DialOption {
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
	return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}))
}
