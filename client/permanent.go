package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrPermanent: a connection failure that retrying cannot fix (a
// certificate expired or refused, the wrong CA, TLS against plaintext, a
// port that is not a hotsplit gRPC port). Errors wrapping it are
// *PermanentError, which names the setting to fix.
var ErrPermanent = errors.New("client: connection settings cannot work; retrying will not help")

// Problem is what a PermanentError found wrong.
type Problem uint8

const (
	// ProblemCertExpired: the client certificate's NotAfter has passed
	// (checked before dialing).
	ProblemCertExpired Problem = iota + 1
	// ProblemCertNotYetValid: the client certificate's NotBefore is still
	// ahead (checked before dialing).
	ProblemCertNotYetValid
	// ProblemCertRefused: the server refused the client certificate (a TLS
	// alert: unknown certificate authority, bad, expired by its clock,
	// revoked) or requires one and none was given.
	ProblemCertRefused
	// ProblemUnknownAuthority: the server's certificate is not signed by
	// the CA the client trusts (CACertFile).
	ProblemUnknownAuthority
	// ProblemServerTLS: this endpoint's TLS cannot be used: its
	// certificate expired, is not yet valid, does not name the address
	// dialled or is no server certificate, or it offers no TLS 1.3.
	ProblemServerTLS
	// ProblemServerIsTLS: a plaintext (Insecure) client reached a TLS
	// server.
	ProblemServerIsTLS
	// ProblemServerIsPlaintext: a TLS client reached a plaintext HTTP/2
	// server (a node started with --insecure).
	ProblemServerIsPlaintext
	// ProblemNotGRPC: the endpoint is no gRPC port (an HTTP port, a raft
	// port, another service).
	ProblemNotGRPC
)

// EveryEndpoint reports whether the problem lies with the client's own
// settings and so holds at every endpoint of one cluster: its certificate,
// the CA it trusts, whether it speaks TLS (a cluster's nodes share one CA
// and one mode). A call that meets one ends at once, even while other
// endpoints are merely down: retrying them cannot help, and waiting for
// them would hide the cause behind "unavailable". The other problems belong
// to one endpoint (its certificate, a wrong port in the list): the call
// skips it and goes on with the others, and ends at once only when every
// endpoint failed permanently.
func (p Problem) EveryEndpoint() bool {
	switch p {
	case ProblemServerTLS, ProblemNotGRPC:
		return false
	}
	return true
}

// Setting names the part of Config a PermanentError says to fix; callers
// with their own names for them (hotsplitctl's flags) render the message
// with Explain.
type Setting uint8

const (
	SettingCertFile   Setting = iota + 1 // Config.CertFile and KeyFile
	SettingCACertFile                    // Config.CACertFile
	SettingTLS                           // Config.TLS
	SettingInsecure                      // Config.Insecure
	SettingEndpoints                     // Config.Endpoints
)

// configName is the Config field a Setting stands for.
func configName(s Setting) string {
	switch s {
	case SettingCertFile:
		return "Config.CertFile"
	case SettingCACertFile:
		return "Config.CACertFile"
	case SettingTLS:
		return "Config.TLS"
	case SettingInsecure:
		return "Config.Insecure"
	}
	return "Config.Endpoints"
}

// PermanentError is a connection failure that retrying cannot fix. It
// wraps ErrPermanent and the typed error it was classified from (an
// x509 or crypto/tls error), so errors.Is and errors.As see both. Calls
// return it inside an *Error. Its gRPC status code is Unavailable, the code
// gRPC gives any failed connection (so code-based callers such as a
// node's join loop treat it as any unreachable peer); ErrPermanent, not
// the code, says that retrying is useless.
type PermanentError struct {
	Problem Problem
	// Endpoint is the address that showed the problem ("" when it was
	// found before dialing).
	Endpoint string
	// Setting is what to fix, File its file when it names one.
	Setting Setting
	File    string
	// At is the certificate's NotAfter (expired) or NotBefore (not yet
	// valid); zero otherwise.
	At time.Time
	// Detail says what was seen, for the message: the alert, the issuer,
	// what the port answered.
	Detail string
	// Err is the error it was classified from; nil when found before
	// dialing.
	Err error
}

func (e *PermanentError) Error() string { return e.Explain(configName) }

// Unwrap exposes ErrPermanent and the classified error.
func (e *PermanentError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrPermanent}
	}
	return []error{ErrPermanent, e.Err}
}

