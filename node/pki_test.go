package node

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotsplit/hotsplit/pki"
)

// The in-process test clusters of this package run mutual TLS, as
// production does; one CA serves every cluster of the test binary (each
// cluster writes its own node files).

var (
	testCAOnce sync.Once
	testCAv    *pki.CA
	testCAErr  error

	clientTLSMu    sync.Mutex
	clientTLSCache = map[string]*tls.Config{}
)

func testCA(t testing.TB) *pki.CA {
	t.Helper()
	testCAOnce.Do(func() { testCAv, testCAErr = pki.NewCA("node-tests", 0) })
	if testCAErr != nil {
		t.Fatal(testCAErr)
	}
	return testCAv
}

// testTLSReload is how often test nodes check their TLS files.
const testTLSReload = 50 * time.Millisecond

// nodeTLS writes a node certificate for id (valid for 127.0.0.1) and the CA
// under dir, unless present, and returns the files for Config.TLS.
func nodeTLS(t testing.TB, dir, id string) *TLSFiles {
	t.Helper()
	f := &TLSFiles{CertFile: filepath.Join(dir, id+".crt"), KeyFile: filepath.Join(dir, id+".key"), CAFile: filepath.Join(dir, "ca.crt"), ReloadInterval: testTLSReload}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(f.CAFile); err != nil {
		if err := os.WriteFile(f.CAFile, testCA(t).CertPEM(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(f.CertFile); err == nil {
		return f
	}
	writeNodeCert(t, f, id)
	return f
}

// writeNodeCert puts a new certificate for id into f (rename per file, key
// first) and returns it.
func writeNodeCert(t testing.TB, f *TLSFiles, id string) *pki.Pair {
	t.Helper()
	p, err := testCA(t).NewNode(id, pki.NodeOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(f.CertFile, f.KeyFile, true); err != nil {
		t.Fatal(err)
	}
	return p
}

// clientTLS is a client config with a certificate CN = name, O = roles of
// the test CA (cached per name).
func clientTLS(t testing.TB, name string, roles ...string) *tls.Config {
	t.Helper()
	clientTLSMu.Lock()
	defer clientTLSMu.Unlock()
	if c, ok := clientTLSCache[name]; ok {
		return c.Clone()
	}
	p, err := testCA(t).NewClient(name, roles, 0)
	if err != nil {
		t.Fatal(err)
	}
	c := pairTLS(t, p)
	clientTLSCache[name] = c
	return c.Clone()
}

// adminTLS is the client config tests use for everything.
func adminTLS(t testing.TB) *tls.Config { return clientTLS(t, testAdmin, "admin") }

// testAdmin is the CN of the admin client certificate tests use.
const testAdmin = "test-admin"

// adminCreds dials a test node as the admin client.
func adminCreds(t testing.TB) grpc.DialOption {
	return grpc.WithTransportCredentials(credentials.NewTLS(adminTLS(t)))
}

// pairTLS is a client config presenting p and trusting the test CA.
func pairTLS(t testing.TB, p *pki.Pair) *tls.Config {
	t.Helper()
	c, err := p.ClientTLS(testCA(t).Pool())
	if err != nil {
		t.Fatal(err)
	}
	return c
}
