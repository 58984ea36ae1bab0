package node

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/node/health"
	"github.com/hotsplit/hotsplit/node/raftnet"
	"github.com/hotsplit/hotsplit/node/raftobs"
	"github.com/hotsplit/hotsplit/node/storage"
	"github.com/hotsplit/hotsplit/pki"
	"github.com/hotsplit/hotsplit/scheduler"
	"github.com/hotsplit/hotsplit/transport"
)

// MaxMessageSize bounds one gRPC message: a 4 MiB load report plus framing.
const MaxMessageSize = 4<<20 + 64<<10

// grpcHandshakeTimeout bounds a gRPC connection's TLS handshake.
const grpcHandshakeTimeout = 5 * time.Second

// Node is one running hotsplit server.
type Node struct {
	cfg   Config
	log   *slog.Logger
	raft  *raft.Raft
	fsm   *fsm.FSM
	sched *scheduler.Scheduler
	srv   *transport.Server
	// peers are the connections to other nodes: forwarding, the leader
	// duties' calls and the health probes share them.
	peers *transport.Peers
	grpc  *grpc.Server
	http  *http.Server
	// stores are raft's log, stable and snapshot stores.
	stores *storage.Stores
	clock  *hlc.Clock
	auth   *transport.Authenticator
	// tls holds the node's certificate material; nil when Insecure.
	tls *pki.Reloader
	// stream is raft's stream layer until the transport exists, then the
	// transport, which marks itself shut down before it closes the stream
	// (else raft's accept loop logs the closed listener as an ERROR).
	stream io.Closer

	raftLn, grpcLn, httpLn net.Listener
	// raftRef publishes n.raft to raft's own goroutines (the jepsen FSM
	// wrapper asks whether this node leads while an entry applies).
	raftRef atomic.Pointer[raft.Raft]
	// healthRef publishes n.health to the raft stream layer, which starts
	// before it.
	healthRef atomic.Pointer[health.Monitor]

	cancel context.CancelFunc
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	halted    chan struct{} // closed when Halt was called
	halting   atomic.Bool   // set by the first halt
	logGate   *logGate      // sealed by a halt that exits the process

	health  *health.Monitor
	configs *configRecorder
	removed chan struct{} // closed when the node learnt it was removed
}

