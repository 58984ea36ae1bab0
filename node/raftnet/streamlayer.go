package raftnet

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotsplit/hotsplit/internal/loglimit"
	"github.com/hotsplit/hotsplit/pki"
)

// Dialer opens connections to other nodes. Raft and inter-node gRPC both dial
// through the node's one Dialer, so the jepsen build can cut or delay every
// link to a chosen peer in one place; TLS runs over the connections it
// returns.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Raft stream layer limits (docs/design.md#trust-and-integrity): a connection that has not finished
// its TLS handshake and member check within raftHandshakeTimeout is closed,
// and at most MaxHandshakes connections may be at that stage at once: a
// new one beyond the cap evicts the oldest, so idle connections cannot
// hold every slot and lock a member out (a member's handshake takes a few
// round trips; an attacker must open connections faster than that to
// starve it). Raft connections are few and long-lived (a pool of 3 per
// peer), so the cap only ever bites a flood.
const (
	raftHandshakeTimeout = 3 * time.Second
	// MaxHandshakes is the cap on raft connections still handshaking.
	MaxHandshakes = 64
	// raftSweepInterval is how often accepted connections are checked
	// against the current membership, so a removed member's connections
	// close.
	raftSweepInterval = time.Second
)

// plainStream is raft's transport over a listener and the node's Dialer,
// without TLS (--insecure).
type plainStream struct {
	net.Listener
	advertise net.Addr
	dialer    Dialer
}

func resolveAdvertise(advertise string) (net.Addr, error) {
	addr, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
	}
	if addr.IP == nil || addr.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft advertise address %q: must be a reachable host, not unspecified", advertise)
	}
	return addr, nil
}

func (s *plainStream) Addr() net.Addr { return s.advertise }

func (s *plainStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dialer.DialContext(ctx, "tcp", string(address))
}

// secureStream is raft's transport over mutual TLS. A peer must present a
// node certificate of the cluster CA whose CN the membership check admits
// before raft reads one byte from it: the handshake and the check run in a
// goroutine per connection under raftHandshakeTimeout, and Accept hands
// raft only connections that passed, never an error for one that did not
// (raft's accept loop backs off on errors, which would let one bad peer
// slow everyone's connections).
//
// Concurrency: Accept, Dial and Close may be called from any goroutine.
type secureStream struct {
	streamConfig
	verified  chan net.Conn
	closed    chan struct{}
	ctx       context.Context // ends at Close: aborts handshakes in flight
	cancel    context.CancelFunc
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu    sync.Mutex // guards conns, handshaking and inFlight
	conns map[*tls.Conn]string
	// handshaking holds the raw connections still in handshake, with
	// their arrival; inFlight counts their goroutines, evicted ones
	// included until they return (at most twice the cap).
	handshaking map[net.Conn]time.Time
	inFlight    int
}

// streamConfig is what a secureStream is built from.
type streamConfig struct {
	ln        net.Listener
	advertise net.Addr
	dialer    Dialer
	tls       *pki.Reloader
	// admit says whether a node id may hold raft connections to this node
	// now; expectAt names the member raft knows at an address ("" if none).
	admit    func(id string) bool
	expectAt func(addr string) string
	// clusterID is the cluster this node belongs to ("" while it does not
	// know); nil turns the cluster id binding off (clusterid.go).
	clusterID func() string
	refused   func(reason string)
	// otherCluster says, rate limited, that a connection from or to a node
	// of another cluster was closed.
	otherCluster func(peerID string, err error)
	log          *slog.Logger
	// Zero values take raftHandshakeTimeout, MaxHandshakes and
	// raftSweepInterval.
	handshakeTimeout time.Duration
	maxHandshakes    int
	sweepInterval    time.Duration
}

