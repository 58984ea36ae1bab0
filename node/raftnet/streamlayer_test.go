package raftnet

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/pki"
)

// streamFixture is one secure raft stream layer on loopback with a
// membership the test controls, and the refusals it counted.
type streamFixture struct {
	s        *secureStream
	addr     string
	accepted chan net.Conn

	mu       sync.Mutex // guards members, refusals, counted
	members  map[string]bool
	refusals map[string]int
	counted  chan struct{} // closed and replaced on every refusal
}

func newStreamFixture(t *testing.T, id string, members []string, tweak func(*streamConfig)) *streamFixture {
	t.Helper()
	r := nodeReloader(t, id)
	fx := &streamFixture{accepted: make(chan net.Conn, 16), members: map[string]bool{}, refusals: map[string]int{}, counted: make(chan struct{})}
	for _, m := range members {
		fx.members[m] = true
	}
	ln := listen(t)
	fx.addr = ln.Addr().String()
	cfg := streamConfig{
		ln: ln, advertise: ln.Addr(), dialer: &net.Dialer{}, tls: r,
		admit:    func(id string) bool { fx.mu.Lock(); defer fx.mu.Unlock(); return fx.members[id] },
		expectAt: func(string) string { return "" },
		refused: func(reason string) {
			fx.mu.Lock()
			fx.refusals[reason]++
			close(fx.counted)
			fx.counted = make(chan struct{})
			fx.mu.Unlock()
		},
		log: slog.New(slog.DiscardHandler),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	fx.s = newSecureStream(cfg)
	t.Cleanup(func() { fx.s.Close() })
	go func() {
		for {
			c, err := fx.s.Accept()
			if err != nil {
				return
			}
			fx.accepted <- c
		}
	}()
	return fx
}

func (fx *streamFixture) refused(reason string) int {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	return fx.refusals[reason]
}

// await waits, at most 5 s, until cond holds of the refusals counted.
func (fx *streamFixture) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(5 * time.Second)
	defer deadline.Stop()
	for {
		fx.mu.Lock()
		counted := fx.counted // before the check, so no refusal is missed
		fx.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-counted:
		case <-deadline.C:
			t.Fatalf("timed out after 5s waiting for %s", what)
		}
	}
}

func (fx *streamFixture) setMember(id string, in bool) {
	fx.mu.Lock()
	fx.members[id] = in
	fx.mu.Unlock()
}

// peerTLS is a client config holding a node certificate for id of ca
// (nil: no client certificate), trusting the test CA.
func peerTLS(t *testing.T, ca *pki.CA, id string) *tls.Config {
	t.Helper()
	if ca == nil {
		return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: testCA(t).Pool(), ServerName: "127.0.0.1"}
	}
	p, err := ca.NewNode(id, pki.NodeOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	cfg := pairTLS(t, p)
	cfg.ServerName = "127.0.0.1"
	return cfg
}

// tryPeer connects with cfg and writes a byte; it returns the error of
// the first read (TLS 1.3 clients learn of a refused certificate there).
func tryPeer(t *testing.T, addr string, cfg *tls.Config) error {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte{0}); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}

