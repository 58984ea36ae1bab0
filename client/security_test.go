package client

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/credentials"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/pki"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and files for
// one client certificate.
type testPKI struct {
	ca                  *pki.CA
	caFile              string
	clientCert, clientK string
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("client-test", 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &testPKI{ca: ca, caFile: filepath.Join(dir, "ca.crt"), clientCert: filepath.Join(dir, "alice.crt"), clientK: filepath.Join(dir, "alice.key")}
	if err := ca.Write(p.caFile, filepath.Join(dir, "ca.key"), false); err != nil {
		t.Fatal(err)
	}
	alice, err := ca.NewClient("alice", []string{"operator"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Write(p.clientCert, p.clientK, false); err != nil {
		t.Fatal(err)
	}
	return p
}

// serverCreds are TLS server credentials for 127.0.0.1 with client
// certificates optional, as hotsplit's client port has them.
func (p *testPKI) serverCreds(t *testing.T, maxVersion uint16) credentials.TransportCredentials {
	t.Helper()
	srv, err := p.ca.NewNode("n1", pki.NodeOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := srv.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: p.ca.Pool(), MaxVersion: maxVersion})
}

func getRouteOK(int, *api.GetRouteRequest) (*api.GetRouteResponse, error) {
	return &api.GetRouteResponse{}, nil
}

func TestTLSClientCertificateReachesServer(t *testing.T) {
	p := newTestPKI(t)
	f := startFake(t, &fakeNode{get: getRouteOK, creds: p.serverCreds(t, 0)})
	c := testClient(t, Config{Endpoints: []string{f.addr}, CACertFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientK})
	if _, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.peerCN, []string{"alice"}) || len(f.auth) != 0 {
		t.Fatalf("server saw client CNs %q and authorization %q, want [alice] and none", f.peerCN, f.auth)
	}
}

func TestTokenSentAsBearerOverTLS(t *testing.T) {
	p := newTestPKI(t)
	f := startFake(t, &fakeNode{get: getRouteOK, creds: p.serverCreds(t, 0)})
	c := testClient(t, Config{Endpoints: []string{f.addr}, CACertFile: p.caFile, Token: "s3cr3t-token"})
	if _, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Equal(f.auth, []string{"Bearer s3cr3t-token"}) || !slices.Equal(f.peerCN, []string{""}) {
		t.Fatalf("server saw authorization %q and CNs %q", f.auth, f.peerCN)
	}
}

// TestInsecureTokenOnlyWhenAsked: a token goes over plaintext only to a
// client configured Insecure, which is the explicit way to get plaintext.
func TestInsecureTokenOnlyWhenAsked(t *testing.T) {
	f := startFake(t, &fakeNode{get: getRouteOK})
	c := testClient(t, Config{Endpoints: []string{f.addr}, Token: "tok", Insecure: true})
	if _, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Endpoints: []string{f.addr}, Token: "tok"}); !errors.Is(err, ErrNoTransportSecurity) {
		t.Fatalf("a token without TLS or Insecure: %v, want ErrNoTransportSecurity", err)
	}
}

