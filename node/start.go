package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/columns"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/node/raftnet"
	"github.com/hotsplit/hotsplit/node/raftobs"
	"github.com/hotsplit/hotsplit/node/storage"
	"github.com/hotsplit/hotsplit/node/webauth"
	"github.com/hotsplit/hotsplit/scheduler"
	"github.com/hotsplit/hotsplit/transport"
)

// Start opens the data dir, starts raft, the leader duties, gRPC and HTTP,
// and (for a fresh node) bootstraps or joins. It returns once the node
// serves; it does not wait for a leader.
//
// It runs in phases, each handing what it built to the next ones'
// constructors: listen (identity and listeners) → storage (raft's stores)
// → raft (network, FSM, recovery and the data dir's checks, raft) →
// duties (peer client, clock monitor, state checker, scheduler, health)
// → servers (gRPC, HTTP) → serve (every goroutine).
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
	if err := storage.CheckRecoveryOnce(cfg.DataDir, cfg.Recovery.flag()); err != nil {
		return nil, err
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	gate := &logGate{}
	log := slog.New(lastWord{cfg.Logger.Handler(), gate}).With("node_id", cfg.ID)
	// The clock exists before every phase: a recovery seeds the HLC from
	// the same physical source the node's HLC will issue from.
	n := &Node{cfg: cfg, log: log, logGate: gate, clock: hlc.New(wrapClock(cfg.Clock)), halted: make(chan struct{}), removed: make(chan struct{})}
	defer func() {
		if err != nil {
			n.release()
		}
	}()
	w, err := n.listen()
	if err != nil {
		return nil, err
	}
	if err := n.openStorage(w); err != nil {
		return nil, err
	}
	if err := n.startRaft(w); err != nil {
		return nil, err
	}
	n.newDuties(w)
	n.newServers(w)
	n.serve(w)
	log.Info("node started", "raft_addr", n.advertisedRaft(), "grpc_addr", n.advertisedGRPC(), "http_addr", n.HTTPAddr(), "existing_state", w.existing)
	return n, nil
}

// wiring carries what one phase of Start builds for the later ones and
// the node itself does not keep.
type wiring struct {
	raftLog          hclog.Logger
	transportMetrics *transport.Metrics
	dialer           raftnet.Dialer
	trans            *raftnet.Transport
	// notify is raft's leadership notification channel, read by the
	// scheduler.
	notify   chan bool
	existing bool // the data dir held raft state
	// captures carry the states at CheckState markers from the FSM to the
	// state checker.
	captures *scheduler.StateCaptures
	checks   *scheduler.StateChecker
	clockMon *scheduler.ClockMonitor
	self     *api.Member
}

// release frees what a failed Start opened.
func (n *Node) release() {
	if n.stream != nil {
		n.stream.Close()
	}
	n.closeListeners()
	if n.stores != nil {
		n.stores.Close()
	}
}

// listen is Start's first phase: the process metrics, the node's identity
// (TLS material, bearer tokens) and its three listeners, capped.
func (n *Node) listen() (*wiring, error) {
	reg := n.cfg.Registry
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	raftobs.InstallMetrics()
	if n.cfg.Insecure {
		n.log.Warn("running without TLS (--insecure): anything that can reach the raft, gRPC or HTTP port can read and change this cluster")
	} else if err := n.startTLS(); err != nil {
		return nil, err
	}
	n.auth = &transport.Authenticator{Insecure: n.cfg.Insecure}
	if n.cfg.TokenFile != "" {
		tokens, err := transport.LoadTokenFile(n.cfg.TokenFile, n.log)
		if err != nil {
			return nil, err
		}
		n.auth.Tokens = tokens
	}
	if err := os.MkdirAll(n.cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", n.cfg.DataDir, err)
	}
	if err := n.openListeners(); err != nil {
		return nil, err
	}
	w := &wiring{transportMetrics: transport.NewMetrics(reg)}
	n.limitListeners(n.cfg.Limits.WithDefaults().MaxConnections, w.transportMetrics)
	return w, nil
}