// Reasons a raft connection is refused or closed (the reason label of
// hotsplit_raft_conns_refused_total).
const (
	refusedHandshakeCap = "handshake_cap"
	refusedHandshake    = "handshake"
	refusedNotNode      = "not_node_certificate"
	refusedNotMember    = "not_member"
	refusedRemoved      = "removed_member"
	refusedOtherCluster = "other_cluster"
)

func newSecureStream(cfg streamConfig) *secureStream {
	if cfg.handshakeTimeout <= 0 {
		cfg.handshakeTimeout = raftHandshakeTimeout
	}
	if cfg.maxHandshakes <= 0 {
		cfg.maxHandshakes = MaxHandshakes
	}
	if cfg.sweepInterval <= 0 {
		cfg.sweepInterval = raftSweepInterval
	}
	if cfg.otherCluster == nil {
		cfg.otherCluster = func(string, error) {}
	}
	s := &secureStream{
		streamConfig: cfg,
		verified:     make(chan net.Conn),
		handshaking:  map[net.Conn]time.Time{},
		closed:       make(chan struct{}),
		conns:        map[*tls.Conn]string{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(2)
	go s.acceptLoop()
	go s.sweepLoop()
	return s
}

func (s *secureStream) Addr() net.Addr { return s.advertise }

// Accept returns the next connection whose peer proved a member identity.
func (s *secureStream) Accept() (net.Conn, error) {
	select {
	case c := <-s.verified:
		return c, nil
	case <-s.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting and closes connections not yet handed to raft.
func (s *secureStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		close(s.closed)
		s.cancel()
		err = s.ln.Close()
		s.wg.Wait()
	})
	return err
}

func (s *secureStream) acceptLoop() {
	defer s.wg.Done()
	var delay time.Duration
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.closed:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// e.g. out of file descriptors: back off like raft would.
			delay = min(max(2*delay, 5*time.Millisecond), time.Second)
			s.log.Warn("raft listener accept failed", "reason", err.Error())
			select {
			case <-time.After(delay):
			case <-s.closed:
				return
			}
			continue
		}
		delay = 0
		if !s.admitHandshake(c) {
			s.refused(refusedHandshakeCap)
			c.Close()
			continue
		}
		s.wg.Add(1)
		go s.handshake(c)
	}
}

// admitHandshake registers c as handshaking, evicting the oldest
// handshake when the cap is reached. It refuses c only when evicted
// handshakes have not returned yet and twice the cap are in flight.
func (s *secureStream) admitHandshake(c net.Conn) bool {
	s.mu.Lock()
	if s.inFlight >= 2*s.maxHandshakes {
		s.mu.Unlock()
		return false
	}
	var oldest net.Conn
	if len(s.handshaking) >= s.maxHandshakes {
		var at time.Time
		for hc, t := range s.handshaking {
			if oldest == nil || t.Before(at) {
				oldest, at = hc, t
			}
		}
		delete(s.handshaking, oldest)
	}
	s.handshaking[c] = time.Now()
	s.inFlight++
	s.mu.Unlock()
	if oldest != nil {
		s.refused(refusedHandshakeCap)
		oldest.Close()
	}
	return true
}

// endHandshake unregisters raw; evicted is true when admitHandshake had
// already closed it for a newer connection.
func (s *secureStream) endHandshake(raw net.Conn) (evicted bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inFlight--
	if _, ok := s.handshaking[raw]; !ok {
		return true
	}
	delete(s.handshaking, raw)
	return false
}

// handshake verifies one inbound connection and hands it to Accept.
func (s *secureStream) handshake(raw net.Conn) {
	defer s.wg.Done()
	ctx, cancel := context.WithTimeout(s.ctx, s.handshakeTimeout)
	tc, id, reason, err := s.verifyInbound(ctx, raw)
	cancel()
	evicted := s.endHandshake(raw)
	if err != nil {
		if !evicted { // an eviction was counted when it happened
			s.refused(reason)
		}
		raw.Close() // after counting: a peer that sees the close sees the count
		s.log.Debug("raft connection refused", "remote", raw.RemoteAddr().String(), "reason", reason+": "+err.Error())
		return
	}
	if evicted { // lost the race with its eviction: the peer redials
		tc.Close()
		return
	}
	s.mu.Lock()
	s.conns[tc] = id
	s.mu.Unlock()
	select {
	case s.verified <- &trackedConn{Conn: tc, s: s}:
	case <-s.closed:
		s.forget(tc)
		tc.Close()
	}
}