func TestNewChecksTransportSecurity(t *testing.T) {
	p := newTestPKI(t)
	ep := []string{"127.0.0.1:7001"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want error
	}{
		{"nothing", Config{}, ErrNoTransportSecurity},
		{"insecure and TLS", Config{Insecure: true, TLS: &tls.Config{}}, ErrBadTLSConfig},
		{"insecure and files", Config{Insecure: true, CACertFile: p.caFile}, ErrBadTLSConfig},
		{"TLS and files", Config{TLS: &tls.Config{}, CACertFile: p.caFile}, ErrBadTLSConfig},
		{"cert without CA", Config{CertFile: p.clientCert, KeyFile: p.clientK}, ErrBadTLSConfig},
		{"cert without key", Config{CACertFile: p.caFile, CertFile: p.clientCert}, ErrBadTLSConfig},
		{"CA only", Config{CACertFile: p.caFile}, ErrBadTLSConfig},
		{"CA file not PEM", Config{CACertFile: p.clientK, Token: "t"}, ErrBadTLSConfig},
		{"key of another cert", Config{CACertFile: p.caFile, CertFile: p.caFile, KeyFile: p.clientK}, ErrBadTLSConfig},
		{"token with a space", Config{Insecure: true, Token: "a b"}, ErrBadTLSConfig},
	} {
		tc.cfg.Endpoints = ep
		if _, err := New(tc.cfg); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

// scriptedConn answers reads with its script and fails writes with
// writeErr.
type scriptedConn struct {
	net.Conn
	reads    []string
	readErr  error
	writeErr error
}

func (c *scriptedConn) Read(p []byte) (int, error) {
	if len(c.reads) == 0 {
		return 0, c.readErr
	}
	n := copy(p, c.reads[0])
	c.reads = c.reads[1:]
	return n, nil
}

func (c *scriptedConn) Write(p []byte) (int, error) {
	if c.writeErr != nil {
		return 0, c.writeErr
	}
	return len(p), nil
}

// What a connection records before the server's greeting: an HTTP/2
// SETTINGS frame (in any split of reads) clears the endpoint's error,
// other first bytes say what the port is, and a read or write error
// before them is left for a probe to explain (a TLS client's is the
// question whether the server refuses its certificate, a plaintext
// client's whether the server speaks TLS). The first record stays.
func TestFirstReadConnRecords(t *testing.T) {
	reset := errors.New("write: connection reset by peer")
	eof := errors.New("EOF")
	settings := string([]byte{0, 0, 0, http2FrameSettings, 0, 0, 0, 0, 0})
	earlier := errors.New("an earlier attempt's failure")
	for _, tc := range []struct {
		name     string
		conn     *scriptedConn
		insecure bool
		write    bool
		want     string    // "" : nothing recorded (cleared)
		probe    probeKind // the probe an unexplained record asks for
	}{
		{"preface write fails", &scriptedConn{writeErr: reset}, false, true, "connection reset by peer", probeTLSRefusal},
		{"first read fails", &scriptedConn{readErr: eof}, false, false, "EOF", probeTLSRefusal},
		{"plaintext: first read fails", &scriptedConn{readErr: eof}, true, false, "EOF", probeTLSServer},
		{"greeting, then a failure", &scriptedConn{reads: []string{settings}, readErr: eof}, false, false, "", 0},
		{"greeting in two reads", &scriptedConn{reads: []string{settings[:2], settings[2:]}, readErr: eof}, true, false, "", 0},
		{"HTTP/1 answer", &scriptedConn{reads: []string{"HTTP/1.1 400 Bad Request"}, readErr: eof}, true, false, "HTTP/1", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := &endpointConn{addr: "127.0.0.1:1"}
			ec.setDialErr(earlier)
			c := &firstReadConn{Conn: tc.conn, ec: ec, sec: security{insecure: tc.insecure}}
			buf := make([]byte, 16)
			if tc.write {
				c.Write([]byte("PRI * HTTP/2.0"))
			}
			for range 3 {
				if _, err := c.Read(buf); err != nil {
					break
				}
			}
			c.Write([]byte("more")) // a later error never replaces the first
			err := ec.lastDialErr()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("recorded %v after the server's greeting", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("recorded %v, want %q", err, tc.want)
			}
			u, ok := err.(*unexplained)
			if tc.probe != 0 && (!ok || u.probe != tc.probe) {
				t.Fatalf("recorded %#v, want an unexplained error for probe %d", err, tc.probe)
			}
			if tc.probe == 0 && ok {
				t.Fatalf("recorded %v as unexplained", err)
			}
		})
	}
}

// A TCP connect that succeeds does not clear the endpoint's last failure:
// the TLS handshake after it may fail, and a call that finds the
// connection failed must find that failure's cause, not nothing.
func TestSuccessfulDialKeepsLastFailure(t *testing.T) {
	f := startFake(t, &fakeNode{})
	ec := &endpointConn{addr: f.addr}
	failure := errors.New("tls: bad certificate")
	ec.setDialErr(failure)
	conn, err := ec.dial(context.Background(), f.addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
	if got := ec.lastDialErr(); got != failure {
		t.Fatalf("after a TCP connect the last failure is %v, want %v", got, failure)
	}
	if _, err := ec.dial(context.Background(), deadAddr(t)); err == nil || ec.lastDialErr() != err {
		t.Fatalf("a failed connect was not recorded: %v", ec.lastDialErr())
	}
}
