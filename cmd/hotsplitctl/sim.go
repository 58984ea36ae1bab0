package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/pki"
	"github.com/hotsplit/hotsplit/sim"
)

// simFlags are the flags of `hotsplitctl sim`.
type simFlags struct {
	workload   string
	nodes      int
	rate       int
	duration   time.Duration
	seed       uint64
	runID      string
	identity   string
	progress   bool
	keySpace   uint64
	writeFrac  float64
	hotShare   float64
	hotWidth   float64
	skew       float64
	shiftEvery time.Duration
	prefixLen  int
	hotKeys    uint64
	pairShare  float64
	incShare   float64
	amplitude  float64
	oscEvery   time.Duration
}

// workloadFlags names the flags that only some workloads use.
var workloadFlags = map[string][]string{
	"hot-share":        {sim.HotKey, sim.HotRange, sim.Shift, sim.Incidental, sim.Oscillate},
	"hot-width":        {sim.HotRange, sim.Shift, sim.Incidental, sim.Oscillate},
	"skew":             {sim.Zipf},
	"shift-every":      {sim.Shift},
	"prefix-len":       {sim.Narrow},
	"hot-keys":         {sim.Narrow},
	"pair-share":       {sim.Pair},
	"incidental-share": {sim.Incidental},
	"amplitude":        {sim.Oscillate},
	"oscillate-every":  {sim.Oscillate},
}

func (a *app) simCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Put a simulated data plane's load on the cluster",
		Long: `Run a simulated data plane: --nodes data nodes in this process, each with a
keyviz sampler and reporter, serve a generated workload at --rate operations
per second for --duration, routing every operation by the cluster's live
catalog (followed with WatchRoutes) and reporting the load columns to the
cluster, which may then split hot routes. Operation i is served by node
i mod --nodes; reporters are named sim-<run id>-<node>.

The workload is reproducible: the sequence of keys and kinds is a function of
--workload, its options and --seed alone. Keys are user:%08d over --key-space
keys (more digits for more than 10^8 keys).

Workloads:
  uniform   every key equally likely
  zipf      key of popularity rank k drawn with probability ∝ (k+1)^-skew;
            ranks scattered over the key space
  hotrange  --hot-share of the operations uniform in a range of --hot-width
            of the key space, the rest uniform
  hotkey    --hot-share of the operations on one key, the rest uniform
  shift     hotrange whose range moves every --shift-every
  narrow    --hot-keys keys under a common prefix of --prefix-len bytes, all
            the load uniform over them (keys are the prefix and an index)
  pair      two adjacent keys with --pair-share of the operations each, the
            rest uniform
  incidental  hotrange read-only, plus one key in it written by
            --incidental-share of the operations
  oscillate hotrange whose share alternates between hot-share·(1±amplitude)
            every --oscillate-every

The first operation waits for the cluster's next step boundary (see
'hotsplitctl autosplit config get'), so that every column the nodes report
covers a whole step. A progress line on stderr is updated every second. At
the end, the run waits until the column holding the last operation has closed
(at the next step boundary) and been acknowledged, then prints a summary on
stdout (-o json for a JSON object). Ctrl-C stops it at once and prints the
summary.`,
		Example: `  hotsplitctl sim --workload hotkey --nodes 3 --rate 20000 --duration 60s
  hotsplitctl sim --workload zipf --skew 1.3 --rate 50000 --duration 5m --seed 7
  hotsplitctl sim --workload shift --shift-every 20s --rate 20000 --duration 2m -o json`,
		Args: exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runSim(cmd, f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.workload, "workload", "", "workload: "+strings.Join(sim.WorkloadNames(), ", ")+" (required)")
	fl.IntVar(&f.nodes, "nodes", 3, fmt.Sprintf("simulated data nodes, 1 to %d", sim.MaxNodes))
	fl.IntVar(&f.rate, "rate", 0, fmt.Sprintf("operations per second, 1 to %d (required)", sim.MaxRate))
	fl.DurationVar(&f.duration, "duration", 0, fmt.Sprintf("how long to issue operations, at most %v (required)", sim.MaxDuration))
	fl.Uint64Var(&f.seed, "seed", 1, "seed of the operation sequence")
	fl.StringVar(&f.runID, "run-id", "", "run id in the reporter ids (default: random)")
	fl.StringVar(&f.identity, "identity", "", "the name you authenticate as (a reporter reports only under it): default the CN of --cert, else "+sim.DefaultIdentity)
	fl.BoolVar(&f.progress, "progress", true, "show a progress line on stderr")
	def := sim.DefaultWorkloadOptions()
	fl.Uint64Var(&f.keySpace, "key-space", def.KeySpace, "number of distinct keys")
	fl.Float64Var(&f.writeFrac, "write-fraction", def.WriteFraction, "share of operations that write, 0 to 1")
	fl.Float64Var(&f.hotShare, "hot-share", 0, fmt.Sprintf("share of operations on the hot key or range (default %v for hotkey, %v for hotrange and shift)",
		sim.DefaultHotKeyShare, sim.DefaultHotRangeShare))
	fl.Float64Var(&f.hotWidth, "hot-width", def.HotWidth, "hot range's share of the key space (hotrange, shift)")
	fl.Float64Var(&f.skew, "skew", def.Skew, "zipf exponent, above 1")
	fl.DurationVar(&f.shiftEvery, "shift-every", def.ShiftEvery, "how long the shift workload's hot range stays in place")
	fl.IntVar(&f.prefixLen, "prefix-len", def.PrefixLen, "narrow: bytes of the hot keys' common prefix")
	fl.Uint64Var(&f.hotKeys, "hot-keys", def.HotKeys, "narrow: number of hot keys")
	fl.Float64Var(&f.pairShare, "pair-share", def.PairShare, "pair: share of operations on each of the two keys, up to 0.5")
	fl.Float64Var(&f.incShare, "incidental-share", def.IncidentalShare, "incidental: share of operations that write the incidental key")
	fl.Float64Var(&f.amplitude, "amplitude", def.Amplitude, "oscillate: relative swing of the hot range's share, 0 to 1")
	fl.DurationVar(&f.oscEvery, "oscillate-every", def.OscillateEvery, "oscillate: how long each phase lasts")
	return cmd
}