// Start opens the data dir, starts raft, the leader duties, gRPC and HTTP,
// and (for a fresh node) bootstraps or joins. It returns once the node
// serves; it does not wait for a leader.
func Start(cfg Config) (_ *Node, err error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := checkNotRemoved(cfg.DataDir); err != nil {
		return nil, err
	}
	gate := &logGate{}
	log := slog.New(lastWord{cfg.Logger.Handler(), gate}).With("node_id", cfg.ID)
	n := &Node{cfg: cfg, log: log, logGate: gate, halted: make(chan struct{}), removed: make(chan struct{})}
	defer func() {
		if err != nil {
			if n.stream != nil {
				n.stream.Close()
			}
			n.closeListeners()
			if n.stores != nil {
				n.stores.Close()
			}
		}
	}()
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
		n.cfg.Registry = cfg.Registry
	}
	reg := cfg.Registry
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	raftobs.InstallMetrics()

	if cfg.Insecure {
		log.Warn("running without TLS (--insecure): anything that can reach the raft, gRPC or HTTP port can read and change this cluster")
	} else if err := n.startTLS(); err != nil {
		return nil, err
	}
	n.auth = &transport.Authenticator{Insecure: cfg.Insecure}
	if cfg.TokenFile != "" {
		if n.auth.Tokens, err = transport.LoadTokenFile(cfg.TokenFile, log); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", cfg.DataDir, err)
	}
	if err := n.listen(); err != nil {
		return nil, err
	}
	tmetrics := transport.NewMetrics(reg)
	n.limitListeners(cfg.Limits.WithDefaults().MaxConnections, tmetrics)
	hlog := raftobs.NewLogger(log)
	n.stores, err = storage.Open(storage.Config{ID: cfg.ID, DataDir: cfg.DataDir, NoSync: cfg.NoSync, Halt: n.halt, Logger: log, RaftLogger: hlog,
		Registerer: reg, WrapLog: cfg.wrapLogStore})
	if err != nil {
		return nil, err
	}
	logs, stable, snaps, fileSnaps := n.stores.Logs, n.stores.Stable, n.stores.Snapshots, n.stores.Files

	dialer := cfg.Dialer
	if dialer == nil {
		dialer = raftnet.DefaultDialer()
	}
	stream, err := raftnet.NewStreamLayer(raftnet.StreamConfig{Listener: n.raftLn, Advertise: n.advertisedRaft(), Dialer: dialer, TLS: n.tls,
		Admit: n.raftAdmits, ExpectAt: n.raftMemberAt, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	n.stream = stream
	trans := raftnet.NewTransport(stream, hlog)
	n.stream = trans

	var peerCredentials credentials.TransportCredentials = insecure.NewCredentials()
	if n.tls != nil {
		peerCredentials = raftnet.PeerCredentials(n.tls, n.grpcMemberAt)
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(peerCredentials),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dialer.DialContext(ctx, "tcp", addr) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMessageSize), grpc.MaxCallSendMsgSize(MaxMessageSize)),
	}
	n.peers = transport.NewPeers(cfg.ID, dialOpts...)
	captures := scheduler.NewStateCaptures()
	n.fsm = fsm.New(fsm.Options{Logger: log, Halt: n.halt, Metrics: fsm.NewMetrics(reg), OnCheckState: captures.Capture})
	notify := make(chan bool, 16)
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = hlog
	rc.NotifyCh = notify
	rc.BatchApplyCh = true
	setIfPositive(&rc.HeartbeatTimeout, cfg.HeartbeatTimeout)
	setIfPositive(&rc.ElectionTimeout, cfg.ElectionTimeout)
	setIfPositive(&rc.LeaderLeaseTimeout, cfg.LeaderLeaseTimeout)
	setIfPositive(&rc.CommitTimeout, cfg.CommitTimeout)
	setIfPositive(&rc.SnapshotInterval, cfg.SnapshotInterval)
	if cfg.SnapshotThreshold > 0 {
		rc.SnapshotThreshold = cfg.SnapshotThreshold
	}
	if cfg.TrailingLogs > 0 {
		rc.TrailingLogs = cfg.TrailingLogs
	}
	if cfg.Recovery.enabled() {
		if n.cfg.Recovery.MaxClockOffset == 0 {
			n.cfg.Recovery.MaxClockOffset = orDefault(cfg.MaxClockOffset, DefaultMaxClockOffset)
		}
		if err := n.recover(rc, logs, stable, snaps, trans); err != nil {
			return nil, err
		}
	}
	if err := storage.CheckClusterVersion(stable, cfg.DataDir); err != nil {
		return nil, err
	}
	existing, err := raft.HasExistingState(logs, stable, snaps)
	if err != nil {
		return nil, fmt.Errorf("inspect raft state in %s: %w", cfg.DataDir, err)
	}
	restoring, err := storage.CheckSnapshotCoverage(cfg.DataDir, logs, log)
	if err != nil {
		return nil, err
	}
	isLeader := func() bool { r := n.raftRef.Load(); return r != nil && r.State() == raft.Leader }
	restores := storage.NewRestoreGuard(wrapFSM(cfg.ID, n.fsm, isLeader), n.halt, restoring)
	n.configs = newConfigRecorder(restores, snaps)
	n.raft, err = raft.NewRaft(rc, n.configs, logs, stable, snaps, trans)
	if err != nil {
		// e.g. the snapshot failed to restore: there is nothing safe to serve.
		return nil, fmt.Errorf("start raft in %s: %w", cfg.DataDir, restores.Explain(err))
	}
	restores.Running()
	n.raftRef.Store(n.raft)
	if cfg.Bootstrap && !existing {
		boot := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(cfg.ID), Address: raft.ServerAddress(n.advertisedRaft())}}}
		if err := n.raft.BootstrapCluster(boot).Error(); err != nil {
			n.raft.Shutdown()
			return nil, fmt.Errorf("bootstrap raft: %w", err)
		}
		log.Info("formed a new cluster", "raft_addr", n.advertisedRaft())
	} else if cfg.Bootstrap {
		log.Info("data dir holds raft state: not bootstrapping again")
	}

	n.clock = hlc.New(wrapClock(cfg.Clock))
	self := &api.Member{NodeId: cfg.ID, GrpcAddr: n.advertisedGRPC(), RaftAddr: n.advertisedRaft(), SupportedVersion: fsm.SupportedVersion, AutoSplitFlag: autoSplitFlag(cfg.AutoSplit)}
	var boot *scheduler.BootstrapParams
	if cfg.Bootstrap {
		boot = &scheduler.BootstrapParams{ClusterID: newClusterID(), InitialSplits: cfg.InitialSplits, GroupID: max(cfg.GroupID, 1), Config: cfg.BootstrapConfig, AutoSplit: cfg.AutoSplit != nil && *cfg.AutoSplit}
	}
	checks := scheduler.NewStateChecker(scheduler.StateCheckConfig{Self: cfg.ID, Logger: log, Registerer: reg,
		PeerHash: func(ctx context.Context, m *api.Member, index uint64) (*api.StateReport, error) {
			return n.peers.StateHash(ctx, m.GrpcAddr, index)
		},
		Diverged: n.diverged,
	}, captures, n.fsm, n.clock)
	clockMon := scheduler.NewClockMonitor(scheduler.ClockConfig{Self: cfg.ID, MaxOffset: orDefault(cfg.MaxClockOffset, DefaultMaxClockOffset),
		HaltAfter: cfg.ClockOffsetHalt, Halt: n.halt, Logger: log, Registerer: reg,
		Ping: func(ctx context.Context, m *api.Member) (int64, error) { return n.peers.ClockPing(ctx, m.GrpcAddr) },
	}, n.fsm, n.clock)
	n.sched = scheduler.New(scheduler.Config{
		Self: self, CeilingWindow: cfg.CeilingWindow, OpStepDelay: cfg.OpStepDelay, Bootstrap: boot, Logger: log, Metrics: scheduler.NewMetrics(reg),
		Columns: &scheduler.AggregatorConfig{Logger: log, Metrics: reg}, ClockMonitor: clockMon, StateChecks: checks, StateCheckInterval: orDefault(cfg.StateCheckInterval, DefaultStateCheckInterval),
		PeerProgress: func(ctx context.Context, m *api.Member) (uint64, error) {
			return n.peers.AppliedIndex(ctx, m.GrpcAddr)
		},
	}, trans.WithFreshVerify(n.raft, raft.ServerID(cfg.ID)), n.fsm, n.clock, notify)
	limits := cfg.Limits
	limits.MaxMessageBytes = MaxMessageSize
	n.health = n.newHealth()
	n.healthRef.Store(n.health)
	n.srv = transport.New(transport.Config{NodeID: cfg.ID, FSM: n.fsm, Sched: n.sched, Raft: n.raft, Peers: n.peers, Loads: n.sched.Loads(), Logger: log,
		Metrics: tmetrics, Limits: limits, Auth: n.auth, Health: n.health, CommittedConfiguration: n.configs.committed})
	// A connection that has not finished its TLS handshake and HTTP/2
	// preface by then is closed, freeing its slot under the connection cap
	// (gRPC's default: 120 s).
	srvOpts := append(n.srv.ServerOptions(), grpc.ConnectionTimeout(grpcHandshakeTimeout))
	if n.tls != nil {
		// Client certificates are optional here: peers and certificate
		// clients present one, token clients do not; the verified chain
		// reaches the authorization layer in the peer's credentials.TLSInfo.
		srvOpts = append(srvOpts, grpc.Creds(credentials.NewTLS(n.tls.ServerConfig(tls.VerifyClientCertIfGiven))))
	}
	n.grpc = grpc.NewServer(srvOpts...)
	n.srv.Register(n.grpc)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotsplit_hlc_skew_seconds", Help: "How far the HLC this node knows (issued, observed or applied) runs ahead of its own clock, in seconds; 0 when it does not. Issuing never moves it ahead; observing an old leader's ceiling may, by up to one fence window plus the clock offset between the two."}, n.hlcSkewSeconds))

	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if n.tls != nil {
		n.goRun(func() { n.tls.Run(ctx) })
	}
	n.goRun(func() { n.sched.Run(ctx) })
	n.goRun(func() { clockMon.Run(ctx) })
	n.goRun(func() { checks.Run(ctx) })
	n.startOperations(ctx, reg, fileSnaps)
	n.goRun(func() { storage.RecordClusterVersion(ctx, stable, n.fsm) })
	if n.auth.Tokens != nil {
		n.goRun(func() { n.auth.Tokens.Watch(ctx, time.Second) })
	}
	n.goRun(func() {
		if err := n.grpc.Serve(n.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			log.Error("grpc server stopped", "reason", err.Error())
		}
	})
	if n.httpLn != nil {
		// net/http's own lines (TLS handshake errors) go through the node's
		// logger: one format, and nothing after a halt's last line.
		n.http = &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		serve := func() error { return n.http.Serve(n.httpLn) }
		if n.tls != nil {
			// Client certificates optional: handlers find a verified one in
			// r.TLS.VerifiedChains.
			n.http.TLSConfig = n.tls.ServerConfig(tls.VerifyClientCertIfGiven, "h2", "http/1.1")
			serve = func() error { return n.http.ServeTLS(n.httpLn, "", "") }
		}
		n.goRun(func() {
			if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("http server stopped", "reason", err.Error())
			}
		})
	}
	n.goRun(func() { n.announce(ctx, self, existing) })
	log.Info("node started", "raft_addr", n.advertisedRaft(), "grpc_addr", n.advertisedGRPC(), "http_addr", n.HTTPAddr(), "existing_state", existing)
	return n, nil
}

