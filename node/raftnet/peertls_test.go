package raftnet

import (
	"context"
	"crypto/tls"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

type leaderOnly struct {
	api.UnimplementedClusterServer
}

func (leaderOnly) Leader(context.Context, *api.LeaderRequest) (*api.LeaderResponse, error) {
	return &api.LeaderResponse{LeaderId: "x"}, nil
}

// TestPeerCredsCheckExpectedMember: a node dialling a peer over gRPC
// (forwarding, progress) accepts only the member it expects at that
// address, or any node certificate where it expects none; the peer sees
// the dialling node's certificate.
func TestPeerCredsCheckExpectedMember(t *testing.T) {
	srvTLS, cliTLS := nodeReloader(t, "n3"), nodeReloader(t, "n1")
	ln := listen(t)
	var mu sync.Mutex
	var seen []string
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(srvTLS.ServerConfig(tls.VerifyClientCertIfGiven))), grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if ti, ok := peerTLSInfo(ctx); ok && len(ti.State.VerifiedChains) > 0 {
			mu.Lock()
			seen = append(seen, ti.State.VerifiedChains[0][0].Subject.CommonName)
			mu.Unlock()
		}
		return h(ctx, req)
	}))
	api.RegisterClusterServer(srv, leaderOnly{})
	go srv.Serve(ln)
	defer srv.Stop()
	addr := ln.Addr().String()

	call := func(expect string) error {
		var gotAuthority string
		creds := PeerCredentials(cliTLS, func(a string) string { gotAuthority = a; return expect })
		cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err = api.NewClusterClient(cc).Leader(ctx, &api.LeaderRequest{}, grpc.WaitForReady(false))
		if err == nil && gotAuthority != addr {
			t.Errorf("expectAt was asked about %q, want the dialled %q", gotAuthority, addr)
		}
		return err
	}
	if err := call("n2"); err == nil || !strings.Contains(err.Error(), "the member at this address is") || !strings.Contains(err.Error(), "n2") {
		t.Fatalf("n3 where n2 was expected: %v", err)
	}
	for _, expect := range []string{"n3", ""} {
		if err := call(expect); err != nil {
			t.Fatalf("expecting %q: %v", expect, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != "n1" {
		t.Fatalf("the server saw client certificates %q, want n1 twice", seen)
	}
}

func peerTLSInfo(ctx context.Context) (credentials.TLSInfo, bool) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return credentials.TLSInfo{}, false
	}
	ti, ok := p.AuthInfo.(credentials.TLSInfo)
	return ti, ok
}
