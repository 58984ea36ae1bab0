package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// tlsPeer is the context of a call over TLS whose client certificate
// verified with the given subject (nil: no certificate).
func tlsPeer(cn string, orgs ...string) context.Context {
	st := tls.ConnectionState{}
	if cn != "" {
		c := &x509.Certificate{Subject: pkix.Name{CommonName: cn, Organization: orgs}}
		st.VerifiedChains = [][]*x509.Certificate{{c}}
		st.PeerCertificates = []*x509.Certificate{c}
	}
	return peer.NewContext(context.Background(), &peer.Peer{AuthInfo: credentials.TLSInfo{State: st}})
}

func withMD(ctx context.Context, kv ...string) context.Context {
	return metadata.NewIncomingContext(ctx, metadata.Pairs(kv...))
}

func testServer(members ...string) *Server {
	isMember := func(id string) bool {
		for _, m := range members {
			if m == id {
				return true
			}
		}
		return false
	}
	return &Server{auth: &Authenticator{}, cfg: Config{IsMember: isMember}, limits: newLimiters(RateLimits{})}
}

func TestCallerIdentity(t *testing.T) {
	s := testServer("n1", "n2")
	fwd := encodePrincipal(&Principal{Name: "alice", Roles: []Role{RoleOperator}})
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		wantName  string
		forwarded bool
		code      codes.Code
	}{
		{"client certificate", tlsPeer("alice", "operator", "Acme"), "alice", false, codes.OK},
		{"no certificate", tlsPeer(""), "", false, codes.Unauthenticated},
		{"no TLS at all", context.Background(), "", false, codes.Unauthenticated},
		{"empty CN", tlsPeer("", "admin"), "", false, codes.Unauthenticated},
		{"member forwards", withMD(tlsPeer("n2", "node"), principalHeader, fwd), "alice", true, codes.OK},
		{"non-member node cannot forward", withMD(tlsPeer("n9", "node"), principalHeader, fwd), "n9", false, codes.OK},
		{"client cannot forward", withMD(tlsPeer("bob", "admin"), principalHeader, fwd), "bob", false, codes.OK},
		{"member sends garbage", withMD(tlsPeer("n2", "node"), principalHeader, "nonsense"), "", false, codes.InvalidArgument},
		{"bad bearer", withMD(tlsPeer("alice", "operator"), "authorization", "Bearer nope"), "", false, codes.Unauthenticated},
		{"not bearer", withMD(tlsPeer("alice", "operator"), "authorization", "Basic x"), "", false, codes.Unauthenticated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, forwarded, err := s.caller(tc.ctx)
			if status.Code(err) != tc.code {
				t.Fatalf("err %v, want %v", err, tc.code)
			}
			if err != nil {
				return
			}
			if p.Name != tc.wantName || forwarded != tc.forwarded {
				t.Fatalf("got %+v forwarded=%v, want %q forwarded=%v", p, forwarded, tc.wantName, tc.forwarded)
			}
		})
	}
	// A forwarded identity keeps exactly its roles.
	p, _, _ := s.caller(withMD(tlsPeer("n1", "node"), principalHeader, fwd))
	if !p.Has(RoleOperator) || p.Has(RoleAdmin) || p.IsNode() || p.Via != "forwarded by n1" {
		t.Fatalf("forwarded principal %+v", p)
	}
	// Insecure nodes refuse nothing and prove nothing.
	ins := &Server{auth: &Authenticator{Insecure: true}}
	if p, _, err := ins.caller(context.Background()); err != nil || p != insecurePrincipal {
		t.Fatalf("insecure: %+v %v", p, err)
	}
	for _, m := range allMethods(t) {
		if err := authorize(insecurePrincipal, m, selfRequest(m, "someone-else")); err != nil {
			t.Errorf("insecure node refused %s: %v", m, err)
		}
	}
}

func TestActorIsTheIdentity(t *testing.T) {
	ctx := withPrincipal(context.Background(), &Principal{Name: "alice"})
	if a, n := actorOf(ctx, "alice-the-sre"); a != "alice" || n != "alice-the-sre" {
		t.Fatalf("actor %q note %q", a, n)
	}
	if a, n := actorOf(ctx, "alice"); a != "alice" || n != "" {
		t.Fatalf("actor %q note %q", a, n)
	}
	if a, n := actorOf(withPrincipal(context.Background(), insecurePrincipal), "bob"); a != "bob" || n != "" {
		t.Fatalf("insecure: actor %q note %q", a, n)
	}
}