// GRPCStatus makes status.Code and status.Convert see the problem.
func (e *PermanentError) GRPCStatus() *status.Status {
	return status.New(codes.Unavailable, e.Error())
}

// Explain renders the problem as one line, naming settings with name (for
// Error: the Config fields; for hotsplitctl: its flags).
func (e *PermanentError) Explain(name func(Setting) string) string {
	subject := name(e.Setting)
	if e.File != "" {
		subject += " " + e.File
	}
	ep := e.Endpoint
	switch e.Problem {
	case ProblemCertExpired:
		return fmt.Sprintf("%s: certificate expired at %s (%s ago); renew it", subject, formatTime(e.At), humanDuration(time.Since(e.At)))
	case ProblemCertNotYetValid:
		return fmt.Sprintf("%s: certificate not valid before %s (in %s): check this machine's clock, or wait", subject, formatTime(e.At), humanDuration(time.Until(e.At)))
	case ProblemCertRefused:
		return fmt.Sprintf("%s: %s refused this client certificate (%s)", subject, ep, e.Detail)
	case ProblemUnknownAuthority:
		return fmt.Sprintf("%s: the certificate of %s (%s) is not signed by this CA; give the cluster's CA", subject, ep, e.Detail)
	case ProblemServerTLS:
		return fmt.Sprintf("%s %s: %s", name(SettingEndpoints), ep, e.Detail)
	case ProblemServerIsTLS:
		return fmt.Sprintf("%s: %s speaks TLS; connect with TLS instead (%s, with a client certificate or a token)", subject, ep, name(SettingCACertFile))
	case ProblemServerIsPlaintext:
		return fmt.Sprintf("%s %s speaks plaintext gRPC, not TLS (a node started with --insecure); use %s only if that is intended", name(SettingEndpoints), ep, name(SettingInsecure))
	}
	return fmt.Sprintf("%s %s: not a hotsplit gRPC port: %s; give a node's gRPC address (hotsplitd --grpcAddr)", name(SettingEndpoints), ep, e.Detail)
}

// formatTime renders a certificate time as people read it, in UTC.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

// humanDuration renders a certificate's distance from now coarsely: days
// past two days, else hours, minutes or seconds.
func humanDuration(d time.Duration) string {
	d = d.Abs()
	switch {
	case d >= 48*time.Hour:
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	case d >= 2*time.Hour:
		return fmt.Sprintf("%d hours", d/time.Hour)
	case d >= 2*time.Minute:
		return fmt.Sprintf("%d minutes", d/time.Minute)
	}
	return d.Round(time.Second).String()
}

// security is what the client was configured with, to classify failures
// and name the setting to fix.
type security struct {
	insecure bool
	userTLS  bool   // Config.TLS given (no files)
	certFile string // Config.CertFile
	caFile   string // Config.CACertFile
	// leaf is the client certificate when it is known up front (files, or
	// Config.TLS.Certificates[0]); nil with GetClientCertificate or none.
	leaf *x509.Certificate
}

func (s security) certSetting() (Setting, string) {
	if s.userTLS {
		return SettingTLS, ""
	}
	return SettingCertFile, s.certFile
}

func (s security) caSetting() (Setting, string) {
	if s.userTLS {
		return SettingTLS, ""
	}
	return SettingCACertFile, s.caFile
}

// checkOwnCert finds an expired or not yet valid client certificate before
// anything is dialled: the clearest message, and no server logs a refusal.
func (s security) checkOwnCert(now time.Time) *PermanentError {
	if s.leaf == nil {
		return nil
	}
	set, file := s.certSetting()
	switch {
	case now.After(s.leaf.NotAfter):
		return &PermanentError{Problem: ProblemCertExpired, Setting: set, File: file, At: s.leaf.NotAfter}
	case now.Before(s.leaf.NotBefore):
		return &PermanentError{Problem: ProblemCertNotYetValid, Setting: set, File: file, At: s.leaf.NotBefore}
	}
	return nil
}

