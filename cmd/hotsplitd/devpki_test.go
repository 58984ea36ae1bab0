package main

import (
	"bytes"
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hotsplit/hotsplit/pki"
)

// A --devDir keeps its CA across runs, so a browser that trusted the page
// once keeps trusting it; the certificates it signs are fresh each run.
func TestDevPKIKeepsItsCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	d1, err := devPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	ca1, _ := os.ReadFile(d1.file("ca.crt"))
	node1, _ := os.ReadFile(d1.file("node-n1.crt"))
	d2, err := devPKI(dir)
	if err != nil {
		t.Fatal(err)
	}
	ca2, _ := os.ReadFile(d2.file("ca.crt"))
	node2, _ := os.ReadFile(d2.file("node-n1.crt"))
	if len(ca1) == 0 || !bytes.Equal(ca1, ca2) {
		t.Fatal("the second run made a new CA")
	}
	if bytes.Equal(node1, node2) {
		t.Fatal("the second run kept the old node certificate")
	}
	roots, _ := pki.ReadCerts(d2.file("ca.crt"))
	pool := x509.NewCertPool()
	pool.AddCert(roots[0])
	leaf, _ := pki.ReadCerts(d2.file("node-n1.crt"))
	if _, err := leaf[0].Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Fatalf("the new node certificate does not chain to the kept CA: %v", err)
	}
	// A CA key that does not load is an error naming the way out.
	if err := os.WriteFile(d2.file("ca.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := devPKI(dir); err == nil || !strings.Contains(err.Error(), "remove ca.crt and ca.key") {
		t.Fatalf("a broken CA: %v", err)
	}
}

// A --devDir with an earlier run's cluster restarts it at its ports, or
// says how to start afresh.
func TestDevRestart(t *testing.T) {
	dir := t.TempDir()
	if restart, err := devRestart(dir, 0); restart || err != nil {
		t.Fatalf("an empty dir: %v %v", restart, err)
	}
	if err := os.Mkdir(filepath.Join(dir, "n1"), 0o750); err != nil {
		t.Fatal(err)
	}
	if restart, err := devRestart(dir, 7300); !restart || err != nil {
		t.Fatalf("an earlier run with --devPorts: %v %v", restart, err)
	}
	if _, err := devRestart(dir, 0); err == nil || !strings.Contains(err.Error(), "--devPorts") || !strings.Contains(err.Error(), "CA") {
		t.Fatalf("an earlier run without --devPorts: %v", err)
	}
}
