package node

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/node/raftnet"
	"github.com/hotsplit/hotsplit/transport"
)

// MetricsRegistry is where a node registers its metrics and what /metrics
// gathers: a *prometheus.Registry, or a wrapper of one.
type MetricsRegistry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Config describes one node. Zero durations take raft's defaults (or the
// ones named below); listeners may be pre-opened (tests bind to port 0).
type Config struct {
	ID       string
	DataDir  string
	RaftAddr string // advertised to peers; also the bind address unless RaftListener is set
	GRPCAddr string
	HTTPAddr string // empty: no HTTP endpoints

	// Bootstrap forms a new single-voter cluster if the data dir holds no
	// raft state; it is ignored (with a log line) when state exists.
	Bootstrap bool
	// Join lists gRPC addresses of existing members to join through when the
	// data dir holds no raft state.
	Join          []string
	InitialSplits [][]byte
	GroupID       uint64
	// GroupCount is how many shard groups --bootstrap creates, ids from
	// GroupID, the initial routes spread over them (0: one).
	GroupCount uint32
	// AutoSplit is the explicit --autoSplit value, nil when not given.
	AutoSplit *bool
	// BootstrapConfig is the detector/load config proposed at bootstrap
	// (zero fields take the FSM's defaults).
	BootstrapConfig *api.Config

	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
	CommitTimeout      time.Duration
	SnapshotThreshold  uint64
	SnapshotInterval   time.Duration
	TrailingLogs       uint64
	// CeilingWindow is the HLC fence window (default 1 s).
	CeilingWindow time.Duration
	// OpStepDelay holds newly planned ops before their first step, for
	// review (default 0).
	OpStepDelay time.Duration
	// NoSync skips fsync of the raft log (benchmarks that need the
	// comparison only; never in production).
	NoSync bool
	// MaxClockOffset: a node whose clock is off by more than this from a
	// majority of the members refuses to lead (default 500 ms; negative
	// turns the check off).
	MaxClockOffset time.Duration
	// ClockOffsetHalt: a node off for this long without a break stops
	// (default 30 s; negative: never).
	ClockOffsetHalt time.Duration
	// StateCheckInterval: the leader runs the cross-replica state check this
	// often (default 10 min; negative turns the periodic check off;
	// `hotsplitctl cluster check` works either way).
	StateCheckInterval time.Duration

	// TLS names the node's certificate, key and CA bundle: mutual TLS 1.3
	// on the raft port, gRPC (client certificates optional there; the
	// authorization layer demands a certificate or a token) and HTTP.
	// Exactly one of TLS and Insecure must be set.
	TLS *TLSFiles
	// Insecure runs every port in plaintext: anyone who can reach a port
	// can read and change the cluster. One WARN line at every start.
	Insecure bool
	// TokenFile holds bearer tokens (lines `name role sha256hex`, mode
	// 0600) for clients that cannot hold a certificate; reloaded on change.
	TokenFile string
	// EnablePprof serves /debug/pprof/ (to admins).
	EnablePprof bool
	// MetricsInsecure serves /metrics without authentication (for a
	// Prometheus that holds no client certificate).
	MetricsInsecure bool
	// Limits bound connections, streams, report bytes and per-identity
	// rates (zero fields take transport's defaults).
	Limits transport.Limits
	// Recovery seeds the data dir before raft starts (disaster recovery:
	// --restoreSnapshot, --forceNewCluster).
	Recovery Recovery

	Logger *slog.Logger
	// Registry receives the node's metrics and serves /metrics (default:
	// a new prometheus.Registry).
	Registry MetricsRegistry
	Clock    hlc.Source
	// Dialer opens the raft and gRPC connections to other nodes (default:
	// raftnet.DefaultDialer, plain TCP; the jepsen build's can cut links).
	Dialer raftnet.Dialer
	// Halt stops the process when it must not go on (a failed log write, an
	// entry this build cannot apply). Default: log one line, os.Exit(1).
	Halt func(error)

	RaftListener, GRPCListener, HTTPListener net.Listener

	// wrapLogStore lets this package's tests put a failing or timed store
	// under the checksums (storage.Config.WrapLog).
	wrapLogStore func(raft.LogStore) raft.LogStore
}

func (c *Config) validate() error {
	var errs []error
	if err := api.ValidateNodeID(c.ID); err != nil {
		errs = append(errs, fmt.Errorf("id: %w", err))
	}
	if c.DataDir == "" {
		errs = append(errs, errors.New("dataDir: must be set"))
	}
	if c.RaftAddr == "" && c.RaftListener == nil {
		errs = append(errs, errors.New("raftAddr: must be set"))
	}
	if c.GRPCAddr == "" && c.GRPCListener == nil {
		errs = append(errs, errors.New("grpcAddr: must be set"))
	}
	switch {
	case c.TLS == nil && !c.Insecure:
		errs = append(errs, errors.New("tls: no certificate: set TLS (certificate, key and CA files) or, for a plaintext cluster on a trusted network, Insecure"))
	case c.TLS != nil && c.Insecure:
		errs = append(errs, errors.New("tls: TLS and Insecure both set; choose one"))
	case c.TLS != nil && (c.TLS.CertFile == "" || c.TLS.KeyFile == "" || c.TLS.CAFile == ""):
		errs = append(errs, errors.New("tls: CertFile, KeyFile and CAFile must all be set"))
	}
	if c.Recovery.enabled() && (c.Bootstrap || len(c.Join) > 0) {
		errs = append(errs, errors.New("restoreSnapshot/forceNewCluster: the node forms a new cluster from the recovered state; drop --bootstrap and --join"))
	}
	if c.Bootstrap && len(c.Join) > 0 {
		errs = append(errs, errors.New("bootstrap and join: choose one (bootstrap forms a new cluster, join enters an existing one)"))
	}
	if c.Bootstrap {
		if _, err := catalog.New(c.InitialSplits, max(c.GroupID, 1)); err != nil {
			errs = append(errs, fmt.Errorf("initialSplits: %w", err))
		}
		if c.GroupCount > fsm.MaxGroups {
			errs = append(errs, fmt.Errorf("groups: %d exceeds the limit of %d", c.GroupCount, fsm.MaxGroups))
		}
	}
	for _, a := range c.Join {
		if err := client.ValidateEndpoint(a); err != nil {
			errs = append(errs, fmt.Errorf("join: %w", err))
		}
	}
	return errors.Join(errs...)
}

// maxClockOffset is MaxClockOffset as the clock monitor takes it.
func (c *Config) maxClockOffset() time.Duration {
	return defaultOrOff(c.MaxClockOffset, DefaultMaxClockOffset)
}

// stateCheckInterval is StateCheckInterval as the scheduler takes it.
func (c *Config) stateCheckInterval() time.Duration {
	return defaultOrOff(c.StateCheckInterval, DefaultStateCheckInterval)
}

// recoveryClockOffset is the clock offset a recovered cluster's HLC allows
// for: Recovery.MaxClockOffset; when that is zero, MaxClockOffset; the
// default for any that is not positive, so a recovery allows for an
// offset even with the offset check off.
func (c *Config) recoveryClockOffset() time.Duration {
	switch r := c.Recovery.MaxClockOffset; {
	case r > 0:
		return r
	case r == 0 && c.MaxClockOffset > 0:
		return c.MaxClockOffset
	}
	return DefaultMaxClockOffset
}

// defaultOrOff reads a duration setting whose zero takes def and whose
// negative value turns it off: 0, which its users read as off. cmp.Or
// alone would pass the negative value on.
func defaultOrOff(d, def time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return cmp.Or(d, def)
}
