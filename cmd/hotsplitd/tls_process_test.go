package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/internal/testutil"
)

// openssl runs the openssl recipe of docs/security.md ("Certificates with
// openssl") in dir.
type openssl struct {
	t   *testing.T
	dir string
}

func (o openssl) run(args ...string) {
	o.t.Helper()
	cmd := exec.Command("openssl", args...)
	cmd.Dir = o.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		o.t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (o openssl) ca(name string) {
	o.run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
		"-days", "3650", "-subj", "/CN=hotsplit CA "+name)
}

// leaf makes name.crt/name.key with CN=cn and one O per role, signed by
// ca.crt; extra are more -addext values.
func (o openssl) leaf(name, cn string, roles []string, extra ...string) {
	subj := "/CN=" + cn
	for _, r := range roles {
		subj += "/O=" + r
	}
	args := []string{"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", name + ".key", "-out", name + ".crt",
		"-days", "365", "-CA", "ca.crt", "-CAkey", "ca.key", "-subj", subj, "-addext", "basicConstraints=critical,CA:FALSE"}
	for _, e := range extra {
		args = append(args, "-addext", e)
	}
	o.run(args...)
}

func (o openssl) node(id string) {
	o.leaf(id, id, []string{"node"}, "subjectAltName=IP:127.0.0.1,DNS:localhost", "extendedKeyUsage=serverAuth,clientAuth")
}

func (o openssl) client(name string, roles ...string) {
	o.leaf(name, name, roles, "extendedKeyUsage=clientAuth")
}

