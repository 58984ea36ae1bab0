package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/node"
	"github.com/hotsplit/hotsplit/sim"
	"github.com/hotsplit/hotsplit/transport"
)

// options are the parsed command line.
type options struct {
	node        node.Config
	logLevel    slog.Level
	logJSON     bool
	version     bool
	inspect     string
	dev         bool
	devLog      string
	devPorts    int
	devDir      string
	devWorkload string
	devRate     int
	autoSplit   autoSplitFlag
	tls         node.TLSFiles
}

// autoSplitFlag remembers whether --autoSplit was given at all: only an
// explicit value seeds or is compared with the replicated switch
// (docs/design.md#ops-the-scheduler-and-the-switch).
type autoSplitFlag struct {
	set, value bool
}

func (f *autoSplitFlag) String() string   { return strconv.FormatBool(f.value) }
func (f *autoSplitFlag) IsBoolFlag() bool { return true }
func (f *autoSplitFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	f.set, f.value = true, v
	return nil
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("hotsplitd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := &o.node
	fs.StringVar(&n.ID, "id", "", "node id, unique in the cluster and never reused")
	fs.StringVar(&n.DataDir, "dataDir", "", "directory for the raft log, snapshots and the cluster id")
	fs.StringVar(&n.RaftAddr, "raftAddr", "127.0.0.1:7000", "raft address (host:port), advertised to peers")
	fs.StringVar(&n.GRPCAddr, "grpcAddr", "127.0.0.1:7001", "gRPC address (host:port) for clients and peers")
	fs.StringVar(&n.HTTPAddr, "httpAddr", "127.0.0.1:7002", "HTTP address for /metrics, /healthz, /readyz, /debug/pprof/ (empty: off)")
	fs.BoolVar(&n.Bootstrap, "bootstrap", false, "form a new cluster with this node as its only voter (ignored if the data dir holds state)")
	join := fs.String("join", "", "comma-separated gRPC addresses of members to join through (a fresh data dir only)")
	splits := fs.String("initialSplits", "", "comma-separated initial split keys for --bootstrap (Go escapes such as \\x00 allowed)")
	fs.Uint64Var(&n.GroupID, "groupId", 1, "shard group of the initial routes (the first of them with --groups)")
	groups := fs.Uint("groups", 1, "shard groups --bootstrap creates, ids from --groupId, the initial routes spread over them in key order")
	fs.Var(&o.autoSplit, "autoSplit", "seed the automatic-split switch (docs/design.md#ops-the-scheduler-and-the-switch): at bootstrap it sets it; later it applies only while no operator has set the switch")

	cfg := &api.Config{}
	n.BootstrapConfig = cfg
	fs.Uint64Var(&cfg.Threshold, "autoSplitThreshold", 0, "weighted ops/min a route must reach (default 50000)")
	optU32(fs, &cfg.WriteWeight, "autoSplitWriteWeight", "weight of a write (default 4; 0: writes do not count)")
	optU32(fs, &cfg.ReadWeight, "autoSplitReadWeight", "weight of a read (default 1; 0: reads do not count)")
	fs.BoolVar(&cfg.CrossGroup, "autoSplitCrossGroup", false, "at bootstrap: turn automatic placement on, moving a group's hottest route to the group with room when it stays over capacity (docs/design.md#automatic-placement; later: autosplit config set cross_group=true)")
	u32(fs, &cfg.CandidateWindows, "autoSplitCandidateWindows", "consecutive hot columns before a split (default 3)")
	msDuration(fs, &cfg.CooldownMs, "autoSplitCooldown", "cooldown of a split's children (default 10m)")
	u32(fs, &cfg.MaxSplitsPerCycle, "autoSplitMaxPerCycle", "split ops planned per column at most (default 1)")
	u32(fs, &cfg.MaxAutoRoutes, "autoSplitMaxRoutes", "live routes the detector may grow the catalog to (default 1024)")
	u32(fs, &cfg.TopKeyShareBp, "autoSplitTopKeyShare", "hot-key share of its route's load for isolation, basis points (default 8000)")
	u32(fs, &cfg.Buckets, "autoSplitBuckets", "sub-buckets per route for the median split key, at most 256 (default 16)")
	msDuration(fs, &cfg.StepMs, "autoSplitStep", "load column length (default 1m)")
	msDuration(fs, &cfg.OpTtlMs, "autoSplitOpTTL", "a paused op older than this is aborted on enable (default: the cooldown)")

	fs.DurationVar(&n.HeartbeatTimeout, "raftHeartbeatTimeout", 0, "raft heartbeat timeout (default raft's 1s)")
	fs.DurationVar(&n.ElectionTimeout, "raftElectionTimeout", 0, "raft election timeout (default raft's 1s)")
	fs.DurationVar(&n.LeaderLeaseTimeout, "raftLeaderLeaseTimeout", 0, "raft leader lease timeout (default raft's 500ms)")
	fs.DurationVar(&n.CommitTimeout, "raftCommitTimeout", 0, "raft commit timeout (default raft's 50ms)")
	fs.Uint64Var(&n.SnapshotThreshold, "raftSnapshotThreshold", 0, "log entries between snapshots (default raft's 8192)")
	fs.DurationVar(&n.SnapshotInterval, "raftSnapshotInterval", 0, "how often to check whether to snapshot (default raft's 2m)")
	fs.Uint64Var(&n.TrailingLogs, "raftTrailingLogs", 0, "log entries kept after a snapshot (default raft's 10240)")
	fs.DurationVar(&n.CeilingWindow, "ceilingWindow", 0, "HLC fence window (default 1s)")
	fs.DurationVar(&n.MaxClockOffset, "maxClockOffset", node.DefaultMaxClockOffset, "a node whose clock differs from a majority of the members' by more than this refuses to lead, hands leadership on, and stops if it lasts (negative: no check)")
	fs.DurationVar(&n.ClockOffsetHalt, "clockOffsetHalt", 30*time.Second, "how long a node may stay beyond --maxClockOffset before it stops (negative: never)")
	fs.DurationVar(&n.StateCheckInterval, "stateCheckInterval", node.DefaultStateCheckInterval, "how often the leader compares the members' state hashes (negative: only on hotsplitctl cluster check)")
	fs.DurationVar(&n.OpStepDelay, "autoSplitOpDelay", 0, "hold a newly planned split op this long before its first step, so operators can review or abort it (default 0)")

	fs.StringVar(&o.tls.CertFile, "tlsCert", "", "this node's certificate (PEM; CN = --id, O = node, IP/DNS names of its addresses): hotsplitctl certs create-node")
	fs.StringVar(&o.tls.KeyFile, "tlsKey", "", "the key of --tlsCert (PEM)")
	fs.StringVar(&o.tls.CAFile, "tlsCA", "", "the cluster's CA bundle (PEM): peers and clients must hold certificates it signed")
	fs.DurationVar(&o.tls.ReloadInterval, "tlsReloadInterval", node.DefaultTLSReloadInterval, "how often the TLS files are checked for changes (they are also re-read on SIGHUP; 0: only on SIGHUP)")
	fs.BoolVar(&n.Insecure, "insecure", false, "run without TLS: anything that can reach a port can read and change the cluster (trusted networks only)")
	fs.StringVar(&n.TokenFile, "tokenFile", "", "bearer tokens for clients without a certificate: lines `name role sha256hex`, mode 0600, reloaded on change (hotsplitctl certs create-token)")
	fs.BoolVar(&n.EnablePprof, "enablePprof", false, "serve /debug/pprof/ on the HTTP port (admin role only)")
	fs.BoolVar(&n.MetricsInsecure, "metricsInsecure", false, "serve /metrics without authentication (default: the reader role, like every other read)")
	lim := &n.Limits
	fs.IntVar(&lim.MaxConnections, "maxConnections", transport.DefaultMaxConnections, "open connections per listener (gRPC, HTTP, raft); more are closed at accept")
	u32(fs, &lim.MaxConcurrentStreams, "maxConcurrentStreams", "concurrent gRPC calls per connection (default 256)")
	fs.Int64Var(&lim.ReportBudgetBytes, "reportBudget", transport.DefaultReportBudgetBytes, "bytes of load reports a node holds in flight; more are refused (ResourceExhausted) and resent by their reporters")
	rate := transport.DefaultRateLimits()
	lim.Rate = &rate
	fs.Float64Var(&lim.Rate.TimestampsPerSecond, "rateLimitTimestamps", rate.TimestampsPerSecond, "GetTimestamp calls per second per identity on the node a call enters (0: no limit)")
	fs.Float64Var(&lim.Rate.MutationsPerSecond, "rateLimitMutations", rate.MutationsPerSecond, "mutating calls per second per identity on the node a call enters (0: no limit; Load.Report is exempt)")

	fs.StringVar(&n.Recovery.RestoreSnapshot, "restoreSnapshot", "", "seed a new single-voter cluster from a backup file (hotsplitctl snapshot save) in an empty --dataDir; it gets a new cluster id (docs/runbook.md)")
	fs.BoolVar(&n.Recovery.ForceNewCluster, "forceNewCluster", false, "after a lost quorum: turn this node's own data dir into a new single-voter cluster, serving everything in its log; pick the survivor with --inspect (docs/runbook.md)")
	fs.StringVar(&o.inspect, "inspect", "", "print a stopped node's data dir (last index and term, cluster id, configuration) and exit")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	level := fs.String("logLevel", "info", "debug, info, warn or error")
	fs.BoolVar(&o.logJSON, "logJSON", false, "log JSON lines instead of text")
	fs.BoolVar(&o.dev, "dev", false, "run a three-node demo cluster in this process on loopback")
	fs.IntVar(&o.devPorts, "devPorts", 0, "--dev: first of 9 consecutive ports (default: free ports)")
	fs.StringVar(&o.devDir, "devDir", "", "--dev: data directory (default: a temporary one, removed at exit)")
	fs.StringVar(&o.devWorkload, "devWorkload", demoWorkload, "--dev: simulated load: demo (a hot key, then a shifting hot range), "+strings.Join(sim.WorkloadNames(), ", ")+", or none")
	fs.IntVar(&o.devRate, "devRate", 5000, "--dev: simulated operations per second")
	fs.StringVar(&o.devLog, "devLog", "", "--dev: file for the nodes' logs (default "+devLogPath("")+", kept after exit); the terminal keeps the demo's narrative")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: hotsplitd [flags]\n\nRun one hotsplit node, or --dev for a demo cluster.\n\nExamples:\n"+
			"  hotsplitd --dev\n"+
			"  hotsplitd --id n1 --dataDir /var/lib/hotsplit --bootstrap --autoSplit --tlsCert n1.crt --tlsKey n1.key --tlsCA ca.crt\n"+
			"  hotsplitd --id n2 --dataDir /var/lib/hotsplit --raftAddr 10.0.0.2:7000 --grpcAddr 10.0.0.2:7001 --join 10.0.0.1:7001 --tlsCert n2.crt --tlsKey n2.key --tlsCA ca.crt\n"+
			"  hotsplitd --id n1 --dataDir /var/lib/hotsplit-new --restoreSnapshot backup.hsnap --tlsCert n1.crt --tlsKey n1.key --tlsCA ca.crt\n"+
			"  hotsplitd --inspect /var/lib/hotsplit\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.version || o.inspect != "" {
		return o, nil
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %q", fs.Args())
		fmt.Fprintln(stderr, "hotsplitd:", err)
		return nil, err
	}
	if err := o.logLevel.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintln(stderr, "hotsplitd: logLevel:", err)
		return nil, err
	}
	lim.Rate.TimestampBurst = transport.BurstFor(lim.Rate.TimestampsPerSecond)
	lim.Rate.MutationBurst = transport.BurstFor(lim.Rate.MutationsPerSecond)
	if *join != "" {
		n.Join = strings.Split(*join, ",")
	}
	var err error
	if n.InitialSplits, err = parseKeys(*splits); err != nil {
		fmt.Fprintln(stderr, "hotsplitd: initialSplits:", err)
		return nil, err
	}
	n.GroupCount = uint32(min(*groups, math.MaxUint32))
	if o.autoSplit.set {
		v := o.autoSplit.value
		n.AutoSplit = &v
	}
	n.Logger = node.NewLogger(os.Stderr, o.logLevel, o.logJSON)
	check := requireNodeFlags
	if o.dev {
		check = checkDevFlags
	}
	if err := check(o); err != nil {
		fmt.Fprintln(stderr, "hotsplitd:", err)
		return nil, err
	}
	return o, nil
}

