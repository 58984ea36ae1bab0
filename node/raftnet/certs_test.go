package raftnet

import (
	"crypto/tls"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hotsplit/hotsplit/pki"
)

// The tests of this package run mutual TLS with node certificates of one
// test CA.

var (
	testCAOnce sync.Once
	testCAv    *pki.CA
	testCAErr  error
)

func testCA(t testing.TB) *pki.CA {
	t.Helper()
	testCAOnce.Do(func() { testCAv, testCAErr = pki.NewCA("raftnet-tests", 0) })
	if testCAErr != nil {
		t.Fatal(testCAErr)
	}
	return testCAv
}

// nodeReloader is the TLS material of node id (a certificate valid for
// 127.0.0.1) as a node loads it.
func nodeReloader(t testing.TB, id string) *pki.Reloader {
	t.Helper()
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, id+".crt"), filepath.Join(dir, id+".key"), filepath.Join(dir, "ca.crt")
	p, err := testCA(t).NewNode(id, pki.NodeOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Write(cert, key, true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, testCA(t).CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := pki.NewReloader(pki.ReloaderConfig{CertFile: cert, KeyFile: key, CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	return r
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

// listen is a loopback listener closed with the test.
func listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// clientTLS is a client config with a client certificate CN = name, O =
// roles of the test CA.
func clientTLS(t testing.TB, name string, roles ...string) *tls.Config {
	t.Helper()
	p, err := testCA(t).NewClient(name, roles, 0)
	if err != nil {
		t.Fatal(err)
	}
	return pairTLS(t, p)
}