// TestIntegrationProcessOpenSSLCertificates: hotsplitd refuses to start
// without TLS flags, naming them; with a CA and certificates made by plain
// openssl (CN=name, O=role, -addext subjectAltName=...) it serves, a client
// certificate of that CA talks to it and one of another CA is refused; and
// SIGHUP swaps in a new certificate for new connections.
func TestIntegrationProcessOpenSSLCertificates(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs hotsplitd")
	}
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("openssl is not on PATH: the openssl recipe of docs/security.md is not checked here")
	}
	hotsplitd, hotsplitctl := binaries(t)
	dir := t.TempDir()
	o := openssl{t, dir}
	o.ca("test")
	o.node("n1")
	o.client("ops", "operator")
	other := openssl{t, filepath.Join(dir, "other")}
	os.Mkdir(other.dir, 0o700)
	other.ca("other")
	other.client("ops", "operator")

	base := []string{"--id", "n1", "--dataDir", filepath.Join(dir, "n1"), "--raftAddr", freePort(t), "--grpcAddr", freePort(t), "--httpAddr", ""}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"--tlsCert", "--tlsKey", "--tlsCA", "--insecure", "hotsplitctl certs"}},
		{[]string{"--tlsCert", "n1.crt"}, []string{"--tlsKey and --tlsCA missing"}},
	} {
		cmd := exec.Command(hotsplitd, append(append([]string{}, base...), tc.args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() == 0 {
			t.Fatalf("hotsplitd %q: %v, want a non-zero exit", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(out), w) {
				t.Errorf("hotsplitd %q said %q, which does not name %q", tc.args, out, w)
			}
		}
	}

	p := &proc{id: "n1", dataDir: filepath.Join(dir, "n1"), raft: freePort(t), grpc: freePort(t), http: freePort(t), logPath: filepath.Join(dir, "n1.log"),
		args: []string{"--bootstrap", "--tlsCert", filepath.Join(dir, "n1.crt"), "--tlsKey", filepath.Join(dir, "n1.key"), "--tlsCA", filepath.Join(dir, "ca.crt"), "--tlsReloadInterval", "0"}}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			t.Logf("--- n1 log ---\n%s", b)
		}
	})
	p.start(t, hotsplitd)
	env := func(d string) []string {
		return []string{"HOTSPLIT_CACERT=" + filepath.Join(dir, "ca.crt"), "HOTSPLIT_CERT=" + filepath.Join(d, "ops.crt"), "HOTSPLIT_KEY=" + filepath.Join(d, "ops.key")}
	}
	testutil.Eventually(t, 20*time.Second, "routes through an openssl client certificate", func() error {
		out, err := ctl(t, hotsplitctl, env(dir), p.grpc, "routes", "list", "-o", "json")
		if err == nil && !strings.Contains(out, `"routes"`) {
			err = fmt.Errorf("no routes in %s", out)
		}
		return err
	})
	// A certificate of another CA is refused, permanently: exit 6 at once
	// (a retry loop would run the whole 10 s) in one line naming the file.
	start := time.Now()
	_, stderr, code := ctlExit(t, hotsplitctl, env(other.dir), p.grpc, "10s", "routes", "list")
	if took := time.Since(start); code != 6 || strings.Count(stderr, "\n") != 1 || took > 5*time.Second ||
		!strings.Contains(stderr, filepath.Join(other.dir, "ops.crt")) || !strings.Contains(stderr, "refused this client certificate") {
		t.Fatalf("a client certificate of another CA: exit %d after %v: %q, want 6 at once, one line naming the certificate file", code, took, stderr)
	}

	// Roles from openssl's O: a reader's split is refused naming the role
	// it needs; an operator's commits under its CN; a caller with neither a
	// certificate nor a valid token is Unauthenticated.
	o.client("rita", "reader")
	readerEnv := []string{"HOTSPLIT_CACERT=" + filepath.Join(dir, "ca.crt"), "HOTSPLIT_CERT=" + filepath.Join(dir, "rita.crt"), "HOTSPLIT_KEY=" + filepath.Join(dir, "rita.key")}
	if _, stderr, code := ctlExit(t, hotsplitctl, readerEnv, p.grpc, "5s", "split", "1", "m"); code != 1 ||
		!strings.Contains(stderr, "PermissionDenied") || !strings.Contains(stderr, `"rita"`) || !strings.Contains(stderr, "needs role operator") {
		t.Fatalf("a reader's split: exit %d %q, want 1 and PermissionDenied naming rita and the operator role", code, stderr)
	}
	if _, err := ctl(t, hotsplitctl, env(dir), p.grpc, "split", "1", "m", "--actor", "alice-the-sre"); err != nil {
		t.Fatalf("an operator's split: %v", err)
	}
	status, err := ctl(t, hotsplitctl, env(dir), p.grpc, "autosplit", "status")
	if err != nil || !strings.Contains(status, `by ops (note "alice-the-sre")`) {
		t.Fatalf("the split's actor is not the operator's CN: %v\n%s", err, status)
	}
	anon := []string{"HOTSPLIT_CACERT=" + filepath.Join(dir, "ca.crt"), "HOTSPLIT_TOKEN=not-a-token"}
	if _, stderr, code := ctlExit(t, hotsplitctl, anon, p.grpc, "5s", "routes", "list"); code == 0 || !strings.Contains(stderr, "Unauthenticated") {
		t.Fatalf("no certificate, no valid token: exit %d %q, want Unauthenticated", code, stderr)
	}

	// SIGHUP: a new certificate (new key too) for new connections.
	before := serverSerial(t, dir, p.grpc)
	if err := os.Rename(filepath.Join(dir, "n1.crt"), filepath.Join(dir, "n1-old.crt")); err != nil {
		t.Fatal(err)
	}
	os.Rename(filepath.Join(dir, "n1.key"), filepath.Join(dir, "n1-old.key"))
	o.node("n1")
	p.cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 10*time.Second, "the new certificate on new connections", func() error {
		if s := serverSerial(t, dir, p.grpc); s == before {
			return fmt.Errorf("still serial %s", s)
		}
		return nil
	})
	if _, err := ctl(t, hotsplitctl, env(dir), p.grpc, "routes", "list"); err != nil {
		t.Fatalf("after SIGHUP: %v", err)
	}
}

// serverSerial is the serial number of the certificate a new TLS
// connection to addr is shown.
func serverSerial(t *testing.T, dir, addr string) string {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatalf("TLS dial %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
}