// openStorage is Start's second phase: raft's log, stable and snapshot
// stores, checksummed and fail-stop (node/storage).
func (n *Node) openStorage(w *wiring) (err error) {
	w.raftLog = raftobs.NewLogger(n.log)
	n.stores, err = storage.Open(storage.Config{ID: n.cfg.ID, DataDir: n.cfg.DataDir, NoSync: n.cfg.NoSync, Halt: n.halt,
		Logger: n.log, RaftLogger: w.raftLog, Registerer: n.cfg.Registry, WrapLog: n.cfg.wrapLogStore})
	return err
}

// startRaft is Start's third phase: the network to the other nodes
// (node/raftnet), the FSM, the configured recovery and the checks of the
// data dir, then raft itself; a fresh --bootstrap node forms its
// one-voter cluster.
func (n *Node) startRaft(w *wiring) error {
	if err := n.startNetwork(w); err != nil {
		return err
	}
	w.captures = scheduler.NewStateCaptures()
	n.fsm = fsm.New(fsm.Options{Logger: n.log, Halt: n.halt, Metrics: fsm.NewMetrics(n.cfg.Registry), OnCheckState: w.captures.Capture})
	w.notify = make(chan bool, 16)
	rc := n.raftConfig(w)
	restoring, err := n.checkDataDir(rc, w)
	if err != nil {
		return err
	}
	// raftRef, not n.raft: the jepsen FSM wrapper may ask while raft starts.
	isLeader := func() bool { r := n.raftRef.Load(); return r != nil && r.State() == raft.Leader }
	restores := storage.NewRestoreGuard(wrapFSM(n.cfg.ID, n.fsm, isLeader), n.halt, restoring)
	n.configs = newConfigRecorder(restores, n.stores.Snapshots)
	st := n.stores
	n.raft, err = raft.NewRaft(rc, n.configs, st.Logs, st.Stable, st.Snapshots, w.trans)
	if err != nil {
		// e.g. the snapshot failed to restore: there is nothing safe to serve.
		return fmt.Errorf("start raft in %s: %w", n.cfg.DataDir, restores.Explain(err))
	}
	restores.Running()
	n.raftRef.Store(n.raft)
	return n.bootstrapRaft(w.existing)
}

// startNetwork opens raft's stream layer on the raft listener and raft's
// transport over it. The stream accepts connections before raft runs: its
// membership check (raftAdmits) admits no one until raft is published.
func (n *Node) startNetwork(w *wiring) error {
	w.dialer = n.cfg.Dialer
	if w.dialer == nil {
		w.dialer = raftnet.DefaultDialer()
	}
	n.dataDirClusterID = n.knownClusterID()
	stream, err := raftnet.NewStreamLayer(raftnet.StreamConfig{Listener: n.raftLn, Advertise: n.advertisedRaft(), Dialer: w.dialer, TLS: n.tls,
		Admit: n.raftAdmits, ExpectAt: n.raftMemberAt, ClusterID: n.raftClusterID, Logger: n.log, Registerer: n.cfg.Registry})
	if err != nil {
		return err
	}
	w.trans = raftnet.NewTransport(stream, w.raftLog)
	n.stream = w.trans
	return nil
}

// raftConfig is raft's configuration for this node: raft's defaults where
// Config leaves a setting zero.
func (n *Node) raftConfig(w *wiring) *raft.Config {
	cfg := n.cfg
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.ID)
	rc.Logger = w.raftLog
	rc.NotifyCh = w.notify
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
	return rc
}

// checkDataDir runs the configured recovery on the stores, then the
// checks a data dir passes before raft starts: no newer cluster version,
// and a log that continues the snapshot raft will restore. It records
// whether the data dir holds raft state and returns the snapshot raft
// restores ("" for none).
func (n *Node) checkDataDir(rc *raft.Config, w *wiring) (string, error) {
	st := n.stores
	if err := n.seedRecovery(rc, w.trans); err != nil {
		return "", err
	}
	if err := storage.CheckClusterVersion(st.Stable, n.cfg.DataDir); err != nil {
		return "", err
	}
	var err error
	if w.existing, err = raft.HasExistingState(st.Logs, st.Stable, st.Snapshots); err != nil {
		return "", fmt.Errorf("inspect raft state in %s: %w", n.cfg.DataDir, err)
	}
	return storage.CheckSnapshotCoverage(n.cfg.DataDir, st.Logs, n.log)
}

