package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// writeLog records when each successful write completed.
type writeLog struct {
	mu   sync.Mutex
	done []time.Time
}

func (w *writeLog) add(t time.Time) {
	w.mu.Lock()
	w.done = append(w.done, t)
	w.mu.Unlock()
}

// firstAfter is the first completion at or after t.
func (w *writeLog) firstAfter(t time.Time) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	i, _ := slices.BinarySearchFunc(w.done, t, func(a, b time.Time) int { return a.Compare(b) })
	if i == len(w.done) {
		return time.Time{}, false
	}
	return w.done[i], true
}

// writeLoop splits the last route at increasing keys, one write at a time,
// as fast as the cluster takes them, until ctx ends: a client writing
// through every fault, with the package client's retry policy.
func writeLoop(ctx context.Context, cl *client.Client, log *writeLog) {
	route := uint64(0)
	for i := 1; ctx.Err() == nil; i++ {
		key := []byte(fmt.Sprintf("k%08d", i))
		if route == 0 {
			r, err := cl.GetRoute(ctx, &api.GetRouteRequest{Key: key})
			if err != nil {
				i--
				continue
			}
			route = r.GetRoute().GetRouteId()
		}
		resp, err := cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: route, SplitKey: key})
		if err != nil {
			route = 0 // applied or not, look the route up again
			continue
		}
		log.add(time.Now())
		route = resp.GetRight().GetRouteId()
	}
}

var leaderReadyLine = regexp.MustCompile(`^time=(\S+) level=INFO msg="leader ready"`)

// leaderReadyAfter is the earliest "leader ready" line of any log after t.
func leaderReadyAfter(t *testing.T, logs []string, after time.Time) (time.Time, bool) {
	var best time.Time
	for _, path := range logs {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			m := leaderReadyLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			at, err := time.Parse(time.RFC3339Nano, m[1])
			if err == nil && at.After(after) && (best.IsZero() || at.Before(best)) {
				best = at
			}
		}
		f.Close()
	}
	return best, !best.IsZero()
}

type failoverSample struct {
	kind         string
	leader       string
	toReady      time.Duration // fault -> a new leader ready (raft's part)
	readyToWrite time.Duration // leader ready -> first successful write
}

// TestLongFailoverBenchmark measures, on three processes with raft's
// default timing (1 s heartbeat and election timeouts), 10 pauses
// (SIGSTOP) and 10 kills (SIGKILL) of the leader under a client writing
// without pause: raft's time from the fault to a ready leader, and the
// client's from that leader being ready to its first successful write
// (the goal: median <= 300 ms, p90 <= 1 s). The figures go into
// docs/benchmarks.md; this is not a CI gate.
func TestLongFailoverBenchmark(t *testing.T) {
	skipUnlessLong(t)
	hotsplitd, hotsplitctl := binaries(t)
	dir := t.TempDir()
	certs := makeCerts(t, hotsplitctl, filepath.Join(dir, "certs"), "n1", "n2", "n3")
	raftDefaults := []string{"--raftHeartbeatTimeout", "1s", "--raftElectionTimeout", "1s", "--raftLeaderLeaseTimeout", "500ms", "--rateLimitMutations", "0"}
	procs := map[string]*proc{}
	ids := []string{"n1", "n2", "n3"}
	var logs []string
	for _, id := range ids {
		procs[id] = &proc{id: id, dataDir: filepath.Join(dir, id), raft: freePort(t), grpc: freePort(t), http: freePort(t), logPath: filepath.Join(dir, id+".log"),
			args: append(certs.nodeArgs(id), raftDefaults...)}
		logs = append(logs, procs[id].logPath)
	}
	procs["n1"].args = append(slices.Clone(procs["n1"].args), "--bootstrap")
	procs["n2"].args = append(slices.Clone(procs["n2"].args), "--join", procs["n1"].grpc)
	procs["n3"].args = append(slices.Clone(procs["n3"].args), "--join", procs["n1"].grpc)
	t.Cleanup(func() {
		for _, id := range ids {
			if p := procs[id]; p.cmd != nil && p.cmd.ProcessState == nil {
				p.cmd.Process.Signal(syscall.SIGCONT)
			}
			procs[id].stop()
		}
	})
	procs["n1"].start(t, hotsplitd)
	for _, id := range ids[1:] {
		admit(t, hotsplitctl, certs.adminEnv(), procs["n1"].grpc, procs[id])
		procs[id].start(t, hotsplitd)
	}
	cl := certs.adminClient(t, client.Config{RequestTimeout: 15 * time.Second}, procs["n1"].grpc, procs["n2"].grpc, procs["n3"].grpc)
	defer cl.Close()
	healthy := func() string {
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
		return leader
	}
	healthy()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wl := &writeLog{}
	go writeLoop(ctx, cl, wl)

	var samples []failoverSample
	for round := range 20 {
		kind := "kill"
		if round%2 == 0 {
			kind = "pause"
		}
		leader := healthy()
		time.Sleep(2 * time.Second) // writes flowing at the steady state
		p := procs[leader]
		fault := time.Now()
		if kind == "kill" {
			p.kill9(t)
		} else if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		var ready, write time.Time
		testutil.Eventually(t, 30*time.Second, "a new leader ready and a write after it", func() error {
			var ok bool
			if ready, ok = leaderReadyAfter(t, logs, fault); !ok {
				return fmt.Errorf("no leader ready yet")
			}
			if write, ok = wl.firstAfter(ready); !ok {
				return fmt.Errorf("no write since the leader was ready at %v", ready)
			}
			return nil
		})
		s := failoverSample{kind: kind, leader: leader, toReady: ready.Sub(fault), readyToWrite: write.Sub(ready)}
		samples = append(samples, s)
		t.Logf("%-5s %s: leader ready %v after the fault, first write %v after that", kind, leader, s.toReady.Round(time.Millisecond), s.readyToWrite.Round(time.Millisecond))
		if kind == "kill" {
			p.start(t, hotsplitd)
		} else if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	stop()
	for _, kind := range []string{"pause", "kill"} {
		var toReady, toWrite []time.Duration
		for _, s := range samples {
			if s.kind == kind {
				toReady, toWrite = append(toReady, s.toReady), append(toWrite, s.readyToWrite)
			}
		}
		t.Logf("%s x%d: fault -> leader ready median %v p90 %v; leader ready -> first write median %v p90 %v max %v",
			kind, len(toWrite), pct(toReady, 50), pct(toReady, 90), pct(toWrite, 50), pct(toWrite, 90), pct(toWrite, 100))
	}
	var lines []string
	for _, s := range samples {
		lines = append(lines, fmt.Sprintf("%s %d %d", s.kind, s.toReady.Milliseconds(), s.readyToWrite.Milliseconds()))
	}
	t.Logf("raw (kind, fault->ready ms, ready->write ms):\n%s", strings.Join(lines, "\n"))
}

// pct is the p-th percentile (nearest rank) of ds.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(time.Millisecond)
}