func (s *secureStream) verifyInbound(ctx context.Context, raw net.Conn) (*tls.Conn, string, string, error) {
	// The deadline also bounds a peer that connects and sends nothing.
	raw.SetDeadline(time.Now().Add(s.handshakeTimeout))
	tc := tls.Server(raw, s.tls.ServerConfig(tls.RequireAndVerifyClientCert, s.protos()...))
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, "", refusedHandshake, err
	}
	leaf := tc.ConnectionState().PeerCertificates[0]
	id := leaf.Subject.CommonName
	if !pki.IsNode(leaf) {
		return nil, id, refusedNotNode, fmt.Errorf("certificate CN=%q O=%v is not a node certificate", id, leaf.Subject.Organization)
	}
	if tc.ConnectionState().NegotiatedProtocol == raftClusterALPN {
		if err := acceptClusterID(tc, s.clusterID(), id); err != nil {
			if errors.Is(err, ErrOtherCluster) {
				s.otherCluster(id, err)
				return nil, id, refusedOtherCluster, err
			}
			return nil, id, refusedHandshake, err
		}
	}
	if !s.admit(id) {
		return nil, id, refusedNotMember, fmt.Errorf("node %q is not a member of the raft configuration", id)
	}
	raw.SetDeadline(time.Time{})
	return tc, id, "", nil
}

// Dial opens a TLS connection to a peer and checks that it is the member
// raft knows at that address (or, for an address raft does not know, a
// node the membership check admits).
func (s *secureStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	addr := string(address)
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("raft dial %s: %w", addr, err)
	}
	raw, err := s.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	tc := tls.Client(raw, s.tls.ClientConfig(host, s.protos()...))
	if err := tc.HandshakeContext(ctx); err != nil {
		raw.Close()
		return nil, fmt.Errorf("raft dial %s: TLS: %w", addr, err)
	}
	leaf := tc.ConnectionState().PeerCertificates[0]
	if err := CheckPeerNode(leaf, s.expectAt(addr), s.admit); err != nil {
		tc.Close()
		return nil, fmt.Errorf("raft dial %s: %w", addr, err)
	}
	if tc.ConnectionState().NegotiatedProtocol == raftClusterALPN {
		deadline, _ := ctx.Deadline()
		if err := dialClusterID(tc, s.clusterID(), leaf.Subject.CommonName, deadline); err != nil {
			tc.Close()
			if errors.Is(err, ErrOtherCluster) {
				s.otherCluster(leaf.Subject.CommonName, err)
			}
			return nil, fmt.Errorf("raft dial %s: %w", addr, err)
		}
	}
	return tc, nil
}

// protos are the TLS application protocols this node's raft connections
// offer and accept: the cluster id binding's, when it is on.
func (s *secureStream) protos() []string {
	if s.clusterID == nil {
		return nil
	}
	return []string{raftClusterALPN}
}

// sweepLoop closes accepted connections of peers the membership check no
// longer admits (a removed member).
func (s *secureStream) sweepLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-s.closed:
			return
		case <-t.C:
			s.sweep()
		}
	}
}

func (s *secureStream) sweep() {
	s.mu.Lock()
	var drop []*tls.Conn
	for c, id := range s.conns {
		if !s.admit(id) {
			drop = append(drop, c)
		}
	}
	s.mu.Unlock()
	for _, c := range drop {
		s.refused(refusedRemoved)
		s.log.Info("closing the raft connection of a node that is no longer a member", "peer_id", s.peerID(c))
		s.forget(c)
		c.Close()
	}
}