// parseSim checks the flags and builds the workload; nothing is sent.
func (f simFlags) parseSim(cmd *cobra.Command) (sim.Workload, error) {
	fl := cmd.Flags()
	switch {
	case !fl.Changed("workload"):
		return nil, usageErrorf(cmd, "--workload is required: one of %s", strings.Join(sim.WorkloadNames(), ", "))
	case !fl.Changed("rate"):
		return nil, usageErrorf(cmd, "--rate is required: operations per second, 1 to %d", sim.MaxRate)
	case f.rate < 1 || f.rate > sim.MaxRate:
		return nil, usageErrorf(cmd, "--rate %d: want 1 to %d operations per second", f.rate, sim.MaxRate)
	case !fl.Changed("duration"):
		return nil, usageErrorf(cmd, "--duration is required: how long to run, e.g. 60s")
	case f.duration <= 0 || f.duration > sim.MaxDuration:
		return nil, usageErrorf(cmd, "--duration %v: want more than 0 and at most %v", f.duration, sim.MaxDuration)
	case f.nodes < 1 || f.nodes > sim.MaxNodes:
		return nil, usageErrorf(cmd, "--nodes %d: want 1 to %d", f.nodes, sim.MaxNodes)
	}
	w, err := sim.ParseWorkload(f.workload, sim.WorkloadOptions{
		KeySpace:        f.keySpace,
		WriteFraction:   f.writeFrac,
		HotShare:        f.hotShare,
		HotWidth:        f.hotWidth,
		Skew:            f.skew,
		ShiftEvery:      f.shiftEvery,
		PrefixLen:       f.prefixLen,
		HotKeys:         f.hotKeys,
		PairShare:       f.pairShare,
		IncidentalShare: f.incShare,
		Amplitude:       f.amplitude,
		OscillateEvery:  f.oscEvery,
	})
	if err != nil {
		return nil, usageErr(cmd, err)
	}
	for _, name := range slices.Sorted(maps.Keys(workloadFlags)) {
		users := workloadFlags[name]
		if fl.Changed(name) && !slices.Contains(users, f.workload) {
			return nil, usageErrorf(cmd, "--%s does not apply to --workload %s (only to %s)", name, f.workload, strings.Join(users, ", "))
		}
	}
	return w, nil
}

