package client

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/pki"
)

// leafSpec is a certificate to sign with a test CA: validity window,
// usage and addresses.
type leafSpec struct {
	cn                  string
	notBefore, notAfter time.Time
	server              bool     // serverAuth (else clientAuth)
	ips                 []net.IP // server only
}

// signLeaf signs spec with ca and writes the certificate and its key to
// dir; pki makes certificates valid from now only, so expired and
// not-yet-valid ones are signed here with the CA's key.
func signLeaf(t *testing.T, ca *pki.CA, dir string, spec leafSpec) (certFile, keyFile string, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: spec.cn, Organization: []string{"operator"}},
		NotBefore:    spec.notBefore,
		NotAfter:     spec.notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if spec.server {
		tmpl.Subject.Organization = []string{"node"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = spec.ips
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
	certFile, keyFile = filepath.Join(dir, spec.cn+".crt"), filepath.Join(dir, spec.cn+".key")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, pair
}

// serverPair is a valid node certificate of p for 127.0.0.1.
func (p *testPKI) serverPair(t *testing.T) tls.Certificate {
	t.Helper()
	srv, err := p.ca.NewNode("n1", pki.NodeOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	cert, err := srv.TLSCertificate()
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// grpcServerCreds serve cert as a node's client port does: TLS 1.3,
// client certificates of p's CA verified when given.
func (p *testPKI) grpcServerCreds(cert tls.Certificate) credentials.TransportCredentials {
	return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: p.ca.Pool()})
}

// rawServer is a loopback listener whose connections serve runs; it
// counts them.
type rawServer struct {
	addr    string
	accepts atomic.Int32
}

func startRaw(t *testing.T, serve func(net.Conn)) *rawServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{addr: lis.Addr().String()}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			s.accepts.Add(1)
			go serve(c)
		}
	}()
	return s
}

// startHTTP serves net/http's default 404 on loopback: HTTPS with HTTP/2
// as a node's --httpAddr does under TLS when cert is given, else plain
// HTTP/1.
func startHTTP(t *testing.T, cert *tls.Certificate) *rawServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{addr: lis.Addr().String()}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	counted := countingListener{lis, &s.accepts}
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}, NextProtos: []string{"h2", "http/1.1"}}
		go func() { _ = srv.ServeTLS(counted, "", "") }()
	} else {
		go func() { _ = srv.Serve(counted) }()
	}
	t.Cleanup(func() { srv.Close() })
	return s
}

// startTLSWithoutALPN is a TLS server that offers no application protocol
// and requires a client certificate, as the raft port does.
func startTLSWithoutALPN(t *testing.T, p *testPKI, cert tls.Certificate) *rawServer {
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.ca.Pool()}
	return startRaw(t, func(c net.Conn) {
		defer c.Close()
		tc := tls.Server(c, cfg)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if tc.Handshake() == nil {
			tc.Read(make([]byte, 1))
		}
	})
}