func checkDevFlags(o *options) error {
	if o.node.Insecure || o.tls.CertFile != "" || o.tls.KeyFile != "" || o.tls.CAFile != "" {
		return errors.New("--dev makes its own CA and certificates and always runs TLS: drop --insecure and --tls*")
	}
	if o.devRate < 1 || o.devRate > sim.MaxRate {
		return fmt.Errorf("--devRate: %d not in 1..%d", o.devRate, sim.MaxRate)
	}
	if o.devWorkload == demoWorkload || o.devWorkload == "none" {
		return nil
	}
	if _, err := sim.ParseWorkload(o.devWorkload, sim.DefaultWorkloadOptions()); err != nil {
		return fmt.Errorf("--devWorkload: %w", err)
	}
	return nil
}

func requireNodeFlags(o *options) error {
	n := &o.node
	var errs []error
	if n.ID == "" {
		errs = append(errs, errors.New("--id is required"))
	}
	if n.DataDir == "" {
		errs = append(errs, errors.New("--dataDir is required"))
	}
	if err := tlsFlags(o); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// tlsFlags puts the TLS files into the node config: secure by default,
// plaintext only with --insecure (docs/design.md#trust-and-integrity).
func tlsFlags(o *options) error {
	f := o.tls
	var missing []string
	for _, fl := range []struct{ name, v string }{{"--tlsCert", f.CertFile}, {"--tlsKey", f.KeyFile}, {"--tlsCA", f.CAFile}} {
		if fl.v == "" {
			missing = append(missing, fl.name)
		}
	}
	switch {
	case o.node.Insecure && len(missing) < 3:
		return errors.New("--insecure together with --tlsCert/--tlsKey/--tlsCA: choose one")
	case o.node.Insecure:
		return nil
	case len(missing) == 3:
		return errors.New("no TLS certificate: give --tlsCert, --tlsKey and --tlsCA (make them with `hotsplitctl certs create-ca` and `hotsplitctl certs create-node ID --ip ADDR`, see docs/security.md), or --insecure to run plaintext on a trusted network, or --dev for a local demo")
	case len(missing) > 0:
		return fmt.Errorf("TLS needs --tlsCert, --tlsKey and --tlsCA together: %s missing", strings.Join(missing, " and "))
	}
	if f.ReloadInterval == 0 {
		f.ReloadInterval = -1 // only on SIGHUP
	}
	o.node.TLS = &f
	return nil
}

// parseKeys splits a comma-separated key list, interpreting Go escapes.
func parseKeys(s string) ([][]byte, error) {
	if s == "" {
		return nil, nil
	}
	var out [][]byte
	for i, part := range strings.Split(s, ",") {
		k, err := strconv.Unquote(`"` + strings.ReplaceAll(part, `"`, `\"`) + `"`)
		if err != nil {
			return nil, fmt.Errorf("key %d %q: %w", i, part, err)
		}
		out = append(out, []byte(k))
	}
	return out, nil
}

// u32 and msDuration register flags that fill api.Config fields.
func u32(fs *flag.FlagSet, dst *uint32, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("want a non-negative integer, got %q", s)
		}
		*dst = uint32(v)
		return nil
	})
}

// optU32 is u32 for a field with presence: given at all (0 included), it is
// set; not given, it stays absent and the cluster's default applies.
func optU32(fs *flag.FlagSet, dst **uint32, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		v, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			return fmt.Errorf("want a non-negative integer, got %q", s)
		}
		x := uint32(v)
		*dst = &x
		return nil
	})
}

func msDuration(fs *flag.FlagSet, dst *uint64, name, usage string) {
	fs.Func(name, usage, func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("want a positive duration such as 500ms or 10m, got %q", s)
		}
		*dst = uint64(d.Milliseconds())
		return nil
	})
}
