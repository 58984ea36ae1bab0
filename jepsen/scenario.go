//go:build jepsen

package jepsen

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/jepsen/checker"
	"github.com/hotsplit/hotsplit/jepsen/cluster"
	"github.com/hotsplit/hotsplit/jepsen/history"
)

// Scenario is one jepsen run's shape.
type Scenario struct {
	Name  string
	Nodes int
	// Window bounds the workload and the faults; Ops bounds the client
	// calls (whichever ends first).
	Window time.Duration
	Ops    int
	Faults []FaultKind
	// Timing of the faults (zero: DefaultTiming).
	Timing Timing
	// Clients builds the worker specs once the cluster is up.
	Clients func(c *cluster.Cluster, leader *cluster.Node) []ClientSpec
	// MaxRoutes stops manual splits once a worker saw this many routes
	// (every read must fit one ListRoutes page, and every node's delta
	// history the whole run).
	MaxRoutes int
	// Controls, when set, are turned on on every node before any traffic:
	// a negative control, which the checker must catch.
	Controls *cluster.Controls
	// CaughtAbout, for a negative control, is what the violation that
	// catches it must name (e.g. "merge"); "" accepts any violation of the
	// checks the test names.
	CaughtAbout string
	// Config, when set, is sent with SetConfig before any traffic (the
	// detector settings hotsplitd has no flags for, e.g. the merge
	// settings); the run does not start unless it applied.
	Config *api.ConfigPatch
	// Args go to every node; BootstrapArgs to the first; Env is added to
	// every node's environment.
	Args, BootstrapArgs, Env []string
	// Auto drives automatic splits (the simulator and the step-1
	// failpoint); nil for manual-only scenarios.
	Auto *AutoSplit
	// SkewCheck: at the end every clock is healed, and after skewSettle
	// every node's HLC − wall must be within skewBound.
	SkewCheck bool
	// MaxStampAhead, when set, bounds how far any command's HLC may run
	// ahead of the wall clock of the leader that appended it.
	MaxStampAhead time.Duration
}

// The end-of-run skew check (docs/design.md#trust-and-integrity): taken 2 × the largest nemesis
// clock offset + one fence window after the last clock heal, against each
// node's own clock; the bound is one fence window (the default 1 s) + 1 s.
const (
	skewSettle = 2*MaxClockOffset + time.Second
	skewBound  = 2 * time.Second
)

// baseArgs keep every node's raft log complete (no snapshot ever truncates
// it during a run) and make failover quick.
var baseArgs = []string{
	"--raftHeartbeatTimeout", "300ms", "--raftElectionTimeout", "300ms", "--raftLeaderLeaseTimeout", "150ms",
	"--raftSnapshotThreshold", "1000000000", "--raftTrailingLogs", "1000000000", "--raftSnapshotInterval", "24h",
}

// Result is what a run produced.
type Result struct {
	Seed    uint64
	Dir     string
	Report  *checker.Report
	Elapsed time.Duration
	Plan    Plan
	Events  []string
	// Findings are scenario-level acceptance failures (e.g. the automatic
	// split scenario did not interrupt a two-step op); they fail a clean
	// run like violations do.
	Findings []string
	// Notes are informative lines for the summary.
	Notes []string
}

// Passed reports a clean run: no violation and no finding.
func (r *Result) Passed() bool { return r.Report != nil && r.Report.OK() && len(r.Findings) == 0 }

// Summary is the run's report for the test log.
func (r *Result) Summary(sc Scenario) string {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s: seed %d, %d nodes, %.1fs\n", sc.Name, r.Seed, sc.Nodes, r.Elapsed.Seconds())
	fmt.Fprintf(&b, "faults planned: %s\n", r.Plan)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "%s\n", n)
	}
	if r.Report != nil {
		b.WriteString(r.Report.Summary())
	}
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "FINDING: %s\n", f)
	}
	return b.String()
}

// Env is what every scenario of one suite shares.
type Env struct {
	Binary string
	// Base is the directory all runs write under; a run's directory is
	// Base/<scenario>-seed<seed>.
	Base string
	Logf func(format string, args ...any)
}