// A permanent failure, one per row: classified from its typed error into
// the problem and the setting to fix, said in one line, never retried.
// Each call has 10 s to retry; a retry loop (200 ms pauses at most) would
// take them.
func TestPermanentFailuresClassified(t *testing.T) {
	p, other := newTestPKI(t), newTestPKI(t)
	dir := t.TempDir()
	now := time.Now()
	expiredCert, expiredKey, expiredPair := signLeaf(t, p.ca, dir, leafSpec{cn: "expired", notBefore: now.Add(-48 * time.Hour), notAfter: now.Add(-time.Hour)})
	futureCert, futureKey, _ := signLeaf(t, p.ca, dir, leafSpec{cn: "future", notBefore: now.Add(24 * time.Hour), notAfter: now.Add(48 * time.Hour)})
	_, _, oldServer := signLeaf(t, p.ca, dir, leafSpec{cn: "old-node", notBefore: now.Add(-48 * time.Hour), notAfter: now.Add(-time.Hour), server: true, ips: []net.IP{net.ParseIP("127.0.0.1")}})
	_, _, elsewhere := signLeaf(t, p.ca, dir, leafSpec{cn: "elsewhere", notBefore: now.Add(-time.Hour), notAfter: now.Add(time.Hour), server: true, ips: []net.IP{net.ParseIP("127.0.0.2")}})
	good := p.serverPair(t)

	files := func(cert, key string) Config {
		return Config{CACertFile: p.caFile, CertFile: cert, KeyFile: key}
	}
	grpcTLS := func(cert tls.Certificate) func(*testing.T) (string, func() int32) {
		return func(t *testing.T) (string, func() int32) {
			f := startFake(t, &fakeNode{get: getRouteOK, creds: p.grpcServerCreds(cert)})
			return f.addr, f.accepts.Load
		}
	}
	grpcPlain := func(t *testing.T) (string, func() int32) {
		f := startFake(t, &fakeNode{get: getRouteOK})
		return f.addr, f.accepts.Load
	}
	httpServer := func(cert *tls.Certificate) func(*testing.T) (string, func() int32) {
		return func(t *testing.T) (string, func() int32) {
			s := startHTTP(t, cert)
			return s.addr, s.accepts.Load
		}
	}
	for _, tc := range []struct {
		name    string
		cfg     Config
		server  func(*testing.T) (string, func() int32)
		problem Problem
		setting Setting
		file    string
		want    []string
		dials   int32 // connections the server may see: the attempt and one probe; 0 when found before dialing
	}{
		{"expired client certificate", files(expiredCert, expiredKey), grpcTLS(good), ProblemCertExpired, SettingCertFile, expiredCert,
			[]string{"certificate expired at " + formatTime(now.Add(-time.Hour)), "renew it"}, 0},
		{"client certificate not yet valid", files(futureCert, futureKey), grpcTLS(good), ProblemCertNotYetValid, SettingCertFile, futureCert,
			[]string{"not valid before " + formatTime(now.Add(24*time.Hour)), "clock"}, 0},
		{"client certificate of another CA", files(other.clientCert, other.clientK), grpcTLS(good), ProblemCertRefused, SettingCertFile, other.clientCert,
			[]string{"refused this client certificate", "unknown certificate authority"}, 2},
		{"client certificate the server finds expired", Config{TLS: &tls.Config{RootCAs: p.ca.Pool(),
			GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &expiredPair, nil }}},
			grpcTLS(good), ProblemCertRefused, SettingTLS, "", []string{"expired certificate", "server's clock"}, 2},
		{"CA file of another cluster", Config{CACertFile: other.caFile, CertFile: p.clientCert, KeyFile: p.clientK}, grpcTLS(good), ProblemUnknownAuthority, SettingCACertFile, other.caFile,
			[]string{"not signed by this CA", `issued by "CN=hotsplit CA client-test"`}, 2},
		{"server certificate expired", files(p.clientCert, p.clientK), grpcTLS(oldServer), ProblemServerTLS, SettingEndpoints, "",
			[]string{"the server's certificate", "expired at", "renew it on that node"}, 2},
		{"server certificate for another address", files(p.clientCert, p.clientK), grpcTLS(elsewhere), ProblemServerTLS, SettingEndpoints, "",
			[]string{"does not name 127.0.0.1", "IP:127.0.0.2"}, 2},
		{"plaintext client, TLS server", Config{Insecure: true}, grpcTLS(good), ProblemServerIsTLS, SettingInsecure, "",
			[]string{"speaks TLS"}, 2},
		{"TLS client, plaintext server", files(p.clientCert, p.clientK), grpcPlain, ProblemServerIsPlaintext, SettingEndpoints, "",
			[]string{"speaks plaintext gRPC", "Config.Insecure"}, 2},
		{"TLS client, HTTPS port", files(p.clientCert, p.clientK), httpServer(&good), ProblemNotGRPC, SettingEndpoints, "",
			[]string{"not a hotsplit gRPC port", "answers HTTP but not gRPC"}, 2},
		{"TLS client, TLS port without HTTP/2", files(p.clientCert, p.clientK), func(t *testing.T) (string, func() int32) {
			s := startTLSWithoutALPN(t, p, good)
			return s.addr, s.accepts.Load
		}, ProblemNotGRPC, SettingEndpoints, "", []string{"not a hotsplit gRPC port", "no HTTP/2"}, 2},
		{"TLS client, plain HTTP port", files(p.clientCert, p.clientK), httpServer(nil), ProblemNotGRPC, SettingEndpoints, "",
			[]string{"not a hotsplit gRPC port", "HTTP/1"}, 2},
		{"plaintext client, plain HTTP port", Config{Insecure: true}, httpServer(nil), ProblemNotGRPC, SettingEndpoints, "",
			[]string{"not a hotsplit gRPC port", "HTTP/1"}, 2},
		{"plaintext client, HTTPS port", Config{Insecure: true}, httpServer(&good), ProblemServerIsTLS, SettingInsecure, "",
			[]string{"speaks TLS"}, 2},
		{"TLS 1.2 server", files(p.clientCert, p.clientK), func(t *testing.T) (string, func() int32) {
			f := startFake(t, &fakeNode{get: getRouteOK, creds: p.serverCreds(t, tls.VersionTLS12)})
			return f.addr, f.accepts.Load
		}, ProblemServerTLS, SettingEndpoints, "", []string{"offers no TLS 1.3"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, accepts := tc.server(t)
			cfg := tc.cfg
			cfg.Endpoints = []string{addr}
			// gRPC's own reconnects in the background wait this long: the
			// connections counted are the call's.
			cfg.Backoff = MaxBackoff
			cfg.RequestTimeout = 10 * time.Second
			c := testClient(t, cfg)
			start := time.Now()
			_, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("a")})
			took := time.Since(start)
			t.Logf("%v: %v", took, err)
			pe, ok := errors.AsType[*PermanentError](err)
			if !ok || !errors.Is(err, ErrPermanent) {
				t.Fatalf("err %v (%T), want a PermanentError", err, err)
			}
			if pe.Problem != tc.problem || pe.Setting != tc.setting || pe.File != tc.file {
				t.Errorf("problem %d setting %d file %q, want %d %d %q", pe.Problem, pe.Setting, pe.File, tc.problem, tc.setting, tc.file)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") || strings.Contains(msg, "ALPN property") || strings.Contains(msg, "HTTP status code") {
				t.Errorf("message %q: more than one line, or gRPC's internals", msg)
			}
			if e, ok := errors.AsType[*Error](err); !ok || e.Attempts > 1 {
				t.Errorf("%v: want one attempt", err)
			}
			if n := accepts(); n > tc.dials {
				t.Errorf("the server saw %d connections, want at most %d", n, tc.dials)
			}
			if took > 5*time.Second {
				t.Errorf("took %v: the call retried", took)
			}
			if tc.setting == SettingEndpoints && !strings.Contains(msg, addr) {
				t.Errorf("message %q does not name the endpoint", msg)
			}
			if code := status.Code(err); code != codes.Unavailable {
				t.Errorf("code %v, want Unavailable, as gRPC reports a failed connection", code)
			}
		})
	}
}

