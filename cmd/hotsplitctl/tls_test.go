package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hotsplit/hotsplit/pki"
)

// The fake clusters of these tests serve TLS with a certificate of one CA
// made per test binary; testEnv hands the CLI that CA and an operator's
// client certificate through $HOTSPLIT_CACERT, $HOTSPLIT_CERT and
// $HOTSPLIT_KEY, as an operator's shell would.
var testCerts struct {
	ca, cert, key string
	server        tls.Certificate
	pool          *pki.CA
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "hotsplitctl-test-certs-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	err = makeTestCerts(dir)
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func makeTestCerts(dir string) error {
	ca, err := pki.NewCA("hotsplitctl-test", 0)
	if err != nil {
		return err
	}
	testCerts.pool = ca
	testCerts.ca = filepath.Join(dir, "ca.crt")
	if err := ca.Write(testCerts.ca, filepath.Join(dir, "ca.key"), false); err != nil {
		return err
	}
	cli, err := ca.NewClient("alice", []string{"operator"}, 0)
	if err != nil {
		return err
	}
	testCerts.cert, testCerts.key = filepath.Join(dir, "alice.crt"), filepath.Join(dir, "alice.key")
	if err := cli.Write(testCerts.cert, testCerts.key, false); err != nil {
		return err
	}
	srv, err := ca.NewNode("n1", pki.NodeOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return err
	}
	testCerts.server, err = srv.TLSCertificate()
	return err
}

// testServerCreds serve TLS 1.3 as a node's client port does: client
// certificates verified when given.
func testServerCreds(testing.TB) grpc.ServerOption {
	return grpc.Creds(credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{testCerts.server},
		ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: testCerts.pool.Pool()}))
}