func (a *app) runSim(cmd *cobra.Command, f simFlags) error {
	w, err := f.parseSim(cmd)
	if err != nil {
		return err
	}
	cl, err := a.client(cmd)
	if err != nil {
		return err
	}
	var logger *slog.Logger
	if a.verbose {
		logger = slog.New(slog.NewTextHandler(a.errOut, nil))
	}
	s, err := sim.New(sim.Config{
		Cluster:  cl,
		Workload: w,
		Nodes:    f.nodes,
		Rate:     f.rate,
		Duration: f.duration,
		Seed:     f.seed,
		RunID:    f.runID,
		Identity: a.simIdentity(f.identity),
		Logger:   logger,
	})
	if err != nil {
		return usageErr(cmd, err)
	}

	stopProgress := func() {}
	if f.progress {
		stopProgress = startProgress(a.errOut, s)
	}
	runErr := s.Run(cmd.Context())
	stopProgress()

	interrupted := errors.Is(runErr, context.Canceled) && cmd.Context().Err() != nil
	if runErr != nil && !interrupted && s.Stats().Ops == 0 {
		return simError(runErr) // nothing ran: the error says it all
	}
	sum := newSimSummary(s, f, interrupted, runErr == nil)
	if a.json() {
		b, err := json.MarshalIndent(sum, "", "  ")
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(a.out, "%s\n", b); err != nil {
			return err
		}
	} else if err := writeSimSummary(a.out, sum); err != nil {
		return err
	}

	if interrupted {
		return nil // Ctrl-C is the normal way to end a run early
	}
	return simError(runErr)
}

// simError maps a failed run to the CLI's errors and exit codes.
func simError(err error) error {
	var ce *client.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return failed("sim: reading the cluster's load config", ce)
	case errors.Is(err, sim.ErrNotFlushed), errors.Is(err, sim.ErrNoCatalog):
		// The cluster did not answer in time: exit 3, like any unavailable
		// cluster.
		return timedOut{err}
	}
	return err
}

// timedOut is an error the cluster's silence caused; it maps to exit code 3.
type timedOut struct{ err error }

func (e timedOut) Error() string   { return e.err.Error() }
func (e timedOut) Unwrap() []error { return []error{e.err, context.DeadlineExceeded} }

// startProgress rewrites one line on w every second until stop is called,
// which writes the line a last time and ends it.
func startProgress(w io.Writer, s *sim.Sim) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	p := &progress{w: w, s: s, lastAt: time.Now()}
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-t.C:
				p.update(now, false)
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		if p.width == 0 && s.Stats().Ops == 0 {
			return // nothing shown, nothing ran: the error will say why
		}
		p.update(time.Now(), true)
		fmt.Fprintln(w)
	}
}

// progress renders the live line. Used by one goroutine at a time.
type progress struct {
	w       io.Writer
	s       *sim.Sim
	lastOps uint64
	lastAt  time.Time
	width   int // of the last line, to blank its tail
}

