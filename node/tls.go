package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hotsplit/hotsplit/node/raftnet"
	"github.com/hotsplit/hotsplit/pki"
)

// TLSFiles names a node's certificate (CN = node id, O = node), its key and
// the cluster's CA bundle, all PEM. The files are re-read when they change
// and on ReloadTLS; new connections use the new set, existing ones keep
// theirs.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
	// ReloadInterval is how often the files are checked for changes
	// (default DefaultTLSReloadInterval; negative: only on ReloadTLS).
	ReloadInterval time.Duration
}

// DefaultTLSReloadInterval is how often a node checks its TLS files.
const DefaultTLSReloadInterval = 5 * time.Second

// startTLS loads the node's TLS files; the certificate must be a node
// certificate naming this node, on start and on every reload.
func (n *Node) startTLS() error {
	f := n.cfg.TLS
	interval := f.ReloadInterval
	switch {
	case interval == 0:
		interval = DefaultTLSReloadInterval
	case interval < 0:
		interval = 0
	}
	r, err := pki.NewReloader(pki.ReloaderConfig{
		CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: f.CAFile, Interval: interval, Logger: n.log,
		Check: func(leaf *x509.Certificate) error { return checkOwnCert(leaf, n.cfg.ID) },
	})
	if err != nil {
		return fmt.Errorf("tls: %w", err)
	}
	n.tls = r
	reg := n.cfg.Registry
	for _, res := range []string{"ok", "kept_previous"} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hotsplit_tls_reloads_total", Help: "Reloads of the TLS files: ok (new connections use them) or kept_previous (the files did not make a valid set; see the WARN line).",
			ConstLabels: prometheus.Labels{"result": res},
		}, func() float64 {
			ok, failed := r.Stats()
			if res == "ok" {
				return float64(ok)
			}
			return float64(failed)
		}))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hotsplit_tls_cert_not_after_seconds", Help: "Expiry of the node certificate new connections present, in Unix seconds.",
	}, func() float64 { return float64(r.Leaf().NotAfter.Unix()) }))
	return nil
}

func checkOwnCert(leaf *x509.Certificate, id string) error {
	if !pki.IsNode(leaf) {
		return fmt.Errorf("CN=%q O=%v is not a node certificate (want O=node and the serverAuth and clientAuth key usages: hotsplitctl certs create-node %s)", leaf.Subject.CommonName, leaf.Subject.Organization, id)
	}
	if leaf.Subject.CommonName != id {
		return fmt.Errorf("names node %q, this node is %q (peers check the CN against the member they expect)", leaf.Subject.CommonName, id)
	}
	return nil
}

// ReloadTLS re-reads the TLS files now (SIGHUP). On failure the previous
// set stays in use. Without TLS it does nothing.
func (n *Node) ReloadTLS() error {
	if n.tls == nil {
		return nil
	}
	return n.tls.Reload()
}

// TLSCertificate is the certificate new connections get, nil without TLS.
func (n *Node) TLSCertificate() *x509.Certificate {
	if n.tls == nil {
		return nil
	}
	return n.tls.Leaf()
}

// joinTLS is the client TLS config of the join loop: this node's current
// certificate, and a server that must hold a node certificate of the
// cluster CA (the addresses come from --join, so no member id is known for
// them). The client package sets the server name per endpoint.
func (n *Node) joinTLS() *tls.Config {
	cfg := n.tls.ClientConfig("")
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		return raftnet.CheckPeerNode(cs.PeerCertificates[0], "", nil)
	}
	return cfg
}
