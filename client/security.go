package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ErrNoTransportSecurity: Config names neither TLS (TLS or CACertFile) nor
// Insecure. hotsplit clusters run TLS unless started with --insecure, so a
// client has to say which it expects.
var ErrNoTransportSecurity = errors.New("client: no transport security configured: set Config.TLS or Config.CACertFile (the cluster CA, with CertFile/KeyFile or a Token), or Config.Insecure for a cluster started with --insecure")

// ErrBadTLSConfig: the TLS fields of Config contradict each other or name
// files that do not hold what they should; the error says which.
var ErrBadTLSConfig = errors.New("client: bad TLS configuration")

// transportCredentials picks the connection security Config asks for.
func transportCredentials(cfg Config) (credentials.TransportCredentials, error) {
	files := cfg.CACertFile != "" || cfg.CertFile != "" || cfg.KeyFile != ""
	switch {
	case cfg.Insecure && (cfg.TLS != nil || files):
		return nil, fmt.Errorf("%w: Config.Insecure together with TLS settings; choose one", ErrBadTLSConfig)
	case cfg.TLS != nil && files:
		return nil, fmt.Errorf("%w: Config.TLS together with CACertFile/CertFile/KeyFile; choose one", ErrBadTLSConfig)
	case cfg.Token != "" && strings.ContainsFunc(cfg.Token, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return nil, fmt.Errorf("%w: Config.Token holds a space, control or non-ASCII character", ErrBadTLSConfig)
	case cfg.Insecure:
		return insecure.NewCredentials(), nil
	case cfg.TLS != nil:
		t := cfg.TLS.Clone()
		t.MinVersion = max(t.MinVersion, tls.VersionTLS13)
		return credentials.NewTLS(t), nil
	case files:
		t, err := tlsFromFiles(cfg)
		if err != nil {
			return nil, err
		}
		return credentials.NewTLS(t), nil
	}
	return nil, ErrNoTransportSecurity
}

func tlsFromFiles(cfg Config) (*tls.Config, error) {
	if cfg.CACertFile == "" {
		return nil, fmt.Errorf("%w: CertFile/KeyFile without CACertFile: the cluster CA is needed to check the server", ErrBadTLSConfig)
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, fmt.Errorf("%w: CertFile and KeyFile go together (got only one)", ErrBadTLSConfig)
	}
	if cfg.CertFile == "" && cfg.Token == "" {
		return nil, fmt.Errorf("%w: no client certificate (CertFile/KeyFile) and no Token: the cluster would not know who you are", ErrBadTLSConfig)
	}
	pem, err := os.ReadFile(cfg.CACertFile)
	if err != nil {
		return nil, fmt.Errorf("%w: CA file: %v", ErrBadTLSConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrBadTLSConfig, cfg.CACertFile)
	}
	t := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	if cfg.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: client certificate %s / key %s: %v", ErrBadTLSConfig, cfg.CertFile, cfg.KeyFile, err)
		}
		// Always presented, even when the server's list of acceptable CAs
		// does not name its issuer (crypto/tls would then send nothing and
		// the call would arrive anonymous): a wrong certificate fails the
		// handshake and says so.
		t.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return t, nil
}

// handshakeRecorder keeps a failed TLS handshake as the endpoint's last
// dial error, so "unreachable" says why (an unknown authority, a TLS 1.2
// server) instead of only that the connection failed.
type handshakeRecorder struct {
	credentials.TransportCredentials
	ec *endpointConn
}

func (h handshakeRecorder) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := h.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		h.ec.setDialErr(fmt.Errorf("TLS handshake: %w", err))
		return nil, nil, err
	}
	return &firstReadConn{Conn: conn, ec: h.ec}, info, nil
}

// firstReadConn records the first read or write error that comes before
// the server's first byte. Under TLS 1.3 a server refuses a client
// certificate after the client's side of the handshake is done, so its
// alert ("remote error: tls: unknown certificate authority") arrives on the
// first read, or not at all: when gRPC's preface write or first read meets
// the closed socket first, gRPC closes the connection and sees only that.
// The message names the likely cause either way.
type firstReadConn struct {
	net.Conn
	ec  *endpointConn
	got atomic.Bool // a byte was read, or an error recorded
}

func (c *firstReadConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.got.Store(true)
	} else if err != nil {
		c.closedEarly(err)
	}
	return n, err
}

func (c *firstReadConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.closedEarly(err)
	}
	return n, err
}

// closedEarly records err unless the server has answered or an error was
// recorded already.
func (c *firstReadConn) closedEarly(err error) {
	if !c.got.Swap(true) {
		c.ec.setDialErr(fmt.Errorf("the server closed the connection before answering (as a server does that refuses this client's certificate: check --cert, --key and --cacert): %w", err))
	}
}

func (h handshakeRecorder) Clone() credentials.TransportCredentials {
	return handshakeRecorder{h.TransportCredentials.Clone(), h.ec}
}

// bearer sends a token as "authorization: Bearer <token>" on every call;
// gRPC refuses to send it over a connection without transport security
// unless the client was configured Insecure.
type bearer struct {
	token  string
	secure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearer) RequireTransportSecurity() bool { return b.secure }