// Run runs one scenario end to end and judges it. An error means the run
// could not be carried out or judged.
func Run(ctx context.Context, env Env, sc Scenario, seed uint64) (*Result, error) {
	t0 := time.Now()
	res := &Result{Seed: seed, Dir: filepath.Join(env.Base, fmt.Sprintf("%s-seed%d", sc.Name, seed))}
	if err := os.RemoveAll(res.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(res.Dir, 0o755); err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x6a65707365))
	tm := sc.Timing
	if tm == (Timing{}) {
		tm = DefaultTiming
	}
	res.Plan = NewPlan(rng, sc.Faults, tm, sc.Window, sc.Nodes)
	env.Logf("%s: seed %d; fault plan: %s", sc.Name, seed, res.Plan)

	sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	c, err := cluster.Start(sctx, cluster.Config{Binary: env.Binary, Dir: res.Dir, Nodes: sc.Nodes,
		Args: append(append([]string{}, baseArgs...), sc.Args...), BootstrapArgs: sc.BootstrapArgs, Env: sc.Env})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("start cluster: %w", err)
	}
	defer c.Close()
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	leader, err := c.WaitLeader(lctx)
	cancel()
	if err != nil {
		return nil, err
	}
	if sc.Controls != nil {
		for _, n := range c.Nodes {
			if err := n.SetControls(ctx, *sc.Controls); err != nil {
				return nil, err
			}
		}
		env.Logf("%s: negative control on every node: %+v", sc.Name, *sc.Controls)
	}
	if sc.Config != nil {
		if err := setConfig(ctx, c, sc.Config); err != nil {
			return nil, err
		}
		env.Logf("%s: config set before any traffic: %v", sc.Name, sc.Config)
	}

	rec := history.NewRecorder()
	nem := &nemesis{c: c, logf: env.Logf, rec: rec}
	wctx, stop := context.WithTimeout(ctx, sc.Window)
	defer stop()
	start := time.Now()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); nem.run(wctx, res.Plan, start) }()
	var auto *autoRun
	if sc.Auto != nil {
		auto = startAuto(wctx, c, *sc.Auto, seed, start, env.Logf)
	}
	// The budget spreads over 90% of the window, leaving room to catch up
	// after faults.
	w := &workload{rec: rec, budget: int64(sc.Ops), maxRoute: sc.MaxRoutes, start: start, interval: sc.Window * 9 / 10 / time.Duration(max(sc.Ops, 1))}
	werr := w.run(wctx, sc.Clients(c, leader), seed)
	if auto != nil {
		auto.wait() // the simulator's phases end within the window
	}
	stop()
	wg.Wait()
	if werr != nil {
		return nil, werr
	}
	res.Events = nem.Events()
	res.Findings = append(res.Findings, nem.Findings()...)
	if auto != nil {
		res.Events = append(res.Events, auto.events()...)
	}
	ops := rec.Ops()
	res.Notes = append(res.Notes, fmt.Sprintf("workload: %d client ops in %.1fs", len(ops), time.Since(start).Seconds()))

	fo := finishOpts{damaged: nem.Damaged()}
	if sc.SkewCheck {
		fo.skewSettle = skewSettle
	}
	in, ferr := finish(ctx, c, env.Logf, fo)
	if ferr != nil {
		writeEvents(res)
		return res, fmt.Errorf("%s: collecting the results (artifacts in %s): %w", sc.Name, res.Dir, ferr)
	}
	in.Ops = ops
	in.Checksums = true
	in.MaxStampAheadMs = sc.MaxStampAhead.Milliseconds()
	rep, err := checker.Check(in)
	if err != nil {
		writeEvents(res)
		return res, fmt.Errorf("%s: judging the run (artifacts in %s): %w", sc.Name, res.Dir, err)
	}
	res.Report = rep
	if auto != nil && rep.Replay != nil {
		res.Findings = append(res.Findings, auto.accept(rep.Replay, c)...)
		res.Notes = append(res.Notes, auto.notes()...)
	}
	res.Elapsed = time.Since(t0)
	writeEvents(res)
	if err := checker.WriteArtifacts(res.Dir, in, rep); err != nil {
		return res, fmt.Errorf("write artifacts to %s: %w", res.Dir, err)
	}
	return res, nil
}

// setConfig sends patch with SetConfig as an admin, with a request id, and
// retries the same request until it applied (at most 20 s).
func setConfig(ctx context.Context, c *cluster.Cluster, patch *api.ConfigPatch) error {
	creds, err := c.ClientTLS("jepsen-setup", "admin")
	if err != nil {
		return err
	}
	cl, err := client.New(client.Config{Endpoints: c.Endpoints(), Actor: "jepsen-setup", RequestTimeout: 3 * time.Second, TLS: creds})
	if err != nil {
		return err
	}
	defer cl.Close()
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req := &api.SetConfigRequest{Patch: patch, RequestId: client.NewRequestID()}
	for {
		_, err := cl.SetConfig(sctx, req)
		if err == nil {
			return nil
		}
		if errors.Is(err, client.ErrNotApplied) && !errors.Is(err, client.ErrUnknownOutcome) && status.Code(err) != codes.Unavailable {
			return fmt.Errorf("set config %v: refused: %w", patch, err)
		}
		if !sleepUntil(sctx, time.Now().Add(200*time.Millisecond)) {
			return fmt.Errorf("set config %v: %w (last: %v)", patch, sctx.Err(), err)
		}
	}
}

func writeEvents(res *Result) {
	text := "plan (seed " + fmt.Sprint(res.Seed) + "): " + res.Plan.String() + "\n" + strings.Join(res.Events, "\n") + "\n"
	os.WriteFile(filepath.Join(res.Dir, "nemesis.txt"), []byte(text), 0o644)
}

// errNoConvergence: the healed cluster did not come back together in time.
var errNoConvergence = errors.New("cluster did not converge after healing")