// TLS alerts a server sends about the client's certificate (RFC 8446
// §6.2); crypto/tls does not export their values.
const (
	alertBadCertificate         tls.AlertError = 42
	alertUnsupportedCertificate tls.AlertError = 43
	alertCertificateRevoked     tls.AlertError = 44
	alertCertificateExpired     tls.AlertError = 45
	alertCertificateUnknown     tls.AlertError = 46
	alertUnknownCA              tls.AlertError = 48
	alertAccessDenied           tls.AlertError = 49
	alertProtocolVersion        tls.AlertError = 70
	alertNoApplicationProtocol  tls.AlertError = 120
	alertCertificateRequired    tls.AlertError = 116
)

// remoteAlert returns the TLS alert the peer sent, if err is one.
// crypto/tls reports a received alert as *net.OpError{Op: "remote error"}
// around its unexported alert type, a uint8 of the same values as the
// exported tls.AlertError (which it uses only for QUIC).
func remoteAlert(err error) (tls.AlertError, bool) {
	op, ok := errors.AsType[*net.OpError](err)
	if !ok || op.Op != "remote error" || op.Err == nil {
		return 0, false
	}
	v := reflect.ValueOf(op.Err)
	if v.Kind() != reflect.Uint8 || v.Type().PkgPath() != "crypto/tls" {
		return 0, false
	}
	return tls.AlertError(v.Uint()), true
}

// classifyAlert judges an alert the server sent: about the client's
// certificate, or that it offers no protocol the client does.
func (s security) classifyAlert(addr string, a tls.AlertError, err error) *PermanentError {
	set, file := s.certSetting()
	refused := func(why string) *PermanentError {
		return &PermanentError{Problem: ProblemCertRefused, Endpoint: addr, Setting: set, File: file, Detail: a.Error() + why, Err: err}
	}
	switch a {
	case alertUnknownCA:
		return refused(": it is not signed by a CA the cluster trusts; use one the cluster's CA issued")
	case alertCertificateExpired:
		why := ": expired or not yet valid by the server's clock"
		if s.leaf != nil {
			why += fmt.Sprintf(" (valid %s to %s here: check the clocks)", formatTime(s.leaf.NotBefore), formatTime(s.leaf.NotAfter))
		}
		return refused(why)
	case alertBadCertificate, alertUnsupportedCertificate, alertCertificateUnknown:
		return refused(": it must be a client certificate (clientAuth usage) of the cluster's CA")
	case alertCertificateRevoked, alertAccessDenied:
		return refused("")
	case alertCertificateRequired:
		return refused(": the server requires a client certificate")
	case alertProtocolVersion:
		return &PermanentError{Problem: ProblemServerTLS, Endpoint: addr, Setting: SettingEndpoints, Detail: "the server offers no TLS 1.3 (" + a.Error() + ")", Err: err}
	case alertNoApplicationProtocol:
		return &PermanentError{Problem: ProblemNotGRPC, Endpoint: addr, Setting: SettingEndpoints, Detail: "its TLS offers no HTTP/2 (" + a.Error() + "; a raft port?)", Err: err}
	}
	return nil
}

// errNoHTTP2: the TLS handshake completed without negotiating HTTP/2
// (ALPN h2), which every gRPC server offers; set by the client's
// VerifyConnection so the failure is typed.
var errNoHTTP2 = errors.New("the server's TLS does not offer HTTP/2 (ALPN h2)")

// requireHTTP2 is a tls.Config.VerifyConnection that refuses a server
// without ALPN h2, keeping a VerifyConnection already set.
func requireHTTP2(prev func(tls.ConnectionState) error) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if cs.NegotiatedProtocol != "h2" {
			return errNoHTTP2
		}
		if prev != nil {
			return prev(cs)
		}
		return nil
	}
}

