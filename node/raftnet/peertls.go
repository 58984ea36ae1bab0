package raftnet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"

	"google.golang.org/grpc/credentials"

	"github.com/hotsplit/hotsplit/pki"
)

// CheckPeerNode checks a verified peer certificate of a node this node
// dialled: a node certificate, of the member expected at that address when
// one is known, else of a node admit accepts (nil admit: any node).
func CheckPeerNode(leaf *x509.Certificate, expected string, admit func(string) bool) error {
	id := leaf.Subject.CommonName
	switch {
	case !pki.IsNode(leaf):
		return fmt.Errorf("peer certificate CN=%q O=%v is not a node certificate", id, leaf.Subject.Organization)
	case expected != "" && id != expected:
		return fmt.Errorf("peer certificate names node %q, the member at this address is %q", id, expected)
	case expected == "" && admit != nil && !admit(id):
		return fmt.Errorf("peer certificate names node %q, which is not a member", id)
	}
	return nil
}

// peerCreds are the gRPC transport credentials of node-to-node calls
// (forwarding to the leader, peer progress): mutual TLS with this node's
// certificate, built per handshake from the current files, and a check that
// the peer is the member expected at the dialled address (gRPC passes the
// address, port included, as the authority).
type peerCreds struct {
	credentials.TransportCredentials // Info and the unused server side
	tls                              *pki.Reloader
	expectAt                         func(addr string) string
}

// PeerCredentials are the credentials of this node's gRPC calls to other
// nodes: its current certificate from r, and a peer that must be the
// member expectAt names at the dialled address (any node certificate of
// the cluster CA where it names none).
func PeerCredentials(r *pki.Reloader, expectAt func(addr string) string) credentials.TransportCredentials {
	return &peerCreds{TransportCredentials: credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS13}), tls: r, expectAt: expectAt}
}

func (p *peerCreds) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	host, _, err := net.SplitHostPort(authority)
	if err != nil {
		host = authority
	}
	conn, info, err := credentials.NewTLS(p.tls.ClientConfig(host)).ClientHandshake(ctx, authority, raw)
	if err != nil {
		return nil, nil, err
	}
	ti, ok := info.(credentials.TLSInfo)
	if !ok || len(ti.State.PeerCertificates) == 0 {
		conn.Close()
		return nil, nil, fmt.Errorf("peer %s: no TLS peer certificate", authority)
	}
	if err := CheckPeerNode(ti.State.PeerCertificates[0], p.expectAt(authority), nil); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("peer %s: %w", authority, err)
	}
	return conn, info, nil
}

func (p *peerCreds) Clone() credentials.TransportCredentials {
	c := *p
	return &c
}