// A mutation that meets a permanent failure was not applied: nothing
// reached a hotsplit server.
func TestPermanentFailureOfMutationIsDefinite(t *testing.T) {
	p := newTestPKI(t)
	f := startFake(t, &fakeNode{split: okSplit, creds: p.grpcServerCreds(p.serverPair(t))})
	c := testClient(t, Config{Endpoints: []string{f.addr}, Insecure: true})
	_, err := c.SplitRange(context.Background(), &api.SplitRangeRequest{RouteId: 1, SplitKey: []byte("m")})
	if !errors.Is(err, ErrPermanent) || !IsDefinite(err) || errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("err %v: want permanent and definitely not applied", err)
	}
}

// Scope: a problem of the client's own settings ends the call at once
// even while another endpoint is merely down; a problem of one endpoint
// drops it and the call goes on with the others, ending at once only when
// every endpoint failed permanently.
func TestPermanentFailureScope(t *testing.T) {
	p, other := newTestPKI(t), newTestPKI(t)
	good := p.serverPair(t)
	tlsFiles := func(eps ...string) Config {
		return Config{Endpoints: eps, CACertFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientK, RequestTimeout: 10 * time.Second, Backoff: 20 * time.Millisecond}
	}
	get := func(c *Client) (time.Duration, error) {
		start := time.Now()
		_, err := c.GetRoute(context.Background(), &api.GetRouteRequest{Key: []byte("a")})
		return time.Since(start), err
	}

	t.Run("the client's certificate refused while another endpoint is down", func(t *testing.T) {
		srv := startFake(t, &fakeNode{get: getRouteOK, creds: p.grpcServerCreds(good)})
		cfg := tlsFiles(deadAddr(t), srv.addr)
		cfg.CertFile, cfg.KeyFile = other.clientCert, other.clientK
		for i := range 2 { // both endpoint orders: the call starts at the next endpoint each time
			took, err := get(testClient(t, cfg))
			if pe, ok := errors.AsType[*PermanentError](err); !ok || pe.Problem != ProblemCertRefused || took > 5*time.Second {
				t.Fatalf("call %d: %v after %v, want the refusal at once", i, err, took)
			}
			cfg.Endpoints[0], cfg.Endpoints[1] = cfg.Endpoints[1], cfg.Endpoints[0]
		}
	})
	t.Run("a wrong port beside a working endpoint", func(t *testing.T) {
		web := startHTTP(t, &good)
		srv := startFake(t, &fakeNode{get: getRouteOK, creds: p.grpcServerCreds(good)})
		c := testClient(t, tlsFiles(web.addr, srv.addr))
		for i := range 3 {
			if took, err := get(c); err != nil || took > 5*time.Second {
				t.Fatalf("call %d: %v after %v, want the working endpoint's answer", i, err, took)
			}
		}
		if n := srv.called("GetRoute"); n != 3 {
			t.Fatalf("the working endpoint answered %d calls, want 3", n)
		}
	})
	t.Run("a wrong port and no retries allowed", func(t *testing.T) {
		web := startHTTP(t, &good)
		srv := startFake(t, &fakeNode{get: getRouteOK, creds: p.grpcServerCreds(good)})
		cfg := tlsFiles(web.addr, srv.addr)
		cfg.MaxRetries = -1
		if _, err := get(testClient(t, cfg)); !errors.Is(err, ErrPermanent) || srv.called("GetRoute") != 0 {
			t.Fatalf("%v, %d calls at the other endpoint: MaxRetries -1 allows one attempt", err, srv.called("GetRoute"))
		}
	})
	t.Run("every endpoint a wrong port", func(t *testing.T) {
		a, b := startHTTP(t, &good), startHTTP(t, nil)
		took, err := get(testClient(t, tlsFiles(a.addr, b.addr)))
		e, ok := errors.AsType[*Error](err)
		if !errors.Is(err, ErrPermanent) || !ok || len(e.Skipped) != 1 || took > 5*time.Second {
			t.Fatalf("%v after %v: want a permanent error at once, the other port skipped", err, took)
		}
		if !strings.Contains(err.Error(), a.addr) || !strings.Contains(err.Error(), b.addr) {
			t.Fatalf("%v: want both ports named", err)
		}
	})
	t.Run("a wrong port beside a down endpoint", func(t *testing.T) {
		web := startHTTP(t, &good)
		cfg := tlsFiles(web.addr, deadAddr(t))
		cfg.RequestTimeout = time.Second
		took, err := get(testClient(t, cfg))
		if errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "unreachable") || !strings.Contains(err.Error(), "skipped") || took < cfg.RequestTimeout/2 {
			t.Fatalf("%v after %v: want the down endpoint retried until the timeout, the port noted as skipped", err, took)
		}
	})
}

