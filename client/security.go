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
	"time"

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

// transportCredentials picks the connection security Config asks for, and
// returns what it picked for classifying failures.
func transportCredentials(cfg Config) (credentials.TransportCredentials, security, error) {
	files := cfg.CACertFile != "" || cfg.CertFile != "" || cfg.KeyFile != ""
	switch {
	case cfg.Insecure && (cfg.TLS != nil || files):
		return nil, security{}, fmt.Errorf("%w: Config.Insecure together with TLS settings; choose one", ErrBadTLSConfig)
	case cfg.TLS != nil && files:
		return nil, security{}, fmt.Errorf("%w: Config.TLS together with CACertFile/CertFile/KeyFile; choose one", ErrBadTLSConfig)
	case cfg.Token != "" && strings.ContainsFunc(cfg.Token, func(r rune) bool { return r <= ' ' || r >= 0x7f }):
		return nil, security{}, fmt.Errorf("%w: Config.Token holds a space, control or non-ASCII character", ErrBadTLSConfig)
	case cfg.Insecure:
		return insecure.NewCredentials(), security{insecure: true}, nil
	case cfg.TLS != nil:
		t := cfg.TLS.Clone()
		t.MinVersion = max(t.MinVersion, tls.VersionTLS13)
		t.VerifyConnection = requireHTTP2(t.VerifyConnection)
		sec := security{userTLS: true}
		if len(t.Certificates) > 0 {
			sec.leaf = leafOf(t.Certificates[0])
		}
		return credentials.NewTLS(t), sec, nil
	case files:
		t, sec, err := tlsFromFiles(cfg)
		if err != nil {
			return nil, security{}, err
		}
		return credentials.NewTLS(t), sec, nil
	}
	return nil, security{}, ErrNoTransportSecurity
}

// leafOf is a certificate's parsed leaf, nil if it has none.
func leafOf(c tls.Certificate) *x509.Certificate {
	if c.Leaf != nil {
		return c.Leaf
	}
	if len(c.Certificate) == 0 {
		return nil
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}

func tlsFromFiles(cfg Config) (*tls.Config, security, error) {
	if cfg.CACertFile == "" {
		return nil, security{}, fmt.Errorf("%w: CertFile/KeyFile without CACertFile: the cluster CA is needed to check the server", ErrBadTLSConfig)
	}
	if (cfg.CertFile == "") != (cfg.KeyFile == "") {
		return nil, security{}, fmt.Errorf("%w: CertFile and KeyFile go together (got only one)", ErrBadTLSConfig)
	}
	if cfg.CertFile == "" && cfg.Token == "" {
		return nil, security{}, fmt.Errorf("%w: no client certificate (CertFile/KeyFile) and no Token: the cluster would not know who you are", ErrBadTLSConfig)
	}
	pem, err := os.ReadFile(cfg.CACertFile)
	if err != nil {
		return nil, security{}, fmt.Errorf("%w: CA file: %v", ErrBadTLSConfig, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, security{}, fmt.Errorf("%w: CA file %s holds no PEM certificate", ErrBadTLSConfig, cfg.CACertFile)
	}
	t := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool, VerifyConnection: requireHTTP2(nil)}
	sec := security{certFile: cfg.CertFile, caFile: cfg.CACertFile}
	if cfg.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			return nil, security{}, fmt.Errorf("%w: client certificate %s / key %s: %v", ErrBadTLSConfig, cfg.CertFile, cfg.KeyFile, err)
		}
		sec.leaf = leafOf(pair)
		// Always presented, even when the server's list of acceptable CAs
		// does not name its issuer (crypto/tls would then send nothing and
		// the call would arrive anonymous): a wrong certificate fails the
		// handshake and says so.
		t.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
	}
	return t, sec, nil
}

// handshakeRecorder keeps a failed TLS handshake as the endpoint's last
// dial error, so "unreachable" says why, classified as permanent (an
// unknown authority, a server without TLS) when its type says so.
type handshakeRecorder struct {
	credentials.TransportCredentials
	ec  *endpointConn
	sec security
}

func (h handshakeRecorder) ClientHandshake(ctx context.Context, authority string, raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := h.TransportCredentials.ClientHandshake(ctx, authority, raw)
	if err != nil {
		switch pe := h.sec.classifyHandshake(h.ec.addr, err, time.Now()); {
		case pe != nil:
			h.ec.setDialErr(pe)
		case isTimeout(err):
			h.ec.setDialErr(fmt.Errorf("TLS handshake: %w", err))
		default:
			// Closed or reset mid-handshake: a plaintext server that
			// dropped the ClientHello as a bad greeting does that.
			h.ec.setDialErr(&unexplained{err: fmt.Errorf("TLS handshake: %w", err), probe: probePlaintextServer})
		}
		return nil, nil, err
	}
	return &firstReadConn{Conn: conn, ec: h.ec, sec: h.sec}, info, nil
}

// isTimeout: the peer did not answer in time, which says nothing about
// what it speaks.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

// firstReadConn watches a connection until the server's greeting: an
// HTTP/2 SETTINGS frame clears the endpoint's last dial error; other first
// bytes (HTTP/1, TLS records to a plaintext client) are recorded as no gRPC
// server; a read or write error before them is recorded too. Under TLS 1.3
// a server refuses a client certificate after the client's side of the
// handshake is done, so its alert ("remote error: tls: unknown certificate
// authority") arrives on the first read, or not at all: when gRPC's preface
// write or first read meets the closed socket first, gRPC closes the
// connection and sees only that. Such an early close is recorded as
// unexplained, for a probe to explain (see Client.explain).
type firstReadConn struct {
	net.Conn
	ec  *endpointConn
	sec security
	got atomic.Bool // the greeting was judged, or an error recorded

	prefix []byte // the first bytes read, until judged; read by Read only
}

func (c *firstReadConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && !c.got.Load() {
		c.judge(p[:n])
	}
	if err != nil {
		c.closedEarly(err)
	}
	return n, err
}

// judge collects the first 5 bytes and judges them. Only gRPC's reader
// goroutine calls Read, so prefix needs no lock.
func (c *firstReadConn) judge(b []byte) {
	c.prefix = append(c.prefix, b[:min(len(b), 5-len(c.prefix))]...)
	if len(c.prefix) < 5 {
		return
	}
	if c.got.Swap(true) {
		return
	}
	if pe := classifyFirstBytes(c.ec.addr, c.prefix, false, nil); pe != nil {
		c.ec.setDialErr(pe)
		return
	}
	c.ec.setDialErr(nil) // a gRPC server's greeting: this endpoint works
}

func (c *firstReadConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil {
		c.closedEarly(err)
	}
	return n, err
}

// closedEarly records err unless the greeting was judged or an error was
// recorded already: a TLS alert about the client's certificate as such,
// anything else for a probe to explain.
func (c *firstReadConn) closedEarly(err error) {
	if c.got.Swap(true) {
		return
	}
	if a, ok := remoteAlert(err); ok {
		if pe := c.sec.classifyAlert(c.ec.addr, a, err); pe != nil {
			c.ec.setDialErr(pe)
			return
		}
	}
	kind := probeTLSRefusal
	if c.sec.insecure {
		kind = probeTLSServer
	}
	c.ec.setDialErr(&unexplained{err: fmt.Errorf("the server closed the connection before answering: %w", err), probe: kind})
}

func (h handshakeRecorder) Clone() credentials.TransportCredentials {
	return handshakeRecorder{h.TransportCredentials.Clone(), h.ec, h.sec}
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
