package client

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// Defaults for the zero values of Config.
const (
	// DefaultDialTimeout bounds the wait for a connection to one endpoint:
	// a paused node accepts TCP but never completes the handshake.
	DefaultDialTimeout = time.Second
	// DefaultAttemptTimeout bounds one attempt of a call: a leader that
	// stopped answering (paused, partitioned) is given up for the next
	// endpoint after this long, while the call goes on until RequestTimeout.
	DefaultAttemptTimeout = time.Second
	DefaultRequestTimeout = 5 * time.Second
	// DefaultWatchRetries is how many consecutive failed connections Watch
	// tolerates when MaxRetries is 0.
	DefaultWatchRetries = 5
	DefaultBackoff      = 50 * time.Millisecond
	// MaxBackoff caps the delay between two attempts, whatever Backoff is;
	// it applies to overload (ResourceExhausted).
	MaxBackoff = 2 * time.Second
	// MaxElectionBackoff caps the delay between attempts that failed for
	// want of a leader (Unavailable, a node that did not answer): a new
	// leader is noticed within this long of its election.
	MaxElectionBackoff = 200 * time.Millisecond
)

const (
	// maxHintConns bounds the connections opened to leader-hint addresses
	// outside Config.Endpoints; a cluster has a handful of members, so more
	// distinct hints than this mean something is wrong and are not followed.
	maxHintConns = 8
	// maxRecvMsgSize admits pages larger than gRPC's 4 MiB default: a
	// ListRoutes or snapshot page of 1000 routes whose keys are near the
	// 4 KiB limit is about 8 MiB.
	maxRecvMsgSize = 64 << 20
)

// Config configures a Client. Only Endpoints is required.
type Config struct {
	// Endpoints are the gRPC addresses (host:port) of cluster members. Any
	// member will do: followers forward mutations to the leader.
	Endpoints []string
	// DialTimeout bounds one connection attempt to one endpoint
	// (default DefaultDialTimeout).
	DialTimeout time.Duration
	// AttemptTimeout bounds one attempt of a call (default
	// DefaultAttemptTimeout); calls that wait on raft by design (leadership
	// transfer, membership changes, snapshots) get the whole RequestTimeout.
	AttemptTimeout time.Duration
	// RequestTimeout bounds one call including all its retries, unless the
	// caller's context ends sooner (default DefaultRequestTimeout). It does
	// not apply to Watch, which runs until its context ends.
	RequestTimeout time.Duration
	// MaxRetries caps the retries of a call after its first attempt when
	// retrying is safe. 0 (the default) retries until RequestTimeout, which
	// is what bounds a call; negative never retries. For Watch it is the
	// number of consecutive failed connections tolerated (0 =
	// DefaultWatchRetries).
	MaxRetries int
	// Backoff is the base delay between retries; it doubles per retry, is
	// capped at MaxBackoff and jittered (default DefaultBackoff).
	Backoff time.Duration
	// Logger receives retry and reconnect events at Debug level
	// (default: discarded).
	Logger *slog.Logger
	// Actor is put on mutations whose request leaves actor empty. It is
	// self-declared: servers record the authenticated identity as the actor
	// and keep this text as a note beside it.
	Actor string

	// Transport security: exactly one of TLS, the CACertFile set, or
	// Insecure.
	//
	// TLS is used as given except that its minimum version is raised to TLS
	// 1.3; gRPC sets ServerName to each endpoint's host, which the server's
	// certificate must carry as an IP or DNS name. A long-lived process
	// rotating its client certificate sets GetClientCertificate.
	TLS *tls.Config
	// CACertFile is the cluster's CA bundle (PEM); CertFile and KeyFile the
	// client certificate (CN = name, O = roles) and its key, both or
	// neither (a client without a certificate needs a Token). Read once by
	// New.
	CACertFile, CertFile, KeyFile string
	// Token is a bearer token sent with every call as the metadata
	// "authorization: Bearer <token>", for clients that cannot hold a
	// certificate.
	Token string
	// Insecure connects without TLS, to a cluster started with --insecure.
	// Anything on the network path can read and change the traffic,
	// including a Token.
	Insecure bool
}

