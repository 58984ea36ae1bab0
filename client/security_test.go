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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

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

func TestTLSRefusesWrongServer(t *testing.T) {
	p, other := newTestPKI(t), newTestPKI(t)
	for name, tc := range map[string]struct {
		srv  credentials.TransportCredentials
		want string
	}{
		"server of another CA": {other.serverCreds(t, 0), "certificate"},
		"TLS 1.2 server":       {p.serverCreds(t, tls.VersionTLS12), "version"},
	} {
		f := startFake(t, &fakeNode{get: getRouteOK, creds: tc.srv})
		c := testClient(t, Config{Endpoints: []string{f.addr}, CACertFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientK, MaxRetries: -1})
		_, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("a")})
		if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Unavailable mentioning %q", name, err, tc.want)
		}
		if f.called("GetRoute") != 0 {
			t.Errorf("%s: the call reached the server", name)
		}
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

// A server that refuses the client's certificate after the TLS 1.3
// handshake closes the connection before its first byte: whether gRPC
// meets that on its preface write or on its first read, the endpoint's
// error names the certificate; once the server answered, a later error is
// the connection's own business.
func TestConnectionClosedBeforeAnswerNamesTheCertificate(t *testing.T) {
	reset := errors.New("write: connection reset by peer")
	eof := errors.New("EOF")
	for _, tc := range []struct {
		name  string
		conn  *scriptedConn
		write bool
		want  string // "" : nothing recorded
	}{
		{"preface write fails", &scriptedConn{writeErr: reset}, true, "connection reset by peer"},
		{"first read fails", &scriptedConn{readErr: eof}, false, "EOF"},
		{"fails after the server's first byte", &scriptedConn{reads: []string{"settings"}, readErr: eof}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ec := &endpointConn{}
			c := &firstReadConn{Conn: tc.conn, ec: ec}
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
				t.Fatalf("recorded %v after the server answered", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "certificate") || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("recorded %v, want the certificate named and %q", err, tc.want)
			}
		})
	}
}
