package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

// files is one process's certificate, key and CA bundle paths.
type files struct{ cert, key, ca string }

func writeSet(t *testing.T, dir, name string, p *Pair, cas ...*CA) files {
	t.Helper()
	f := files{filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key"), filepath.Join(dir, name+"-ca.crt")}
	if err := p.Write(f.cert, f.key, true); err != nil {
		t.Fatal(err)
	}
	writeBundle(t, f.ca, cas...)
	return f
}

func writeBundle(t *testing.T, path string, cas ...*CA) {
	t.Helper()
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.CertPEM()...)
	}
	if err := writeFile(path, b, 0o644, true); err != nil {
		t.Fatal(err)
	}
}

func node(t *testing.T, ca *CA, id string) *Pair {
	t.Helper()
	p, err := ca.NewNode(id, NodeOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func reloader(t *testing.T, f files, interval time.Duration, log io.Writer) *Reloader {
	t.Helper()
	if log == nil {
		log = io.Discard
	}
	r, err := NewReloader(ReloaderConfig{CertFile: f.cert, KeyFile: f.key, CAFile: f.ca, Interval: interval, Logger: slog.New(slog.NewTextHandler(log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// serve runs a TLS echo server on loopback with the server config of r.
func serve(t *testing.T, r *Reloader, auth tls.ClientAuthType) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", r.ServerConfig(auth))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// roundTrip dials addr with cfg, echoes one byte and returns the server's
// certificate; err is the first failure, handshake or read (TLS 1.3
// reports a refused client certificate only on the first read).
func roundTrip(addr string, cfg *tls.Config) (*x509.Certificate, *tls.Conn, error) {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return nil, nil, err
	}
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte{1}); err != nil {
		c.Close()
		return nil, nil, err
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c.ConnectionState().PeerCertificates[0], c, nil
}

// TestReloadRotatesCertificate: replacing the pair on disk changes the
// certificate of new connections (polled, no restart); a connection made
// before keeps working.
func TestReloadRotatesCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, "test")
	srvFiles := writeSet(t, dir, "srv", node(t, ca, "n1"), ca)
	srv := reloader(t, srvFiles, 10*time.Millisecond, nil)
	cli := reloader(t, writeSet(t, dir, "cli", node(t, ca, "n2"), ca), 0, nil)
	addr := serve(t, srv, tls.RequireAndVerifyClientCert)

	first, old, err := roundTrip(addr, cli.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	next := node(t, ca, "n1")
	if err := next.Write(srvFiles.cert, srvFiles.key, true); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 5*time.Second, "the new certificate in use", func() bool { return srv.Leaf().SerialNumber.Cmp(next.Cert.SerialNumber) == 0 })
	got, c, err := roundTrip(addr, cli.ClientConfig("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if got.SerialNumber.Cmp(next.Cert.SerialNumber) != 0 || got.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatalf("new connection presents serial %x, want the new %x", got.SerialNumber, next.Cert.SerialNumber)
	}
	old.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := old.Write([]byte{2}); err != nil {
		t.Fatalf("old connection after rotation: %v", err)
	}
	if _, err := io.ReadFull(old, make([]byte, 1)); err != nil {
		t.Fatalf("old connection after rotation: %v", err)
	}
	// One rotation, one reload; a poll that stats the files between the
	// two renames loads the new pair under the half-old signature and
	// reloads once more (the safe order: a change is never missed).
	if n, _ := srv.Stats(); n < 1 || n > 2 {
		t.Errorf("%d reloads, want 1 (2 if a poll fell between the renames)", n)
	}
}

// TestReloadKeepsPairOnHalfReplacement: a new certificate beside the old
// key keeps the previous pair in use and logs exactly one WARN line however
// many polls see it; the matching key completes the rotation.
func TestReloadKeepsPairOnHalfReplacement(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, "test")
	first := node(t, ca, "n1")
	f := writeSet(t, dir, "srv", first, ca)
	var log testutil.LogBuffer
	r := reloader(t, f, 0, &log) // polled by hand below

	next := node(t, ca, "n1")
	if err := writeFile(f.cert, next.CertPEM, 0o644, true); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		r.poll()
	}
	if _, failed := r.Stats(); failed != 1 {
		t.Fatalf("%d failed reloads over 10 polls of one half-replaced pair, want 1", failed)
	}
	if n := strings.Count(log.String(), "level=WARN"); n != 1 {
		t.Fatalf("%d WARN lines, want 1:\n%s", n, log.String())
	}
	if strings.Count(log.String(), "half-replaced") != 1 {
		t.Errorf("the WARN line does not say what is wrong:\n%s", log.String())
	}
	if r.Leaf().SerialNumber.Cmp(first.Cert.SerialNumber) != 0 {
		t.Fatal("the half-replaced pair was taken")
	}
	if err := writeFile(f.key, next.KeyPEM, 0o600, true); err != nil {
		t.Fatal(err)
	}
	r.poll()
	if r.Leaf().SerialNumber.Cmp(next.Cert.SerialNumber) != 0 {
		t.Fatal("the completed pair was not taken")
	}
	if err := r.Reload(); err != nil {
		t.Fatalf("forced reload of a good set: %v", err)
	}
}

// TestReloadCABundleOverlap rotates the CA as a bundle overlap: a client
// of the new CA is refused until the bundle holds both CAs, and the old
// CA's clients keep working meanwhile.
func TestReloadCABundleOverlap(t *testing.T) {
	dir := t.TempDir()
	oldCA, newCA := mustCA(t, "old"), mustCA(t, "new")
	f := writeSet(t, dir, "srv", node(t, oldCA, "n1"), oldCA)
	srv := reloader(t, f, 0, nil)
	addr := serve(t, srv, tls.RequireAndVerifyClientCert)
	oldCli := reloader(t, writeSet(t, dir, "old", node(t, oldCA, "n2"), oldCA, newCA), 0, nil)
	newCli := reloader(t, writeSet(t, dir, "new", node(t, newCA, "n3"), oldCA, newCA), 0, nil)

	if _, _, err := roundTrip(addr, newCli.ClientConfig("127.0.0.1")); err == nil {
		t.Fatal("a client of a CA outside the bundle got through")
	}
	writeBundle(t, f.ca, oldCA, newCA)
	if err := srv.Reload(); err != nil {
		t.Fatal(err)
	}
	for name, cli := range map[string]*Reloader{"old CA": oldCli, "new CA": newCli} {
		if _, c, err := roundTrip(addr, cli.ClientConfig("127.0.0.1")); err != nil {
			t.Errorf("%s client with both CAs in the bundle: %v", name, err)
		} else {
			c.Close()
		}
	}
	// The server's own certificate must chain to its bundle: dropping the
	// old CA before re-issuing it is refused and the overlap stays.
	writeBundle(t, f.ca, newCA)
	if err := srv.Reload(); err == nil {
		t.Fatal("a bundle that no longer verifies the server's own certificate was taken")
	}
	if _, c, err := roundTrip(addr, oldCli.ClientConfig("127.0.0.1")); err != nil {
		t.Errorf("old CA client after a refused bundle: %v", err)
	} else {
		c.Close()
	}
}

// TestClientConfigVerifiesServer: the client refuses a server of another
// CA, one whose certificate does not name the dialled address, and plain
// TLS 1.2.
func TestClientConfigVerifiesServer(t *testing.T) {
	dir := t.TempDir()
	ca, other := mustCA(t, "test"), mustCA(t, "other")
	cli := reloader(t, writeSet(t, dir, "cli", node(t, ca, "n2"), ca), 0, nil)

	otherSrv := reloader(t, writeSet(t, dir, "o", node(t, other, "n1"), other), 0, nil)
	if _, _, err := roundTrip(serve(t, otherSrv, tls.VerifyClientCertIfGiven), cli.ClientConfig("127.0.0.1")); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("server of another CA: %v", err)
	}
	named, err := ca.NewNode("n1", NodeOptions{DNSNames: []string{"elsewhere.example"}})
	if err != nil {
		t.Fatal(err)
	}
	wrongName := reloader(t, writeSet(t, dir, "w", named, ca), 0, nil)
	if _, _, err := roundTrip(serve(t, wrongName, tls.VerifyClientCertIfGiven), cli.ClientConfig("127.0.0.1")); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("server certificate for another name: %v", err)
	}
	good := reloader(t, writeSet(t, dir, "g", node(t, ca, "n1"), ca), 0, nil)
	cfg := cli.ClientConfig("127.0.0.1")
	cfg.MaxVersion = tls.VersionTLS12
	if _, _, err := roundTrip(serve(t, good, tls.VerifyClientCertIfGiven), cfg); err == nil {
		t.Error("a TLS 1.2 client got through")
	}
}

func TestNewReloaderRefusesBadSets(t *testing.T) {
	dir := t.TempDir()
	ca, other := mustCA(t, "test"), mustCA(t, "other")
	good := writeSet(t, dir, "good", node(t, ca, "n1"), ca)
	foreign := writeSet(t, dir, "foreign", node(t, other, "n1"), ca)
	for name, f := range map[string]files{
		"missing key":        {good.cert, filepath.Join(dir, "nope.key"), good.ca},
		"key of another":     {good.cert, foreign.key, good.ca},
		"cert of another CA": foreign,
		"CA file no PEM":     {good.cert, good.key, good.key},
	} {
		if _, err := NewReloader(ReloaderConfig{CertFile: f.cert, KeyFile: f.key, CAFile: f.ca}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