// update rewrites the line: the rate over the last second, or over the
// whole run in the final line.
func (p *progress) update(now time.Time, final bool) {
	st := p.s.Stats()
	rate := uint64(0)
	switch dt := now.Sub(p.lastAt); {
	case final && st.Elapsed > 0:
		rate = uint64(float64(st.Ops) / st.Elapsed.Seconds())
	case dt > 0 && st.Ops >= p.lastOps:
		rate = uint64(float64(st.Ops-p.lastOps) / dt.Seconds())
	}
	p.lastOps, p.lastAt = st.Ops, now
	var line string
	if st.Phase == sim.PhaseStarting && st.CatalogVersion > 0 && !final {
		line = fmt.Sprintf("starting: catalog v%d (%d routes), waiting for the next step boundary (step %v)",
			st.CatalogVersion, st.Routes, st.Step)
	} else {
		line = fmt.Sprintf("%s %s  ops %d/%d  %d ops/s  catalog v%d (%d routes)  columns acked %d",
			st.Phase, st.Elapsed.Truncate(time.Second), st.Ops, st.Planned, rate, st.CatalogVersion, st.Routes, st.Columns.ColumnsAcked)
	}
	pad := max(p.width-len(line), 0)
	p.width = len(line)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
}

// simSummary is the final report; -o json prints it as is.
type simSummary struct {
	RunID          string           `json:"run_id"`
	Workload       string           `json:"workload"`
	Description    string           `json:"description"`
	Seed           uint64           `json:"seed"`
	Nodes          int              `json:"nodes"`
	Rate           int              `json:"rate"`
	DurationMs     int64            `json:"duration_ms"`
	ElapsedMs      int64            `json:"elapsed_ms"`
	PlannedOps     uint64           `json:"planned_ops"`
	Ops            uint64           `json:"ops"`
	Reads          uint64           `json:"reads"`
	Writes         uint64           `json:"writes"`
	OpsPerSecond   uint64           `json:"ops_per_second"`
	CatalogVersion uint64           `json:"catalog_version"`
	Routes         int              `json:"routes"`
	CatalogUpdates uint64           `json:"catalog_updates"`
	WatchFailures  uint64           `json:"watch_failures"`
	UnknownRoute   uint64           `json:"unknown_route"`
	OpsAcked       uint64           `json:"ops_acked"`
	OpsLate        uint64           `json:"ops_late"`
	OpsRefused     uint64           `json:"ops_refused"`
	Columns        simColumns       `json:"columns"`
	Interrupted    bool             `json:"interrupted"`
	Flushed        bool             `json:"flushed"`
	PerNode        []simNodeSummary `json:"per_node"`
}

type simColumns struct {
	Closed         uint64 `json:"closed"`
	Acked          uint64 `json:"acked"`
	Late           uint64 `json:"late"`
	Dropped        uint64 `json:"dropped"`
	Refused        uint64 `json:"refused"`
	Pending        int    `json:"pending"`
	ReportFailures uint64 `json:"report_failures"`
}

type simNodeSummary struct {
	ReporterID string     `json:"reporter_id"`
	Reads      uint64     `json:"reads"`
	Writes     uint64     `json:"writes"`
	Columns    simColumns `json:"columns"`
}

func newSimSummary(s *sim.Sim, f simFlags, interrupted, flushed bool) simSummary {
	st := s.Stats()
	sum := simSummary{
		RunID: st.RunID, Workload: f.workload, Description: st.Workload, Seed: f.seed, Nodes: f.nodes, Rate: f.rate,
		DurationMs: f.duration.Milliseconds(), ElapsedMs: st.Elapsed.Milliseconds(),
		PlannedOps: st.Planned, Ops: st.Ops, Reads: st.Reads, Writes: st.Writes,
		CatalogVersion: st.CatalogVersion, Routes: st.Routes, CatalogUpdates: st.CatalogUpdates,
		WatchFailures: st.WatchFailures, UnknownRoute: st.UnknownRoute,
		OpsAcked: st.OpsAcked, OpsLate: st.OpsLate, OpsRefused: st.OpsRefused,
		Columns:     columnsOf(st.Columns.ColumnsClosed, st.Columns.ColumnsAcked, st.Columns.ColumnsLate, st.Columns.ColumnsDropped, st.Columns.ColumnsRejected, st.Columns.Pending, st.Columns.ReportFailures),
		Interrupted: interrupted, Flushed: flushed,
	}
	if st.Elapsed > 0 {
		sum.OpsPerSecond = uint64(float64(st.Ops) / st.Elapsed.Seconds())
	}
	for _, n := range st.Nodes {
		r := n.Reporter
		sum.PerNode = append(sum.PerNode, simNodeSummary{ReporterID: n.ReporterID, Reads: n.Reads, Writes: n.Writes,
			Columns: columnsOf(r.ColumnsClosed, r.ColumnsAcked, r.ColumnsLate, r.ColumnsDropped, r.ColumnsRejected, r.Pending, r.ReportFailures)})
	}
	return sum
}