// classifyHandshake judges a failed TLS handshake from the error's type; nil
// when the failure may pass (a timeout, a reset).
func (s security) classifyHandshake(addr string, err error, now time.Time) *PermanentError {
	if errors.Is(err, errNoHTTP2) {
		return &PermanentError{Problem: ProblemNotGRPC, Endpoint: addr, Setting: SettingEndpoints, Detail: "its TLS offers no HTTP/2 (no ALPN h2: a raft port?)", Err: err}
	}
	if a, ok := remoteAlert(err); ok {
		return s.classifyAlert(addr, a, err)
	}
	if rh, ok := errors.AsType[tls.RecordHeaderError](err); ok {
		return classifyFirstBytes(addr, rh.RecordHeader[:], true, err)
	}
	if _, ok := errors.AsType[*tls.CertificateVerificationError](err); !ok {
		return nil
	}
	serverTLS := func(detail string) *PermanentError {
		return &PermanentError{Problem: ProblemServerTLS, Endpoint: addr, Setting: SettingEndpoints, Detail: detail, Err: err}
	}
	if ua, ok := errors.AsType[x509.UnknownAuthorityError](err); ok {
		set, file := s.caSetting()
		detail := "no certificate"
		if ua.Cert != nil {
			detail = fmt.Sprintf("issued by %q", ua.Cert.Issuer.String())
		}
		return &PermanentError{Problem: ProblemUnknownAuthority, Endpoint: addr, Setting: set, File: file, Detail: detail, Err: err}
	}
	if h, ok := errors.AsType[x509.HostnameError](err); ok {
		return serverTLS(fmt.Sprintf("the server's certificate does not name %s (%s); use an address it names, or reissue it with that address", h.Host, certNames(h.Certificate)))
	}
	if ci, ok := errors.AsType[x509.CertificateInvalidError](err); ok {
		switch {
		case ci.Reason == x509.Expired && ci.Cert != nil && now.After(ci.Cert.NotAfter):
			return serverTLS(fmt.Sprintf("the server's certificate (%s) expired at %s; renew it on that node", ci.Cert.Subject, formatTime(ci.Cert.NotAfter)))
		case ci.Reason == x509.Expired && ci.Cert != nil:
			return serverTLS(fmt.Sprintf("the server's certificate (%s) is not valid before %s; check that node's certificate and the clocks", ci.Cert.Subject, formatTime(ci.Cert.NotBefore)))
		}
		return serverTLS("the server's certificate cannot be used: " + ci.Error())
	}
	return serverTLS("the server's certificate cannot be used: " + err.Error())
}

// certNames lists the addresses a certificate is valid for.
func certNames(c *x509.Certificate) string {
	if c == nil {
		return "no certificate"
	}
	var names []string
	for _, ip := range c.IPAddresses {
		names = append(names, "IP:"+ip.String())
	}
	for _, d := range c.DNSNames {
		names = append(names, "DNS:"+d)
	}
	if len(names) == 0 {
		return "it names no address"
	}
	return "it names " + strings.Join(names, ", ")
}

// http2FrameSettings is the type of the frame an HTTP/2 server sends first
// (RFC 9113 §3.4); its 9-byte header starts with a 24-bit length, then the
// type.
const http2FrameSettings = 0x4

// classifyFirstBytes judges the first bytes a server sent. wantTLS: the
// client expected a TLS record there (the server then spoke something else
// to a TLS client); otherwise it expected HTTP/2 (a plaintext connection,
// or inside TLS). An HTTP/2 SETTINGS frame is a gRPC server's greeting:
// fine where HTTP/2 was expected, a --insecure node where TLS was.
// Anything else is no gRPC server: HTTP/1, TLS records to a plaintext
// client, or another protocol. b holds at least 5 bytes.
func classifyFirstBytes(addr string, b []byte, wantTLS bool, err error) *PermanentError {
	switch {
	case b[0] == 0 && b[3] == http2FrameSettings:
		if !wantTLS {
			return nil
		}
		return &PermanentError{Problem: ProblemServerIsPlaintext, Endpoint: addr, Setting: SettingEndpoints, Err: err}
	case !wantTLS && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 3:
		return &PermanentError{Problem: ProblemServerIsTLS, Endpoint: addr, Setting: SettingInsecure, Err: err}
	case strings.HasPrefix(string(b), "HTTP/"):
		return &PermanentError{Problem: ProblemNotGRPC, Endpoint: addr, Setting: SettingEndpoints, Detail: "it answers HTTP/1 without TLS", Err: err}
	}
	return &PermanentError{Problem: ProblemNotGRPC, Endpoint: addr, Setting: SettingEndpoints, Detail: fmt.Sprintf("it answered %q, not HTTP/2", b), Err: err}
}