// hlcSkewSeconds is HLC − wall on this node. A follower issues nothing, so
// its own clock's last value says nothing: the HLC it knows is the last
// applied entry's (without that, the gauge read the whole Unix epoch on
// followers).
func (n *Node) hlcSkewSeconds() float64 {
	return float64(n.clock.AheadMs(max(n.clock.Last(), n.fsm.State().LastHLC()))) / 1000
}

// Defaults of the integrity settings (SPEC §13).
const (
	DefaultMaxClockOffset     = 500 * time.Millisecond
	DefaultStateCheckInterval = 10 * time.Minute
)

// orDefault maps a zero duration to def and a negative one to 0 (off).
func orDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

func autoSplitFlag(v *bool) api.AutoSplitFlag {
	switch {
	case v == nil:
		return api.AutoSplitFlag_AUTO_SPLIT_FLAG_UNSET
	case *v:
		return api.AutoSplitFlag_AUTO_SPLIT_FLAG_ON
	}
	return api.AutoSplitFlag_AUTO_SPLIT_FLAG_OFF
}

func setIfPositive(dst *time.Duration, v time.Duration) {
	if v > 0 {
		*dst = v
	}
}

func newClusterID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b[:])
}

func (n *Node) goRun(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

func (n *Node) listen() error {
	var err error
	if n.raftLn = n.cfg.RaftListener; n.raftLn == nil {
		if n.raftLn, err = net.Listen("tcp", n.cfg.RaftAddr); err != nil {
			return fmt.Errorf("raft listener on %s: %w", n.cfg.RaftAddr, err)
		}
	}
	if n.grpcLn = n.cfg.GRPCListener; n.grpcLn == nil {
		if n.grpcLn, err = net.Listen("tcp", n.cfg.GRPCAddr); err != nil {
			return fmt.Errorf("grpc listener on %s: %w", n.cfg.GRPCAddr, err)
		}
	}
	if n.httpLn = n.cfg.HTTPListener; n.httpLn == nil && n.cfg.HTTPAddr != "" {
		if n.httpLn, err = net.Listen("tcp", n.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("http listener on %s: %w", n.cfg.HTTPAddr, err)
		}
	}
	return nil
}

// limitListeners caps the connections of every listener (SPEC §13).
func (n *Node) limitListeners(max int, m *transport.Metrics) {
	n.raftLn = transport.LimitListener(n.raftLn, max, "raft", m)
	n.grpcLn = transport.LimitListener(n.grpcLn, max, "grpc", m)
	if n.httpLn != nil {
		n.httpLn = transport.LimitListener(n.httpLn, max, "http", m)
	}
}

func (n *Node) closeListeners() {
	for _, ln := range []net.Listener{n.raftLn, n.grpcLn, n.httpLn} {
		if ln != nil {
			ln.Close()
		}
	}
}

func (n *Node) advertisedRaft() string {
	if n.cfg.RaftAddr != "" && n.cfg.RaftListener == nil {
		return n.cfg.RaftAddr
	}
	return n.raftLn.Addr().String()
}

func (n *Node) advertisedGRPC() string {
	if n.cfg.GRPCAddr != "" && n.cfg.GRPCListener == nil {
		return n.cfg.GRPCAddr
	}
	return n.grpcLn.Addr().String()
}

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.ID }