// Client is a connection to a hotsplit cluster. It is safe for concurrent
// use by many goroutines. Connections are opened lazily, one per address, and
// kept until Close.
type Client struct {
	endpoints      []string
	dialTimeout    time.Duration
	attemptTimeout time.Duration
	requestTimeout time.Duration
	maxRetries     int
	backoff        time.Duration
	log            *slog.Logger
	actor          string
	creds          credentials.TransportCredentials
	sec            security
	perRPC         credentials.PerRPCCredentials // nil without a token

	mu     sync.Mutex
	conns  map[string]*endpointConn // by address; endpoints and hints
	hinted map[string]bool          // hint addresses outside endpoints
	leader string                   // last hinted leader address, "" if unknown
	cursor int                      // next endpoint to try when no leader is known
	closed bool
	// watchCluster is the cluster id of the last snapshot a watch
	// delivered: a later Watch from a version sends it, so a restored
	// cluster resyncs the watcher instead of waiting for that version.
	watchCluster string
	// suspect holds addresses that did not answer an attempt (a paused or
	// partitioned node), until when calls avoid them while others remain.
	suspect map[string]time.Time
}

// suspectFor is how long an address that did not answer is avoided.
const suspectFor = 3 * time.Second

// New validates cfg and returns a Client. No connection is made until the
// first call. It fails with ErrNoEndpoints when cfg.Endpoints is empty and
// with ErrBadEndpoint (naming the entry) when an endpoint is not host:port.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, ErrNoEndpoints
	}
	eps := make([]string, 0, len(cfg.Endpoints))
	seen := make(map[string]bool, len(cfg.Endpoints))
	for i, ep := range cfg.Endpoints {
		if err := ValidateEndpoint(ep); err != nil {
			return nil, fmt.Errorf("%w: Config.Endpoints[%d] %q: %v", ErrBadEndpoint, i, ep, err)
		}
		if !seen[ep] {
			seen[ep] = true
			eps = append(eps, ep)
		}
	}
	switch {
	case cfg.DialTimeout < 0:
		return nil, fmt.Errorf("client: Config.DialTimeout is negative (%v)", cfg.DialTimeout)
	case cfg.AttemptTimeout < 0:
		return nil, fmt.Errorf("client: Config.AttemptTimeout is negative (%v)", cfg.AttemptTimeout)
	case cfg.RequestTimeout < 0:
		return nil, fmt.Errorf("client: Config.RequestTimeout is negative (%v)", cfg.RequestTimeout)
	case cfg.Backoff < 0:
		return nil, fmt.Errorf("client: Config.Backoff is negative (%v)", cfg.Backoff)
	}
	creds, sec, err := transportCredentials(cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{
		creds:          creds,
		sec:            sec,
		endpoints:      eps,
		dialTimeout:    cmp.Or(cfg.DialTimeout, DefaultDialTimeout),
		attemptTimeout: cmp.Or(cfg.AttemptTimeout, DefaultAttemptTimeout),
		requestTimeout: cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout),
		maxRetries:     cfg.MaxRetries,
		backoff:        min(cmp.Or(cfg.Backoff, DefaultBackoff), MaxBackoff),
		log:            cfg.Logger,
		actor:          cfg.Actor,
		conns:          make(map[string]*endpointConn),
		hinted:         make(map[string]bool),
		suspect:        make(map[string]time.Time),
	}
	if cfg.Token != "" {
		c.perRPC = bearer{token: cfg.Token, secure: !cfg.Insecure}
	}
	if c.maxRetries < 0 {
		c.maxRetries = -1 // never
	}
	if c.log == nil {
		c.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c, nil
}

// ValidateEndpoint reports whether ep is a usable endpoint: host:port with a
// non-empty host free of spaces and slashes (so that "dns:///x:1" or
// "http://x:1" are refused rather than misread) and a numeric port in
// 1..65535. The error says what is wrong.
func ValidateEndpoint(ep string) error {
	host, port, err := net.SplitHostPort(ep)
	if err != nil {
		return fmt.Errorf("want host:port: %v", err)
	}
	if host == "" {
		return fmt.Errorf("want host:port: empty host")
	}
	if strings.ContainsAny(host, " \t/") {
		return fmt.Errorf("want host:port: host %q contains a space or slash", host)
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil || p == 0 {
		return fmt.Errorf("want host:port: port %q is not a number in 1..65535", port)
	}
	return nil
}

// Endpoints returns the configured endpoints, duplicates removed.
func (c *Client) Endpoints() []string { return append([]string(nil), c.endpoints...) }

// LeaderAddr returns the leader address last learned from a LeaderHint, or ""
// when none is known. It is only a hint: leadership may have moved since.
func (c *Client) LeaderAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leader
}

// Close closes every connection. Calls in flight fail; later calls return
// ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	conns := c.conns
	c.conns = nil
	c.closed = true
	c.mu.Unlock()
	var first error
	for _, ec := range conns {
		if err := ec.cc.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// endpointConn is the connection to one address, plus the last dial error
// so that "unreachable" can say why (connection refused, no route, an
// expired certificate, ...).
type endpointConn struct {
	cc   *grpc.ClientConn
	addr string

	mu sync.Mutex
	// dialErr is the last connection failure: TCP, TLS, or the server's
	// greeting. It is recorded before gRPC learns of the failure, so a
	// connection in TRANSIENT_FAILURE always finds its own cause here, and
	// cleared only by a gRPC server's greeting (not by a TCP connect that
	// may fail next in TLS).
	dialErr error
}

func (e *endpointConn) dial(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		e.setDialErr(err)
	}
	return conn, err
}