// TestSecureStreamRefusesUnverifiedPeers: without a certificate, with one
// of another CA, with a client (not node) certificate, with a node
// certificate of a non-member, or in plaintext, a peer never reaches raft
// (Accept yields nothing) and its connection is closed; a member gets
// through.
func TestSecureStreamRefusesUnverifiedPeers(t *testing.T) {
	fx := newStreamFixture(t, "n1", []string{"n1", "n2"}, nil)
	otherCA, err := pki.NewCA("other", 0)
	if err != nil {
		t.Fatal(err)
	}
	admin := peerTLS(t, nil, "")
	admin.Certificates = clientTLS(t, "test-admin", "admin").Certificates
	for _, tc := range []struct {
		name   string
		cfg    *tls.Config
		reason string
	}{
		{"no certificate", peerTLS(t, nil, ""), refusedHandshake},
		{"node certificate of another CA", peerTLS(t, otherCA, "n2"), refusedHandshake},
		{"client certificate of the cluster CA", admin, refusedNotNode},
		{"node certificate of a non-member", peerTLS(t, testCA(t), "n9"), refusedNotMember},
	} {
		before := fx.refused(tc.reason)
		if err := tryPeer(t, fx.addr, tc.cfg); err == nil {
			t.Errorf("%s: the connection stayed open", tc.name)
		}
		fx.await(t, tc.name+" refused", func() bool { return fx.refused(tc.reason) == before+1 })
	}
	// Plaintext: raft's own bytes (rpcAppendEntries, then msgpack).
	raw, err := net.Dial("tcp", fx.addr)
	if err != nil {
		t.Fatal(err)
	}
	raw.Write([]byte{0x00, 0x85, 0xa4, 'T', 'e', 'r', 'm', 0x63})
	raw.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(raw); err != nil {
		t.Errorf("plaintext: %v, want the connection closed", err)
	}
	raw.Close()
	fx.await(t, "plaintext refused", func() bool { return fx.refused(refusedHandshake) == 3 })
	select {
	case c := <-fx.accepted:
		t.Fatalf("raft was handed a connection from %v", c.RemoteAddr())
	default:
	}

	c, err := tls.Dial("tcp", fx.addr, peerTLS(t, testCA(t), "n2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	select {
	case got := <-fx.accepted:
		buf := make([]byte, 1)
		got.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(got, buf); err != nil || buf[0] != 'x' {
			t.Fatalf("member connection read %q, %v", buf, err)
		}
		got.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("a member's connection was not accepted")
	}
}

// TestSecureStreamHandshakeCapAndDeadline: connections that never start a
// handshake hold at most the cap (a new one evicts the oldest), so a
// member still gets through at once while they sit there; each is closed
// when the deadline passes.
func TestSecureStreamHandshakeCapAndDeadline(t *testing.T) {
	const capacity = 4
	fx := newStreamFixture(t, "n1", []string{"n2"}, func(c *streamConfig) {
		c.maxHandshakes, c.handshakeTimeout = capacity, 2*time.Second
	})
	var idle []net.Conn
	for range capacity + 3 {
		c, err := net.Dial("tcp", fx.addr)
		if err != nil {
			t.Fatal(err)
		}
		idle = append(idle, c)
	}
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	fx.await(t, "the 3 oldest idle connections evicted", func() bool { return fx.refused(refusedHandshakeCap) == 3 })
	for i, c := range idle[:3] {
		c.SetReadDeadline(time.Now().Add(time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("evicted connection %d: read %v, want EOF", i, err)
		}
	}
	t0 := time.Now()
	c, err := tls.Dial("tcp", fx.addr, peerTLS(t, testCA(t), "n2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	select {
	case got := <-fx.accepted:
		got.Close()
	case <-time.After(time.Second):
		t.Fatal("a member was locked out by idle connections holding the handshake slots")
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("the member waited %v", d)
	}
	// The member's arrival evicted one more; the other capacity-1 time out.
	fx.await(t, "the idle connections timed out", func() bool {
		return fx.refused(refusedHandshake) == capacity-1 && fx.refused(refusedHandshakeCap) == 4
	})
}

// TestSecureStreamClosesRemovedMember: once the membership check stops
// admitting a peer, its accepted connections are closed.
func TestSecureStreamClosesRemovedMember(t *testing.T) {
	fx := newStreamFixture(t, "n1", []string{"n2"}, func(c *streamConfig) { c.sweepInterval = 20 * time.Millisecond })
	c, err := tls.Dial("tcp", fx.addr, peerTLS(t, testCA(t), "n2"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var got net.Conn
	select {
	case got = <-fx.accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("member not accepted")
	}
	defer got.Close()
	fx.setMember("n2", false)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read on a removed member's connection: %v, want EOF", err)
	}
	if fx.refused(refusedRemoved) != 1 {
		t.Errorf("removed_member counted %d times, want 1", fx.refused(refusedRemoved))
	}
}

// TestSecureStreamDialChecksPeer: raft's dial succeeds only to the member
// it expects at the address (or, where none is known, to an admitted
// node).
func TestSecureStreamDialChecksPeer(t *testing.T) {
	server := newStreamFixture(t, "n3", []string{"n1"}, nil)
	expect := "n2"
	dialer := newStreamFixture(t, "n1", []string{"n1"}, func(c *streamConfig) {
		c.expectAt = func(string) string { return expect }
	})
	if _, err := dialer.s.Dial(raft.ServerAddress(server.addr), 2*time.Second); err == nil {
		t.Fatal("dialled n3 where n2 was expected")
	}
	expect = ""
	if _, err := dialer.s.Dial(raft.ServerAddress(server.addr), 2*time.Second); err == nil {
		t.Fatal("dialled n3, not a member, at an unknown address")
	}
	dialer.setMember("n3", true)
	c, err := dialer.s.Dial(raft.ServerAddress(server.addr), 2*time.Second)
	if err != nil {
		t.Fatalf("dial an admitted node: %v", err)
	}
	c.Close()
}

// TestSecureStreamBindsClusterID: raft connections between nodes of two
// clusters close before raft sees them, in both directions, and each end
// says so; nodes of one cluster, a node that does not know its cluster
// yet, and nodes of a build without the binding (no ALPN offered or
// accepted: a rolling upgrade) connect and carry raft's bytes.
func TestSecureStreamBindsClusterID(t *testing.T) {
	var mu sync.Mutex
	var told []string
	node := func(id, cluster string, bound bool) *streamFixture {
		return newStreamFixture(t, id, []string{"n1", "n2", "n3"}, func(c *streamConfig) {
			if bound {
				c.clusterID = func() string { return cluster }
			}
			c.otherCluster = func(peer string, err error) {
				mu.Lock()
				told = append(told, id+" about "+peer+": "+err.Error())
				mu.Unlock()
			}
		})
	}
	dialOK := func(t *testing.T, from, to *streamFixture, what string) {
		t.Helper()
		c, err := from.s.Dial(raft.ServerAddress(to.addr), 2*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("x")); err != nil {
			t.Fatalf("%s: write: %v", what, err)
		}
		select {
		case got := <-to.accepted:
			defer got.Close()
			buf := make([]byte, 1)
			got.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.ReadFull(got, buf); err != nil || buf[0] != 'x' {
				t.Fatalf("%s: raft read %q, %v: the exchange left bytes behind or ate raft's", what, buf, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not accepted", what)
		}
	}
	a1, a2 := node("n1", "aaaa", true), node("n2", "aaaa", true)
	b3 := node("n3", "bbbb", true)
	fresh := node("n3", "", true)
	legacy := node("n3", "bbbb", false)

	dialOK(t, a1, a2, "same cluster")
	dialOK(t, fresh, a1, "a fresh dialer")
	dialOK(t, a1, fresh, "to a fresh acceptor")
	dialOK(t, legacy, a1, "a dialer without the binding")
	dialOK(t, a1, legacy, "to an acceptor without the binding")

	for _, tc := range []struct {
		name     string
		from, to *streamFixture
	}{{"a node of another cluster dials", b3, a1}, {"dialling a node of another cluster", a1, b3}} {
		before := tc.to.refused(refusedOtherCluster)
		_, err := tc.from.s.Dial(raft.ServerAddress(tc.to.addr), 2*time.Second)
		if !errors.Is(err, ErrOtherCluster) || !strings.Contains(err.Error(), "bbbb") || !strings.Contains(err.Error(), "aaaa") {
			t.Fatalf("%s: %v, want ErrOtherCluster naming both clusters", tc.name, err)
		}
		tc.to.await(t, tc.name+": refused by the acceptor", func() bool { return tc.to.refused(refusedOtherCluster) == before+1 })
		select {
		case c := <-tc.to.accepted:
			t.Fatalf("%s: raft was handed the connection from %v", tc.name, c.RemoteAddr())
		default:
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(told) != 4 {
		t.Fatalf("lines about the other cluster %q, want one per end per connection", told)
	}
}
