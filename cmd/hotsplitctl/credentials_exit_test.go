package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
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

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/pki"
)

// countedListener counts the connections a test server accepts.
type countedListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// listen opens a loopback listener that counts its connections.
func listen(t *testing.T) (net.Listener, *atomic.Int32) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &atomic.Int32{}
	return countedListener{lis, n}, n
}

// clientCertFiles signs a client certificate of ca valid from notBefore to
// notAfter (pki makes certificates valid from now only) and writes it and
// its key to dir.
func clientCertFiles(t *testing.T, ca *pki.CA, dir, name string, notBefore, notAfter time.Time) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name, Organization: []string{"operator"}},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// Each permanent connection failure through the CLI: exit code 6, one line
// on stderr naming the flag (and file) to fix, nothing on stdout, and no
// retries: with --timeout 10s a retry loop would run for 10 s, and the
// server would see a connection per attempt (it may see two: the attempt
// and one probe that asks what the server speaks).
func TestPermanentFailuresExitWithCredentialsCode(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	expiredCert, expiredKey := clientCertFiles(t, testCerts.pool, dir, "expired", now.Add(-30*24*time.Hour), now.Add(-3*24*time.Hour))
	futureCert, futureKey := clientCertFiles(t, testCerts.pool, dir, "future", now.Add(2*time.Hour), now.Add(48*time.Hour))
	other, err := pki.NewCA("other", 0)
	if err != nil {
		t.Fatal(err)
	}
	otherCA := filepath.Join(dir, "other-ca.crt")
	if err := other.Write(otherCA, filepath.Join(dir, "other-ca.key"), false); err != nil {
		t.Fatal(err)
	}
	otherCert, otherKey := clientCertFiles(t, other, dir, "stranger", now.Add(-time.Hour), now.Add(time.Hour))

	tlsGRPC := func(t *testing.T) (string, *atomic.Int32) {
		lis, n := listen(t)
		s := grpc.NewServer(testServerCreds(t))
		api.RegisterCatalogServer(s, &fakeCluster{resp: map[string]proto.Message{}})
		go s.Serve(lis)
		t.Cleanup(s.Stop)
		return lis.Addr().String(), n
	}
	plainGRPC := func(t *testing.T) (string, *atomic.Int32) {
		lis, n := listen(t)
		s := grpc.NewServer()
		api.RegisterCatalogServer(s, &fakeCluster{resp: map[string]proto.Message{}})
		go s.Serve(lis)
		t.Cleanup(s.Stop)
		return lis.Addr().String(), n
	}
	// A node's --httpAddr under TLS: HTTPS with HTTP/2, /metrics and the
	// like, 404 for a gRPC path.
	httpsPort := func(t *testing.T) (string, *atomic.Int32) {
		lis, n := listen(t)
		srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0),
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{testCerts.server}, NextProtos: []string{"h2", "http/1.1"}}}
		go srv.ServeTLS(lis, "", "")
		t.Cleanup(func() { srv.Close() })
		return lis.Addr().String(), n
	}
	// A raft port: TLS with a client certificate required, no HTTP/2.
	raftPort := func(t *testing.T) (string, *atomic.Int32) {
		lis, n := listen(t)
		cfg := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{testCerts.server}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: testCerts.pool.Pool()}
		go func() {
			for {
				c, err := lis.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					c.SetDeadline(time.Now().Add(5 * time.Second))
					tc := tls.Server(c, cfg)
					if tc.Handshake() == nil {
						tc.Read(make([]byte, 1))
					}
				}()
			}
		}()
		t.Cleanup(func() { lis.Close() })
		return lis.Addr().String(), n
	}

	tlsFlags := func(ca, cert, key string) []string { return []string{"--cacert", ca, "--cert", cert, "--key", key} }
	ours := tlsFlags(testCerts.ca, testCerts.cert, testCerts.key)
	for _, tc := range []struct {
		name   string
		server func(*testing.T) (string, *atomic.Int32)
		flags  []string
		want   []string // in the one line; "ADDR" stands for the endpoint
		dials  int32
	}{
		{"expired client certificate", tlsGRPC, tlsFlags(testCerts.ca, expiredCert, expiredKey),
			[]string{"--cert " + expiredCert + ": certificate expired at " + now.Add(-3*24*time.Hour).UTC().Format("2006-01-02 15:04:05 UTC"), "(3 days ago); renew it"}, 0},
		{"client certificate not yet valid", tlsGRPC, tlsFlags(testCerts.ca, futureCert, futureKey),
			[]string{"--cert " + futureCert + ": certificate not valid before", "clock"}, 0},
		{"client certificate of another CA", tlsGRPC, tlsFlags(testCerts.ca, otherCert, otherKey),
			[]string{"--cert " + otherCert + ": ADDR refused this client certificate", "unknown certificate authority"}, 2},
		{"--cacert of another CA", tlsGRPC, tlsFlags(otherCA, testCerts.cert, testCerts.key),
			[]string{"--cacert " + otherCA + ": the certificate of ADDR", "is not signed by this CA"}, 2},
		{"--insecure against a TLS node", tlsGRPC, []string{"--insecure"},
			[]string{"--insecure: ADDR speaks TLS", "--cacert"}, 2},
		{"TLS against an --insecure node", plainGRPC, ours,
			[]string{"--endpoints ADDR speaks plaintext gRPC", "--insecure"}, 2},
		{"the HTTP port as endpoint", httpsPort, ours,
			[]string{"--endpoints ADDR: not a hotsplit gRPC port", "HTTP but not gRPC", "--grpcAddr"}, 2},
		{"the raft port as endpoint", raftPort, ours,
			[]string{"--endpoints ADDR: not a hotsplit gRPC port", "no HTTP/2"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr, accepts := tc.server(t)
			var out, errOut testutil.LogBuffer
			args := append(append([]string{"--endpoints", addr, "--timeout", "10s"}, tc.flags...), "routes", "list")
			start := time.Now()
			code := run(t.Context(), args, testEnv, &out, &errOut)
			took := time.Since(start)
			stderr := errOut.String()
			t.Logf("%v: exit %d: %s", took, code, strings.TrimSpace(stderr))
			if code != exitCredentials {
				t.Errorf("exit %d, want %d", code, exitCredentials)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "hotsplitctl: routes list: ") || out.String() != "" {
				t.Errorf("stdout %q stderr %q: want one line on stderr only", out.String(), stderr)
			}
			for _, w := range tc.want {
				if w = strings.ReplaceAll(w, "ADDR", addr); !strings.Contains(stderr, w) {
					t.Errorf("stderr does not say %q", w)
				}
			}
			for _, leak := range []string{"ALPN property", "HTTP status code", "attempts", "rpc error", "Unavailable"} {
				if strings.Contains(stderr, leak) {
					t.Errorf("stderr says %q", leak)
				}
			}
			if n := accepts.Load(); n > tc.dials {
				t.Errorf("the server saw %d connections, want at most %d", n, tc.dials)
			}
			if took > 5*time.Second {
				t.Errorf("took %v: retried", took)
			}
		})
	}
}
