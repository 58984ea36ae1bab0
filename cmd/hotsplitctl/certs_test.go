package main

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/pki"
)

func TestCertsCreateNodeAndClient(t *testing.T) {
	dir := t.TempDir()
	if r := ctl(t, nil, "certs", "create-ca", "--dir", dir); r.code != 0 {
		t.Fatalf("create-ca: %+v", r)
	}
	if r := ctl(t, nil, "certs", "create-ca", "--dir", dir); r.code == 0 || !strings.Contains(r.stderr, "ca.crt") {
		t.Fatalf("a second create-ca over the first: %+v", r)
	}
	if r := ctl(t, nil, "certs", "create-node", "n1", "--ip", "127.0.0.1,10.0.0.1", "--dns", "hs1.example", "--dir", dir); r.code != 0 {
		t.Fatalf("create-node: %+v", r)
	}
	if r := ctl(t, nil, "certs", "create-client", "alice", "--role", "operator", "--role", "reader", "--dir", dir); r.code != 0 {
		t.Fatalf("create-client: %+v", r)
	}
	ca, err := pki.ReadCerts(filepath.Join(dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca[0])
	node := readCert(t, filepath.Join(dir, "node-n1.crt"))
	if !pki.IsNode(node) || node.Subject.CommonName != "n1" || len(node.IPAddresses) != 2 || !slices.Equal(node.DNSNames, []string{"hs1.example"}) {
		t.Errorf("node certificate: subject %v IPs %v DNS %v", node.Subject, node.IPAddresses, node.DNSNames)
	}
	if _, err := node.Verify(x509.VerifyOptions{Roots: roots, DNSName: "10.0.0.1"}); err != nil {
		t.Errorf("node certificate does not verify for its IP: %v", err)
	}
	cli := readCert(t, filepath.Join(dir, "client-alice.crt"))
	if id := pki.IdentityOf(cli); id.Name != "alice" || !slices.Equal(slices.Sorted(slices.Values(id.Roles)), []string{"operator", "reader"}) {
		t.Errorf("client identity %+v", id)
	}
	for _, key := range []string{"ca.key", "node-n1.key", "client-alice.key"} {
		if fi, err := os.Stat(filepath.Join(dir, key)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v (%v), want 0600", key, fi.Mode(), err)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"certs", "create-client", "bob", "--role", "node", "--dir", dir}, `"node" is for node certificates only`},
		{[]string{"certs", "create-client", "bob", "--role", "root", "--dir", dir}, `"root" is not one of reporter, reader, operator, admin`},
		{[]string{"certs", "create-client", "bob", "--dir", dir}, "at least one role"},
		{[]string{"certs", "create-node", "n2", "--dir", dir}, "at least one --ip or --dns"},
		{[]string{"certs", "create-node", "n2", "--ip", "not-an-ip", "--dir", dir}, `--ip "not-an-ip" is not an IP address`},
		{[]string{"certs", "create-node", "n2", "--ip", "127.0.0.1", "--dir", t.TempDir()}, "ca.crt"},
	} {
		if r := ctl(t, nil, tc.args...); r.code != exitUsage || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%q: exit %d stderr %q, want 2 and %q", tc.args, r.code, r.stderr, tc.want)
		}
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	cs, err := pki.ReadCerts(path)
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}

func TestCertsCreateToken(t *testing.T) {
	r := ctl(t, nil, "certs", "create-token", "dash", "--role", "reader")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(lines) != 2 {
		t.Fatalf("exit %d stdout %q", r.code, r.stdout)
	}
	tok := lines[0]
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || len(raw) < 32 {
		t.Fatalf("token %q: %d random bytes (%v), want at least 32", tok, len(raw), err)
	}
	sum := sha256.Sum256([]byte(tok))
	if want := "dash reader " + hex.EncodeToString(sum[:]); lines[1] != want {
		t.Fatalf("token file line %q, want %q", lines[1], want)
	}
	again := ctl(t, nil, "certs", "create-token", "dash", "--role", "reader")
	if strings.HasPrefix(again.stdout, tok) {
		t.Fatal("two tokens alike")
	}
	if r := ctl(t, nil, "certs", "create-token", "n1", "--role", "node"); r.code != exitUsage {
		t.Fatalf("a node token: exit %d", r.code)
	}
}

// TestSecurityFlags: the CLI refuses, before sending anything, a command
// line without TLS trust or identity; the environment supplies the files;
// --insecure talks plaintext and ignores them.
func TestSecurityFlags(t *testing.T) {
	f := startCluster(t)
	f.set("Leader", &api.LeaderResponse{LeaderId: "n1"})
	noEnv := testEnv
	noEnv.getenv = func(k string) string {
		if strings.HasPrefix(k, "HOTSPLIT_") {
			return ""
		}
		return testEnv.getenv(k)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no TLS trust: give --cacert"},
		{[]string{"--cacert", testCerts.ca}, "no identity: give --cert/--key"},
		{[]string{"--cacert", testCerts.ca, "--cert", testCerts.cert}, "--cert and --key go together"},
		{[]string{"--cacert", testCerts.ca, "--insecure"}, "--insecure together with --cacert"},
	} {
		var out, errOut testutil.LogBuffer
		code := run(t.Context(), append(append([]string{"--endpoints", f.addr}, tc.args...), "cluster", "leader"), noEnv, &out, &errOut)
		if code != exitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d stderr %q, want 2 and %q", tc.args, code, errOut.String(), tc.want)
		}
	}
	if f.calls("Leader") != 0 {
		t.Fatal("a refused command line reached the server")
	}
	// With the environment's files: the server sees alice's certificate.
	if r := ctl(t, f, "cluster", "leader"); r.code != 0 || f.calls("Leader") != 1 {
		t.Fatalf("with $HOTSPLIT_CACERT/CERT/KEY: %+v", r)
	}
	// --insecure against the TLS server fails; against a plaintext one it
	// works even with the TLS environment set.
	if r := ctl(t, f, "--insecure", "--timeout", "1s", "cluster", "leader"); r.code != exitCredentials || !strings.Contains(r.stderr, "speaks TLS") {
		t.Fatalf("--insecure against a TLS server: %+v", r)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	plain := &fakeCluster{resp: map[string]proto.Message{"Leader": &api.LeaderResponse{LeaderId: "p1"}}, errs: map[string]error{}, reqs: map[string][]proto.Message{}}
	s := grpc.NewServer()
	api.RegisterClusterServer(s, plain)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	if r := ctl(t, nil, "--endpoints", lis.Addr().String(), "--insecure", "cluster", "leader"); r.code != 0 || !strings.Contains(r.stdout, "p1") {
		t.Fatalf("--insecure against a plaintext server: %+v", r)
	}
}
