package pki

import (
	"crypto/x509"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func mustCA(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := NewCA(name, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestNodeCertificate(t *testing.T) {
	ca := mustCA(t, "test")
	p, err := ca.NewNode("n1", NodeOptions{IPs: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Cert
	if c.Subject.CommonName != "n1" || !slices.Equal(c.Subject.Organization, []string{RoleNode}) || !IsNode(c) {
		t.Fatalf("subject %v, EKU %v", c.Subject, c.ExtKeyUsage)
	}
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("verify for %v: %v", usage, err)
		}
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "127.0.0.1"}); err != nil {
		t.Errorf("verify for the IP SAN: %v", err)
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: ca.Pool(), DNSName: "n1"}); err == nil {
		t.Error("the CN verified as a host name; only SANs may")
	}
	if _, err := c.Verify(x509.VerifyOptions{Roots: mustCA(t, "other").Pool()}); err == nil {
		t.Error("verified against another CA")
	}
	if _, err := ca.NewNode("n1", NodeOptions{}); !errors.Is(err, ErrNoSAN) {
		t.Errorf("node without SAN: %v, want ErrNoSAN", err)
	}
}

func TestClientCertificate(t *testing.T) {
	ca := mustCA(t, "test")
	p, err := ca.NewClient("alice", []string{"reader", "operator"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	id := IdentityOf(p.Cert)
	if id.Name != "alice" || !slices.Equal(slices.Sorted(slices.Values(id.Roles)), []string{"operator", "reader"}) || IsNode(p.Cert) {
		t.Fatalf("identity %+v, node %v", id, IsNode(p.Cert))
	}
	if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Error("a client certificate verified for serverAuth")
	}
	for _, tc := range []struct {
		name  string
		roles []string
		want  error
	}{
		{"bob", []string{"node"}, ErrBadRole},
		{"bob", []string{"reader", "node"}, ErrBadRole},
		{"bob", []string{"root"}, ErrBadRole},
		{"bob", nil, ErrBadRole},
		{"", []string{"reader"}, ErrBadName},
		{"bob smith", []string{"reader"}, ErrBadName},
		{"a,b", []string{"reader"}, ErrBadName},
	} {
		if _, err := ca.NewClient(tc.name, tc.roles, 0); !errors.Is(err, tc.want) {
			t.Errorf("NewClient(%q, %v): %v, want %v", tc.name, tc.roles, err, tc.want)
		}
	}
}

func TestWriteAndLoad(t *testing.T) {
	dir := t.TempDir()
	ca := mustCA(t, "test")
	caCrt, caKey := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key")
	if err := ca.Write(caCrt, caKey, false); err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(caCrt, caKey, false); !errors.Is(err, ErrFileExists) {
		t.Fatalf("second write: %v, want ErrFileExists", err)
	}
	fi, err := os.Stat(caKey)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key mode %v (%v), want 0600", fi.Mode(), err)
	}
	back, err := LoadCA(caCrt, caKey)
	if err != nil {
		t.Fatal(err)
	}
	p, err := back.NewClient("alice", []string{"admin"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cert.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("a certificate of the reloaded CA does not verify: %v", err)
	}
	crt, key := filepath.Join(dir, "a.crt"), filepath.Join(dir, "a.key")
	if err := p.Write(crt, key, false); err != nil {
		t.Fatal(err)
	}
	q, _ := back.NewClient("alice", []string{"admin"}, 0)
	if err := q.Write(crt, key, true); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("replaced key mode %v (%v), want 0600", fi.Mode(), err)
	}
	if _, err := LoadCA(crt, key); err == nil {
		t.Error("a client certificate loaded as a CA")
	}
	other := mustCA(t, "other")
	otherKey := filepath.Join(dir, "other.key")
	if err := other.Write(filepath.Join(dir, "other.crt"), otherKey, false); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCA(caCrt, otherKey); err == nil {
		t.Error("a CA loaded with another CA's key")
	}
}

// Each certificate maker's validity: 0 and negative take its default, a
// positive one is kept (a certificate starts clockSkew early).
func TestValidityDefaults(t *testing.T) {
	ca := mustCA(t, "test")
	makers := []struct {
		name string
		def  time.Duration
		make func(time.Duration) (*x509.Certificate, error)
	}{
		{"NewCA", DefaultCAValidity, func(v time.Duration) (*x509.Certificate, error) {
			c, err := NewCA("v", v)
			if err != nil {
				return nil, err
			}
			return c.Cert, nil
		}},
		{"NewNode", DefaultLeafValidity, func(v time.Duration) (*x509.Certificate, error) {
			p, err := ca.NewNode("n1", NodeOptions{DNSNames: []string{"localhost"}, Validity: v})
			if err != nil {
				return nil, err
			}
			return p.Cert, nil
		}},
		{"NewClient", DefaultLeafValidity, func(v time.Duration) (*x509.Certificate, error) {
			p, err := ca.NewClient("alice", []string{"reader"}, v)
			if err != nil {
				return nil, err
			}
			return p.Cert, nil
		}},
	}
	for _, m := range makers {
		for _, tc := range []struct{ in, want time.Duration }{
			{0, m.def}, {-time.Hour, m.def}, {2 * time.Hour, 2 * time.Hour},
		} {
			c, err := m.make(tc.in)
			if err != nil {
				t.Fatalf("%s(%v): %v", m.name, tc.in, err)
			}
			if got := c.NotAfter.Sub(c.NotBefore) - clockSkew; got != tc.want {
				t.Errorf("%s(%v): valid for %v, want %v", m.name, tc.in, got, tc.want)
			}
		}
	}
}