// Watch stops at once on a problem of the client's own settings.
func TestWatchStopsOnPermanentFailure(t *testing.T) {
	p := newTestPKI(t)
	f := startFake(t, &fakeNode{creds: p.grpcServerCreds(p.serverPair(t))})
	c := testClient(t, Config{Endpoints: []string{f.addr}, Insecure: true, MaxRetries: 10, Backoff: MaxBackoff})
	start := time.Now()
	err := c.Watch(context.Background(), 0, func(*api.WatchRoutesResponse) error { return nil })
	if pe, ok := errors.AsType[*PermanentError](err); !ok || pe.Problem != ProblemServerIsTLS || time.Since(start) > 5*time.Second {
		t.Fatalf("%v after %v: want ServerIsTLS at once", err, time.Since(start))
	}
}

func TestClassifyFirstBytes(t *testing.T) {
	settings := []byte{0, 0, 6, http2FrameSettings, 0}
	for _, tc := range []struct {
		name    string
		b       []byte
		wantTLS bool
		want    Problem // 0: fine
	}{
		{"HTTP/2 greeting to a plaintext client", settings, false, 0},
		{"HTTP/2 greeting where TLS was expected", settings, true, ProblemServerIsPlaintext},
		{"TLS alert record to a plaintext client", []byte{0x15, 3, 3, 0, 2}, false, ProblemServerIsTLS},
		{"HTTP/1 to a plaintext client", []byte("HTTP/1.1 400"), false, ProblemNotGRPC},
		{"HTTP/1 where TLS was expected", []byte("HTTP/"), true, ProblemNotGRPC},
		{"an SSH banner", []byte("SSH-2.0"), true, ProblemNotGRPC},
		{"HTTP/2 data frame first", []byte{0, 0, 6, 0, 0}, false, ProblemNotGRPC},
	} {
		pe := classifyFirstBytes("127.0.0.1:1", tc.b, tc.wantTLS, nil)
		switch {
		case tc.want == 0 && pe != nil:
			t.Errorf("%s: %v, want fine", tc.name, pe)
		case tc.want != 0 && (pe == nil || pe.Problem != tc.want):
			t.Errorf("%s: %v, want problem %d", tc.name, pe, tc.want)
		}
	}
}