// bootstrapRaft forms a new one-voter cluster for a --bootstrap node whose
// data dir held no raft state.
func (n *Node) bootstrapRaft(existing bool) error {
	switch {
	case !n.cfg.Bootstrap:
	case existing:
		n.log.Info("data dir holds raft state: not bootstrapping again")
	default:
		if err := n.raft.BootstrapCluster(n.soleVoter()).Error(); err != nil {
			n.raft.Shutdown()
			return fmt.Errorf("bootstrap raft: %w", err)
		}
		n.log.Info("formed a new cluster", "raft_addr", n.advertisedRaft())
	}
	return nil
}

// soleVoter is the raft configuration of a cluster of this node alone.
func (n *Node) soleVoter() raft.Configuration {
	return raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(n.cfg.ID), Address: raft.ServerAddress(n.advertisedRaft())}}}
}

// newDuties is Start's fourth phase: the peer client, and what runs
// beside raft — the state checker, the clock monitor, the scheduler
// (the leader duties and the column aggregator) and the health monitor.
// Each gets the peer client at construction.
func (n *Node) newDuties(w *wiring) {
	cfg, reg := n.cfg, n.cfg.Registry
	n.peers = transport.NewPeers(cfg.ID, n.dialOptions(w.dialer)...)
	w.self = n.selfMember()
	w.checks = scheduler.NewStateChecker(scheduler.StateCheckConfig{Self: cfg.ID, Logger: n.log, Registerer: reg,
		PeerHash: func(ctx context.Context, m *api.Member, index uint64) (*api.StateReport, error) {
			return n.peers.StateHash(ctx, m.GrpcAddr, index)
		},
		Diverged: n.diverged,
	}, w.captures, n.fsm, n.clock)
	w.clockMon = scheduler.NewClockMonitor(scheduler.ClockConfig{Self: cfg.ID, MaxOffset: cfg.maxClockOffset(),
		HaltAfter: cfg.ClockOffsetHalt, Halt: n.halt, Logger: n.log, Registerer: reg,
		Ping: func(ctx context.Context, m *api.Member) (int64, error) { return n.peers.ClockPing(ctx, m.GrpcAddr) },
	}, n.fsm, n.clock)
	n.sched = scheduler.New(scheduler.Config{
		Self: w.self, CeilingWindow: cfg.CeilingWindow, OpStepDelay: cfg.OpStepDelay, Bootstrap: n.bootstrapParams(), Logger: n.log,
		Metrics: scheduler.NewMetrics(reg), Columns: &columns.Config{Logger: n.log, Metrics: reg},
		ClockMonitor: w.clockMon, StateChecks: w.checks, StateCheckInterval: cfg.stateCheckInterval(),
		PeerProgress: func(ctx context.Context, m *api.Member) (uint64, error) {
			return n.peers.AppliedIndex(ctx, m.GrpcAddr)
		},
	}, w.trans.WithFreshVerify(n.raft, raft.ServerID(cfg.ID)), n.fsm, n.clock, w.notify)
	n.health = n.newHealth()
	n.healthRef.Store(n.health)
}

// dialOptions connect this node to its peers' gRPC ports: through the
// node's dialer (the jepsen seam), with raftnet's peer check (the member
// expected at the address), messages up to api.MaxMessageBytes.
func (n *Node) dialOptions(d raftnet.Dialer) []grpc.DialOption {
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if n.tls != nil {
		creds = raftnet.PeerCredentials(n.tls, n.grpcMemberAt)
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(api.MaxMessageBytes), grpc.MaxCallSendMsgSize(api.MaxMessageBytes)),
	}
}