func (e *endpointConn) setDialErr(err error) {
	e.mu.Lock()
	e.dialErr = err
	e.mu.Unlock()
}

// replaceDialErr swaps in an explanation of old unless a newer failure (or
// a greeting) replaced old meanwhile.
func (e *endpointConn) replaceDialErr(old, explained error) {
	e.mu.Lock()
	if e.dialErr == old {
		e.dialErr = explained
	}
	e.mu.Unlock()
}

func (e *endpointConn) lastDialErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.dialErr
}

// conn returns the connection to addr, creating it (without dialing) on
// first use.
func (c *Client) conn(addr string) (*endpointConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if ec, ok := c.conns[addr]; ok {
		return ec, nil
	}
	ec := &endpointConn{addr: addr}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(handshakeRecorder{c.creds, ec, c.sec}),
		grpc.WithContextDialer(ec.dial),
		grpc.WithStatsHandler(callObserver{}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: c.backoff, Multiplier: 2, Jitter: 0.2, MaxDelay: MaxBackoff},
			MinConnectTimeout: c.dialTimeout,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize)),
	}
	if c.perRPC != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(c.perRPC))
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: connection to %s: %w", addr, err)
	}
	ec.cc = cc
	c.conns[addr] = ec
	return ec, nil
}

// firstAddr is where a call starts: the hinted leader if known, else the
// endpoint after the one the previous call started with, so that load and
// failures spread over the list; endpoints that recently did not answer
// are skipped while others remain.
func (c *Client) firstAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader != "" {
		return c.leader
	}
	for range c.endpoints {
		addr := c.endpoints[c.cursor%len(c.endpoints)]
		c.cursor++
		if !c.isSuspect(addr) {
			return addr
		}
	}
	addr := c.endpoints[c.cursor%len(c.endpoints)]
	c.cursor++
	return addr
}

// nextAddr is where a call goes after failing at addr without a usable hint:
// the endpoint following addr in the list (the first one if addr is a hint
// address outside the list), skipping suspects while others remain.
func (c *Client) nextAddr(addr string) string {
	start := 0
	for i, ep := range c.endpoints {
		if ep == addr {
			start = i + 1
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.endpoints {
		if ep := c.endpoints[(start+k)%len(c.endpoints)]; !c.isSuspect(ep) && ep != addr {
			return ep
		}
	}
	return c.endpoints[start%len(c.endpoints)]
}

// isSuspect reports whether addr did not answer recently. c.mu held.
func (c *Client) isSuspect(addr string) bool {
	until, ok := c.suspect[addr]
	if ok && time.Now().After(until) {
		delete(c.suspect, addr)
		return false
	}
	return ok
}

// markAnswered records whether addr answered an attempt at all (any
// status from the server counts); one that did not is avoided for a while.
func (c *Client) markAnswered(addr string, answered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if answered {
		delete(c.suspect, addr)
	} else {
		c.suspect[addr] = time.Now().Add(suspectFor)
	}
}

// forgetLeader drops the leader hint if it still names addr, after addr
// failed to serve a call.
func (c *Client) forgetLeader(addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.leader == addr {
		c.leader = ""
	}
}

// learnLeader records hint as the leader and returns the address to try
// next: the hinted one, which may be from itself (a busy leader, e.g. an
// enqueue timeout). It returns "" when the hint is unusable: empty,
// malformed, or one address too many outside the endpoint list.
func (c *Client) learnLeader(hint *api.LeaderHint, from string) string {
	addr := hint.GetLeaderGrpcAddr()
	if addr == "" {
		return ""
	}
	if err := ValidateEndpoint(addr); err != nil {
		c.log.Debug("ignoring malformed leader hint", "endpoint", from, "hint", addr, "err", err)
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hinted[addr] && !c.isEndpoint(addr) {
		if len(c.hinted) >= maxHintConns {
			c.log.Debug("not following leader hint: too many hinted addresses", "endpoint", from, "hint", addr)
			return ""
		}
		c.hinted[addr] = true
	}
	c.leader = addr
	return addr
}

func (c *Client) isEndpoint(addr string) bool {
	for _, ep := range c.endpoints {
		if ep == addr {
			return true
		}
	}
	return false
}

// withTimeout bounds a call by RequestTimeout.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.requestTimeout)
}
