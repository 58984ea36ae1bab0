package transport

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Authenticator establishes who a caller is, from a verified client
// certificate or a bearer token (docs/design.md#tls-and-identities). A token, when one is presented,
// must be valid and is the identity; otherwise the certificate is.
type Authenticator struct {
	// Insecure: the node runs without TLS; every caller is the anonymous
	// insecurePrincipal and nothing is refused.
	Insecure bool
	// Tokens from --tokenFile; nil accepts no token.
	Tokens *TokenTable
}

// errNoCredentials is the answer to a caller with neither a verified
// certificate nor a valid token.
var errNoCredentials = status.Error(codes.Unauthenticated, "no credentials: present a client certificate of the cluster CA or a bearer token (hotsplitctl --cert/--key or --token)")

// FromGRPC authenticates the caller of a gRPC call.
func (a *Authenticator) FromGRPC(ctx context.Context) (*Principal, error) {
	if a.Insecure {
		return insecurePrincipal, nil
	}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			return a.fromBearer(v[0])
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if info, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			return fromTLS(&info.State)
		}
	}
	return nil, errNoCredentials
}

// FromHTTP authenticates the caller of an HTTP request.
func (a *Authenticator) FromHTTP(r *http.Request) (*Principal, error) {
	if a.Insecure {
		return insecurePrincipal, nil
	}
	if v := r.Header.Get("Authorization"); v != "" {
		return a.fromBearer(v)
	}
	return fromTLS(r.TLS)
}

func (a *Authenticator) fromBearer(header string) (*Principal, error) {
	tok, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || tok == "" {
		return nil, status.Error(codes.Unauthenticated, `authorization: want "Bearer <token>"`)
	}
	if a.Tokens == nil {
		return nil, status.Error(codes.Unauthenticated, "bearer token refused: this node accepts no tokens (start it with --tokenFile)")
	}
	p, ok := a.Tokens.Lookup(tok)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "bearer token refused: unknown token")
	}
	return p, nil
}

// fromTLS reads the identity of a verified client certificate. Only chains
// the TLS handshake verified against the cluster CA count.
func fromTLS(cs *tls.ConnectionState) (*Principal, error) {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil, errNoCredentials
	}
	p := principalFromCert(cs.VerifiedChains[0][0])
	if p.Name == "" {
		return nil, status.Error(codes.Unauthenticated, "client certificate has an empty subject CN: the CN is the identity")
	}
	return p, nil
}