// GRPCAddr returns the address clients reach this node at.
func (n *Node) GRPCAddr() string { return n.advertisedGRPC() }

// RaftAddr returns the raft address peers reach this node at.
func (n *Node) RaftAddr() string { return n.advertisedRaft() }

// HTTPAddr returns the HTTP address, or "" when disabled.
func (n *Node) HTTPAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// FSM returns the node's state machine (read side).
func (n *Node) FSM() *fsm.FSM { return n.fsm }

// Raft returns the node's raft instance.
func (n *Node) Raft() *raft.Raft { return n.raft }

// Scheduler returns the node's leader duties.
func (n *Node) Scheduler() *scheduler.Scheduler { return n.sched }

// Halted is closed when the node stopped itself because it must not go on
// and Config.Halt let the process live on (a real process has exited).
func (n *Node) Halted() <-chan struct{} { return n.halted }

// halt stops the node for good: a storage fault, an entry this build
// cannot apply, a diverged state, a clock off from the cluster (SPEC §12).
// The first caller logs one ERROR line and, in a real process, exits 1;
// every other caller blocks in a real process (the exit is under way, and
// returning an error into raft would make it panic) and returns at once
// when a test installed Config.Halt.
func (n *Node) halt(err error) {
	if !n.halting.CompareAndSwap(false, true) {
		if n.cfg.Halt == nil {
			select {}
		}
		return
	}
	if n.cfg.Halt == nil {
		// The ERROR line must be the process's last: no other log line
		// may follow it, and Halted stays open so no watcher wakes to
		// write one.
		n.logGate.seal()
		n.cfg.Logger.Error("stopping: "+err.Error(), "node_id", n.cfg.ID, "reason", "halt")
		os.Exit(1)
	}
	n.log.Error("stopping: "+err.Error(), "reason", "halt")
	close(n.halted)
	n.cfg.Halt(err)
	// The process goes on (a test or an embedder chose so): stop serving
	// anyway. Asynchronously, because halt may run on a raft goroutine that
	// Shutdown waits for.
	go func() {
		if n.grpc != nil {
			n.grpc.Stop()
		}
		if n.raft != nil {
			n.raft.Shutdown()
		}
	}()
}

