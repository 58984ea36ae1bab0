package node

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
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

// raftAdmits is the raft port's membership check: the peer's id is a
// server of raft's latest configuration (which includes a node being
// added as soon as the leader appends it), or of a newer committed one a
// member reported (see below); a node that has no configuration yet
// (fresh, before its first entry) admits any node certificate of the
// cluster CA, since it cannot know its members.
//
// A node's own configuration can lag the cluster's: it joined from a
// snapshot taken before today's leader was a member, or it was down while
// members changed. It learns newer configurations only through raft, from
// that very leader, so refusing it would leave the node behind for good.
// Its members' health answers carry their committed configuration; a newer
// one stands in until raft catches up (etcd's peers, too, accept members
// they do not know yet).
func (n *Node) raftAdmits(id string) bool {
	servers, ok := n.raftServers()
	if !ok {
		return false
	}
	if len(servers) == 0 {
		return true
	}
	for _, s := range servers {
		if string(s.ID) == id {
			return true
		}
	}
	h := n.healthRef.Load()
	if h == nil {
		return false
	}
	index, reported := h.NewestConfiguration()
	own, _ := n.configs.committed()
	return index > own && slices.Contains(reported, id)
}

// raftMemberAt names the server raft knows at a raft address, "" if none.
func (n *Node) raftMemberAt(addr string) string {
	servers, _ := n.raftServers()
	for _, s := range servers {
		if string(s.Address) == addr {
			return string(s.ID)
		}
	}
	return ""
}

func (n *Node) raftServers() ([]raft.Server, bool) {
	r := n.raftRef.Load()
	if r == nil {
		return nil, false // raft not started yet: admit no one
	}
	f := r.GetConfiguration()
	if f.Error() != nil {
		return nil, false
	}
	return f.Configuration().Servers, true
}

// grpcMemberAt names the member whose gRPC address is addr, "" if none.
func (n *Node) grpcMemberAt(addr string) string {
	for _, m := range n.fsm.State().Members() {
		if m.GrpcAddr == addr {
			return m.NodeId
		}
	}
	return ""
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