func (s *secureStream) peerID(c *tls.Conn) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[c]
}

func (s *secureStream) forget(c *tls.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// trackedConn forgets its connection when raft closes it.
type trackedConn struct {
	*tls.Conn
	s *secureStream
}

func (c *trackedConn) Close() error {
	c.s.forget(c.Conn)
	return c.Conn.Close()
}

// StreamConfig is what NewStreamLayer builds a node's raft stream layer
// from.
type StreamConfig struct {
	// Listener is the raft port; Advertise the address peers reach it at.
	Listener  net.Listener
	Advertise string
	Dialer    Dialer
	// TLS is the node's certificate material; nil runs plaintext
	// (--insecure).
	TLS *pki.Reloader
	// Admit says whether a node id may hold raft connections to this node
	// now; ExpectAt names the member raft knows at an address ("" if
	// none). Both are called from the stream's goroutines, before raft
	// runs too.
	Admit    func(id string) bool
	ExpectAt func(addr string) string
	// ClusterID is the cluster this node belongs to, "" while it does not
	// know yet (a fresh node before its first entries): raft connections
	// to and from a node that names another cluster close before raft
	// reads from them (TLS only, negotiated with older builds; see
	// clusterid.go). nil turns the binding off. Called from the stream's
	// goroutines, before raft runs too.
	ClusterID func() string
	Logger    *slog.Logger
	// Registerer receives hotsplit_raft_conns_refused_total (TLS only).
	Registerer prometheus.Registerer
}

// NewStreamLayer is raft's stream layer for one node: mutual TLS with the
// membership check, or plaintext without TLS. Close it to stop accepting.
func NewStreamLayer(cfg StreamConfig) (raft.StreamLayer, error) {
	addr, err := resolveAdvertise(cfg.Advertise)
	if err != nil {
		return nil, err
	}
	if cfg.TLS == nil {
		return &plainStream{Listener: cfg.Listener, advertise: addr, dialer: cfg.Dialer}, nil
	}
	refusals := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hotsplit_raft_conns_refused_total",
		Help: "Raft connections refused or closed by reason: handshake_cap (too many still handshaking), handshake (TLS failed: no or bad certificate, timeout), not_node_certificate, not_member, removed_member, other_cluster (a node of another cluster id).",
	}, []string{"reason"})
	for _, r := range []string{refusedHandshakeCap, refusedHandshake, refusedNotNode, refusedNotMember, refusedRemoved, refusedOtherCluster} {
		refusals.WithLabelValues(r)
	}
	cfg.Registerer.MustRegister(refusals)
	rl := loglimit.New(refusalLogEvery, 16)
	refused := func(reason string) {
		refusals.WithLabelValues(reason).Inc()
		if ok, held := rl.Allow(reason, time.Now()); ok {
			cfg.Logger.Warn("raft connections refused", "reason", reason, "count", held+1)
		}
	}
	peers := loglimit.New(refusalLogEvery, 16)
	otherCluster := func(peerID string, err error) {
		if ok, held := peers.Allow(peerID, time.Now()); ok {
			cfg.Logger.Warn("raft connection with a node of another cluster closed: its votes, entries and answers count for nothing here",
				"peer_id", peerID, "reason", err.Error(), "count", held+1)
		}
	}
	return newSecureStream(streamConfig{ln: cfg.Listener, advertise: addr, dialer: cfg.Dialer, tls: cfg.TLS, admit: cfg.Admit, expectAt: cfg.ExpectAt,
		clusterID: cfg.ClusterID, refused: refused, otherCluster: otherCluster, log: cfg.Logger}), nil
}

// refusalLogEvery spaces the WARN lines of one refusal reason: a flood of
// bad connections must not flood the log; each line counts the refusals
// since the last.
const refusalLogEvery = 10 * time.Second
