package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// probeKind is the question a probe connection asks an endpoint whose
// connection failed without a typed error.
type probeKind uint8

const (
	// probeTLSRefusal (a TLS client whose connection closed before the
	// server's greeting): does the server refuse this client's
	// certificate? The probe completes a handshake and reads without
	// writing, so the server's alert is not lost to a reset.
	probeTLSRefusal probeKind = iota + 1
	// probePlaintextServer (a TLS handshake closed or reset): does the
	// server greet in plaintext HTTP/2, as a --insecure node does?
	probePlaintextServer
	// probeTLSServer (a plaintext client whose connection closed before
	// the greeting): does the server speak TLS?
	probeTLSServer
)

// unexplained is a dial error a probe may explain. The probe runs once, on
// the first call that finds the connection failed with it.
type unexplained struct {
	err   error
	probe probeKind

	once  sync.Once
	found *PermanentError // nil: nothing permanent found
}

func (u *unexplained) Error() string { return u.err.Error() }
func (u *unexplained) Unwrap() error { return u.err }

// explain turns a recorded dial error into what the caller gets: a probe
// runs for an unexplained one, bounded by DialTimeout and ctx, and its
// finding replaces the record so later calls see it at once.
func (c *Client) explain(ctx context.Context, ec *endpointConn, err error) error {
	u, ok := err.(*unexplained)
	if !ok {
		return err
	}
	u.once.Do(func() {
		u.found = c.probe(ctx, ec.addr, u.probe)
		if u.found != nil {
			ec.replaceDialErr(u, u.found)
		}
	})
	if u.found != nil {
		return u.found
	}
	return u.err
}

// probe opens one connection to addr to ask kind's question; nil when the
// answer is not a permanent problem (or there is none in time).
func (c *Client) probe(ctx context.Context, addr string, kind probeKind) *PermanentError {
	ctx, cancel := context.WithTimeout(ctx, c.dialTimeout)
	defer cancel()
	var d net.Dialer
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil
	}
	defer raw.Close()
	stop := context.AfterFunc(ctx, func() { raw.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	switch kind {
	case probeTLSRefusal:
		conn, _, err := c.creds.ClientHandshake(ctx, addr, raw)
		if err != nil {
			return c.sec.classifyHandshake(addr, err, time.Now())
		}
		defer conn.Close()
		// A server that takes the certificate greets with SETTINGS; one
		// that refuses it sends an alert, read here as an error.
		if _, err := conn.Read(make([]byte, 1)); err != nil {
			if a, ok := remoteAlert(err); ok {
				return c.sec.classifyAlert(addr, a, err)
			}
		}
		return nil
	case probePlaintextServer:
		var b [5]byte
		if _, err := io.ReadFull(raw, b[:]); err != nil {
			return nil // silent: a TLS server waits for the client
		}
		return classifyFirstBytes(addr, b[:], true, nil)
	}
	// probeTLSServer: a server that answers a ClientHello with a
	// certificate (refused here: no roots) or an alert speaks TLS.
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(raw, &tls.Config{ServerName: host, RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}})
	err = tc.HandshakeContext(ctx)
	_, verify := errors.AsType[*tls.CertificateVerificationError](err)
	_, alert := remoteAlert(err)
	if err == nil || verify || alert {
		return &PermanentError{Problem: ProblemServerIsTLS, Endpoint: addr, Setting: SettingInsecure, Err: err}
	}
	return nil
}

// observation is what one call's gRPC stats showed: whether its request
// message went out, and whether any gRPC response header or trailer came
// back. A server that answers without either is no gRPC server.
type observation struct {
	sent, grpcAnswer atomic.Bool
}

type observationKey struct{}

// observe returns ctx carrying a fresh observation for callObserver.
func observe(ctx context.Context) (context.Context, *observation) {
	o := &observation{}
	return context.WithValue(ctx, observationKey{}, o), o
}

// callObserver is the connections' stats.Handler: it fills in the
// observation of the call's context.
type callObserver struct{}

func (callObserver) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (callObserver) HandleRPC(ctx context.Context, s stats.RPCStats) {
	o, _ := ctx.Value(observationKey{}).(*observation)
	if o == nil {
		return
	}
	switch s.(type) {
	case *stats.OutPayload:
		o.sent.Store(true)
	case *stats.InHeader, *stats.InTrailer:
		o.grpcAnswer.Store(true)
	}
}

func (callObserver) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (callObserver) HandleConn(context.Context, stats.ConnStats)                       {}

// notGRPC reports a call's error as the answer of a server that is no gRPC
// server: an HTTP server answers a gRPC call with a status and no gRPC
// headers, which gRPC maps to a code (404: Unimplemented). An error
// without a gRPC answer is that only when the request went out (errors of
// the client's own making come before) or it is Unimplemented (which
// gRPC's client never makes before an answer), and not a code of a broken
// or timed-out connection.
func (o *observation) notGRPC(addr string, err error) *PermanentError {
	if err == nil || o.grpcAnswer.Load() {
		return nil
	}
	code := status.Code(err)
	switch {
	case code == codes.Unimplemented:
	case !o.sent.Load():
		return nil
	case code == codes.Unavailable, code == codes.DeadlineExceeded, code == codes.Canceled, code == codes.ResourceExhausted:
		return nil
	}
	return &PermanentError{Problem: ProblemNotGRPC, Endpoint: addr, Setting: SettingEndpoints,
		Detail: "it answers HTTP but not gRPC (a node's --httpAddr?)", Err: err}
}