// selfMember is this node's member record as it announces itself.
func (n *Node) selfMember() *api.Member {
	return &api.Member{NodeId: n.cfg.ID, GrpcAddr: n.advertisedGRPC(), RaftAddr: n.advertisedRaft(), SupportedVersion: clusterversion.Supported, AutoSplitFlag: autoSplitFlag(n.cfg.AutoSplit)}
}

// bootstrapParams is what a --bootstrap node proposes once it leads (nil
// without --bootstrap).
func (n *Node) bootstrapParams() *scheduler.BootstrapParams {
	cfg := n.cfg
	if !cfg.Bootstrap {
		return nil
	}
	return &scheduler.BootstrapParams{ClusterID: newClusterID(), InitialSplits: cfg.InitialSplits, GroupID: max(cfg.GroupID, 1), GroupCount: cfg.GroupCount, Config: cfg.BootstrapConfig, AutoSplit: cfg.AutoSplit != nil && *cfg.AutoSplit}
}

// newServers is Start's fifth phase: the gRPC servers (transport) and the
// HTTP endpoints, built on the duties but not serving yet.
func (n *Node) newServers(w *wiring) {
	limits := n.cfg.Limits
	limits.MaxMessageBytes = api.MaxMessageBytes
	n.web = webauth.New(webauth.Config{NodeID: n.cfg.ID, BaseURL: n.pageBaseURL, Auth: n.auth, Registerer: n.cfg.Registry, Logger: n.log})
	var uiLogin transport.UILogin
	if n.httpLn != nil {
		uiLogin = n.web
	}
	n.srv = transport.New(transport.Config{NodeID: n.cfg.ID, FSM: n.fsm, Sched: n.sched, Raft: n.raft, Peers: n.peers, Loads: n.sched.Loads(), Logger: n.log,
		Metrics: w.transportMetrics, Limits: limits, Auth: n.auth, Health: n.health, CommittedConfiguration: n.configs.committed, UILogin: uiLogin})
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
	n.cfg.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hotsplit_hlc_skew_seconds", Help: "How far the HLC this node knows (issued, observed or applied) runs ahead of its own clock, in seconds; 0 when it does not. Issuing never moves it ahead; observing an old leader's ceiling may, by up to one fence window plus the clock offset between the two."}, n.hlcSkewSeconds))
	if n.httpLn != nil {
		// net/http's own lines (TLS handshake errors) go through the node's
		// logger: one format, and nothing after a halt's last line.
		n.http = &http.Server{Handler: n.httpHandler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(n.log.Handler(), slog.LevelWarn)}
		if n.tls != nil {
			// Client certificates optional: handlers find a verified one in
			// r.TLS.VerifiedChains.
			n.http.TLSConfig = n.tls.ServerConfig(tls.VerifyClientCertIfGiven, "h2", "http/1.1")
		}
	}
}

// serve is Start's last phase: every goroutine of the node, each stopping
// when Close cancels the context.
func (n *Node) serve(w *wiring) {
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	if n.tls != nil {
		n.goRun(func() { n.tls.Run(ctx) })
	}
	n.goRun(func() { n.sched.Run(ctx) })
	n.goRun(func() { w.clockMon.Run(ctx) })
	n.goRun(func() { w.checks.Run(ctx) })
	n.startOperations(ctx, n.cfg.Registry, n.stores.Files)
	n.goRun(func() { storage.RecordClusterVersion(ctx, n.stores.Stable, n.fsm) })
	n.goRun(func() { storage.RecordMembers(ctx, n.cfg.DataDir, n.fsm, n.log) })
	if n.auth.Tokens != nil {
		n.goRun(func() { n.auth.Tokens.Watch(ctx, time.Second) })
	}
	n.goRun(func() {
		if err := n.grpc.Serve(n.grpcLn); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			n.log.Error("grpc server stopped", "reason", err.Error())
		}
	})
	if n.http != nil {
		n.goRun(func() {
			var err error
			if n.http.TLSConfig != nil {
				err = n.http.ServeTLS(n.httpLn, "", "")
			} else {
				err = n.http.Serve(n.httpLn)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("http server stopped", "reason", err.Error())
			}
		})
	}
	n.goRun(func() { n.announce(ctx, w.self, w.existing) })
}
