package pki

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ReloaderConfig names a node's TLS files.
type ReloaderConfig struct {
	CertFile, KeyFile, CAFile string
	// Interval between checks of the files' identity (inode, size,
	// modification time); 0 checks only when Reload is called.
	Interval time.Duration
	// Check vets a new certificate after its chain verified against the new
	// CA bundle (e.g. that it still names this node); nil accepts any.
	Check  func(leaf *x509.Certificate) error
	Logger *slog.Logger
}

// Reloader holds the current certificate, key and CA bundle of one process
// and hands them to every new TLS handshake, on both sides. Safe for
// concurrent use; the TLS configs it returns stay valid across reloads.
type Reloader struct {
	cfg ReloaderConfig
	log *slog.Logger
	cur atomic.Pointer[material]

	reloads, failures atomic.Uint64

	mu      sync.Mutex // serializes loads; guards lastSig
	lastSig string     // file identity at the last attempt, good or bad
}

// material is one consistent set: a pair whose chain verifies against pool.
type material struct {
	cert tls.Certificate // Leaf set
	pool *x509.CertPool
}

// NewReloader reads the files once; it fails if they do not make a valid
// set, so a process never starts on material it would refuse on reload.
func NewReloader(cfg ReloaderConfig) (*Reloader, error) {
	r := &Reloader{cfg: cfg, log: cfg.Logger}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sig := r.signature()
	m, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cur.Store(m)
	r.lastSig = sig
	return r, nil
}

// Run polls the files every Interval until ctx ends and reloads them when
// they changed. It returns at once when Interval is 0.
func (r *Reloader) Run(ctx context.Context) {
	if r.cfg.Interval <= 0 {
		return
	}
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.poll()
		}
	}
}

// poll reloads the files if they changed since the last attempt.
func (r *Reloader) poll() {
	r.mu.Lock()
	changed := r.signature() != r.lastSig
	r.mu.Unlock()
	if changed {
		r.reload(false)
	}
}

// Reload re-reads the files now (SIGHUP). On failure the previous set stays
// in use and the error says why.
func (r *Reloader) Reload() error { return r.reload(true) }

// reload loads the files and swaps them in. A failure logs one WARN line
// per distinct state of the files (forced reloads always log), so a
// half-replaced pair left in place is reported once, not every poll.
func (r *Reloader) reload(forced bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sig := r.signature()
	m, err := r.load()
	if err != nil {
		r.failures.Add(1)
		if forced || sig != r.lastSig {
			prev := r.cur.Load().cert.Leaf
			r.log.Warn("TLS files not reloaded; keeping the previous certificate", "reason", err.Error(),
				"cert_file", r.cfg.CertFile, "key_file", r.cfg.KeyFile, "ca_file", r.cfg.CAFile, "serial", prev.SerialNumber.Text(16))
		}
		r.lastSig = sig
		return err
	}
	r.lastSig = sig
	r.cur.Store(m)
	r.reloads.Add(1)
	r.log.Info("TLS files reloaded", "serial", m.cert.Leaf.SerialNumber.Text(16), "subject", m.cert.Leaf.Subject.String(), "not_after", m.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return nil
}

// load reads and checks one set: the pair matches, and the certificate
// chains to the bundle and is valid now.
func (r *Reloader) load() (*material, error) {
	cert, err := tls.LoadX509KeyPair(r.cfg.CertFile, r.cfg.KeyFile)
	if err != nil {
		if strings.Contains(err.Error(), "does not match") {
			return nil, fmt.Errorf("certificate %s and key %s do not belong together (half-replaced pair?): %w", r.cfg.CertFile, r.cfg.KeyFile, err)
		}
		return nil, fmt.Errorf("certificate %s / key %s: %w", r.cfg.CertFile, r.cfg.KeyFile, err)
	}
	cas, err := ReadCerts(r.cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w", err)
	}
	pool := x509.NewCertPool()
	for _, c := range cas {
		pool.AddCert(c)
	}
	inter := x509.NewCertPool()
	for _, der := range cert.Certificate[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("certificate %s: intermediate: %w", r.cfg.CertFile, err)
		}
		inter.AddCert(c)
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("certificate %s does not verify against CA bundle %s: %w", r.cfg.CertFile, r.cfg.CAFile, err)
	}
	if r.cfg.Check != nil {
		if err := r.cfg.Check(cert.Leaf); err != nil {
			return nil, fmt.Errorf("certificate %s: %w", r.cfg.CertFile, err)
		}
	}
	return &material{cert: cert, pool: pool}, nil
}

// signature identifies the files' current versions: inode, size and
// modification time of each (a rename-based replacement always changes the
// inode).
func (r *Reloader) signature() string {
	var b strings.Builder
	for _, f := range []string{r.cfg.CertFile, r.cfg.KeyFile, r.cfg.CAFile} {
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", f)
			continue
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = uint64(st.Ino)
		}
		fmt.Fprintf(&b, "%d:%d:%d;", ino, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// Leaf is the certificate new handshakes present.
func (r *Reloader) Leaf() *x509.Certificate { return r.cur.Load().cert.Leaf }

// Pool is the CA bundle new handshakes verify peers against.
func (r *Reloader) Pool() *x509.CertPool { return r.cur.Load().pool }

// Stats counts reloads that took effect and attempts that kept the
// previous set.
func (r *Reloader) Stats() (reloads, failures uint64) {
	return r.reloads.Load(), r.failures.Load()
}

// ServerConfig is a TLS 1.3 server config that picks up the current
// material on every handshake. Session tickets are off, so every
// connection proves its certificate against the CA bundle of its own
// handshake; connections are long-lived, the cost is one full handshake
// each.
func (r *Reloader) ServerConfig(auth tls.ClientAuthType, nextProtos ...string) *tls.Config {
	current := func() *tls.Config {
		m := r.cur.Load()
		return &tls.Config{
			MinVersion:             tls.VersionTLS13,
			Certificates:           []tls.Certificate{m.cert},
			ClientAuth:             auth,
			ClientCAs:              m.pool,
			NextProtos:             nextProtos,
			SessionTicketsDisabled: true,
		}
	}
	return &tls.Config{
		MinVersion:             tls.VersionTLS13,
		NextProtos:             nextProtos,
		ClientAuth:             auth,
		SessionTicketsDisabled: true,
		GetConfigForClient:     func(*tls.ClientHelloInfo) (*tls.Config, error) { return current(), nil },
		// Unused while GetConfigForClient answers; net/http's ServeTLS looks
		// for a certificate source on the outer config.
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { c := r.cur.Load().cert; return &c, nil },
	}
}

// ClientConfig is a TLS 1.3 client config for one dial to serverName (an
// IP or DNS name the server's certificate must carry): it presents the
// current certificate and verifies the server against the current CA
// bundle. Build one per dial; a config kept longer keeps its bundle.
func (r *Reloader) ClientConfig(serverName string, nextProtos ...string) *tls.Config {
	m := r.cur.Load()
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		ServerName:   serverName,
		NextProtos:   nextProtos,
		RootCAs:      m.pool,
		Certificates: []tls.Certificate{m.cert},
	}
}