// remoteAlert finds an alert the peer sent, by type, from a real
// handshake; a local error or a plain EOF is none.
func TestRemoteAlert(t *testing.T) {
	p, other := newTestPKI(t), newTestPKI(t)
	srv := startRaw(t, func(c net.Conn) {
		defer c.Close()
		tc := tls.Server(c, &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{p.serverPair(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: p.ca.Pool()})
		tc.Handshake()
	})
	pair, err := tls.LoadX509KeyPair(other.clientCert, other.clientK)
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", srv.addr, &tls.Config{RootCAs: p.ca.Pool(), Certificates: []tls.Certificate{pair}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.Read(make([]byte, 1))
	if a, ok := remoteAlert(err); !ok || a != alertUnknownCA {
		t.Fatalf("remoteAlert(%v) = %v, %v; want unknown CA", err, a, ok)
	}
	if _, ok := remoteAlert(&net.OpError{Op: "local error", Err: tls.AlertError(alertBadCertificate)}); ok {
		t.Fatal("a local error counted as the peer's alert")
	}
	if _, ok := remoteAlert(errors.New("EOF")); ok {
		t.Fatal("EOF counted as an alert")
	}
}

func TestHumanDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		90 * time.Second:           "1m30s",
		-90 * time.Second:          "1m30s",
		3 * time.Minute:            "3 minutes",
		5*time.Hour + time.Minute:  "5 hours",
		3*24*time.Hour + time.Hour: "3 days",
	} {
		if got := humanDuration(d); got != want {
			t.Errorf("humanDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// A connection that closed before the server's greeting, with no typed
// error, is explained by one probe connection: it asks the question of
// the record's kind and the answer replaces the record, or leaves it a
// transient failure when the server turns out fine.
func TestProbesExplainEarlyCloses(t *testing.T) {
	p, other := newTestPKI(t), newTestPKI(t)
	good := p.serverPair(t)
	tlsNode := startFake(t, &fakeNode{get: getRouteOK, creds: p.grpcServerCreds(good)})
	plainNode := startFake(t, &fakeNode{get: getRouteOK})
	closed := errors.New("the server closed the connection before answering: EOF")
	for _, tc := range []struct {
		name  string
		cfg   Config
		addr  string
		probe probeKind
		want  Problem // 0: nothing permanent
	}{
		{"a certificate the server refuses", Config{CACertFile: p.caFile, CertFile: other.clientCert, KeyFile: other.clientK}, tlsNode.addr, probeTLSRefusal, ProblemCertRefused},
		{"a certificate the server takes", Config{CACertFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientK}, tlsNode.addr, probeTLSRefusal, 0},
		{"a plaintext node for a TLS client", Config{CACertFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientK}, plainNode.addr, probePlaintextServer, ProblemServerIsPlaintext},
		{"a TLS node for a TLS client", Config{CACertFile: p.caFile, CertFile: p.clientCert, KeyFile: p.clientK}, tlsNode.addr, probePlaintextServer, 0},
		{"a TLS node for a plaintext client", Config{Insecure: true}, tlsNode.addr, probeTLSServer, ProblemServerIsTLS},
		{"a plaintext node for a plaintext client", Config{Insecure: true}, plainNode.addr, probeTLSServer, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Endpoints = []string{tc.addr}
			if tc.probe == probePlaintextServer && tc.want == 0 {
				cfg.DialTimeout = 200 * time.Millisecond // a TLS server stays silent: the probe waits this long
			}
			c := testClient(t, cfg)
			ec := &endpointConn{addr: tc.addr}
			rec := &unexplained{err: closed, probe: tc.probe}
			ec.setDialErr(rec)
			got := c.explain(context.Background(), ec, rec)
			pe, permanent := errors.AsType[*PermanentError](got)
			switch {
			case tc.want == 0 && (permanent || got != closed || ec.lastDialErr() != rec):
				t.Fatalf("explained as %v (record %v), want the failure left as it was", got, ec.lastDialErr())
			case tc.want != 0 && (!permanent || pe.Problem != tc.want || ec.lastDialErr() != got):
				t.Fatalf("explained as %v (record %v), want problem %d recorded", got, ec.lastDialErr(), tc.want)
			}
		})
	}
}