// Close stops the node gracefully: a leader first hands leadership to a
// caught-up follower (bounded), then gRPC drains, raft shuts down and the
// store closes. Safe to call more than once.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() { n.closeErr = n.close(ctx) })
	return n.closeErr
}

func (n *Node) close(ctx context.Context) error {
	if n.raft.State() == raft.Leader && n.hasOtherVoters() {
		if err := waitWithin(ctx, n.raft.LeadershipTransfer(), 5*time.Second); err != nil {
			n.log.Warn("leadership transfer before shutdown failed", "reason", err.Error())
		} else {
			n.log.Info("handed leadership over before shutdown")
		}
	}
	n.cancel()
	stopped := make(chan struct{})
	go func() { n.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(3 * time.Second):
		n.grpc.Stop()
	}
	if n.http != nil {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		n.http.Shutdown(sctx)
		cancel()
	}
	errs := []error{n.raft.Shutdown().Error()}
	n.wg.Wait()
	errs = append(errs, n.peers.Close(), n.stores.Close())
	n.closeListeners()
	return errors.Join(errs...)
}

func (n *Node) hasOtherVoters() bool {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter && string(s.ID) != n.cfg.ID {
			return true
		}
	}
	return false
}

func waitWithin(ctx context.Context, f raft.Future, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