func columnsOf(closed, acked, late, dropped, refused uint64, pending int, failures uint64) simColumns {
	return simColumns{Closed: closed, Acked: acked, Late: late, Dropped: dropped, Refused: refused, Pending: pending, ReportFailures: failures}
}

func writeSimSummary(w io.Writer, s simSummary) error {
	t := newTable(w)
	t.row("workload", s.Description)
	t.row("run", fmt.Sprintf("%s, seed %d, %d nodes", s.RunID, s.Seed, s.Nodes))
	end := "completed"
	switch {
	case s.Interrupted:
		end = "interrupted"
	case s.Ops < s.PlannedOps:
		end = "stopped"
	}
	t.row("ops", fmt.Sprintf("%d of %d in %s (%d ops/s, %s): %d reads, %d writes", s.Ops, s.PlannedOps,
		formatMs(uint64(s.ElapsedMs)), s.OpsPerSecond, end, s.Reads, s.Writes))
	t.row("catalog", fmt.Sprintf("version %d, %d routes (%d versions received, %d watch failures)",
		s.CatalogVersion, s.Routes, s.CatalogUpdates, s.WatchFailures))
	c := s.Columns
	t.row("columns", fmt.Sprintf("%d closed, %d acknowledged (%d late), %d dropped, %d refused, %d pending, %d failed reports",
		c.Closed, c.Acked, c.Late, c.Dropped, c.Refused, c.Pending, c.ReportFailures))
	t.row("committed", fmt.Sprintf("%d ops in acknowledged columns, %d in late columns (dropped by the cluster), %d in refused columns",
		s.OpsAcked, s.OpsLate, s.OpsRefused))
	flushed := "yes: every column holding an operation is settled"
	if !s.Flushed {
		flushed = "no: the last columns were not all acknowledged"
	}
	t.row("flushed", flushed)
	if s.UnknownRoute > 0 {
		t.row("dropped ops", strconv.FormatUint(s.UnknownRoute, 10)+" (route unknown to a sampler)")
	}
	if err := t.flush(); err != nil {
		return err
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return err
	}
	nt := newTable(w, "NODE", "READS", "WRITES", "CLOSED", "ACKED", "LATE", "DROPPED", "REFUSED", "PENDING")
	for _, n := range s.PerNode {
		c := n.Columns
		nt.row(n.ReporterID, strconv.FormatUint(n.Reads, 10), strconv.FormatUint(n.Writes, 10),
			strconv.FormatUint(c.Closed, 10), strconv.FormatUint(c.Acked, 10), strconv.FormatUint(c.Late, 10),
			strconv.FormatUint(c.Dropped, 10), strconv.FormatUint(c.Refused, 10), strconv.Itoa(c.Pending))
	}
	return nt.flush()
}

// simIdentity is the name the simulator's reporters report under: the one
// given, or the CN of the client certificate, or sim's default (for a token
// or an insecure cluster).
func (a *app) simIdentity(given string) string {
	if given != "" || a.insecure || a.cert == "" {
		return given
	}
	certs, err := pki.ReadCerts(a.cert)
	if err != nil || len(certs) == 0 {
		return "" // the connection reports the unreadable certificate
	}
	return certs[0].Subject.CommonName
}
