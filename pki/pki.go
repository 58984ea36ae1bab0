package pki

import (
	"cmp"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
)

// RoleNode is the organization (O) of a node certificate: peer traffic.
const RoleNode = "node"

// ClientRoles are the roles a client certificate may carry, lowest first
// (docs/design.md#trust-and-integrity). What each may do is the authorization table's business, not
// this package's; the list is here so certificates are checked when made.
var ClientRoles = []string{"reporter", "reader", "operator", "admin"}

// Default validities.
const (
	DefaultCAValidity   = 10 * 365 * 24 * time.Hour
	DefaultLeafValidity = 365 * 24 * time.Hour
	// clockSkew back-dates NotBefore so a peer whose clock is a little
	// behind accepts a certificate made a moment ago.
	clockSkew = 5 * time.Minute
	maxName   = 64
)

// Errors of certificate making. Each is wrapped with the offending value.
var (
	ErrBadName     = errors.New("pki: bad name")
	ErrBadRole     = errors.New("pki: bad role")
	ErrNoSAN       = errors.New("pki: a node certificate needs at least one IP or DNS name")
	ErrFileExists  = errors.New("pki: file exists")
	ErrNoCertInPEM = errors.New("pki: no CERTIFICATE block")
)

// CA is a cluster's certificate authority: its certificate and signing key.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Pair is a certificate and its private key, parsed and as PEM.
type Pair struct {
	Cert    *x509.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

// NewCA makes a self-signed CA named "hotsplit CA <name>"; validity 0 (or
// negative) takes DefaultCAValidity.
func NewCA(name string, validity time.Duration) (*CA, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	tmpl, err := template(pkix.Name{CommonName: "hotsplit CA " + name}, cmp.Or(max(validity, 0), DefaultCAValidity))
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLenZero = true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse CA: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads a CA certificate and its key (PEM; any key format openssl
// writes).
func LoadCA(certFile, keyFile string) (*CA, error) {
	certs, err := ReadCerts(certFile)
	if err != nil {
		return nil, err
	}
	kb, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key: %w", err)
	}
	key, err := ParseKey(kb)
	if err != nil {
		return nil, fmt.Errorf("pki: CA key %s: %w", keyFile, err)
	}
	ca := &CA{Cert: certs[0], Key: key}
	if !ca.Cert.IsCA {
		return nil, fmt.Errorf("pki: %s is not a CA certificate (basicConstraints CA:FALSE)", certFile)
	}
	if !publicKeysEqual(ca.Cert.PublicKey, key.Public()) {
		return nil, fmt.Errorf("pki: CA key %s does not match certificate %s", keyFile, certFile)
	}
	return ca, nil
}

// CertPEM is the CA certificate as PEM (what --tlsCA and --cacert read).
func (ca *CA) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// Pool is a pool holding only this CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Write stores the CA certificate (0644) and key (0600). Without replace it
// refuses to overwrite either file.
func (ca *CA) Write(certFile, keyFile string, replace bool) error {
	kp, err := keyPEM(ca.Key)
	if err != nil {
		return err
	}
	return writePair(certFile, ca.CertPEM(), keyFile, kp, replace)
}

// NodeOptions are the addresses a node certificate is valid for.
type NodeOptions struct {
	IPs      []net.IP
	DNSNames []string
	Validity time.Duration // 0 or negative: DefaultLeafValidity
}

// NewNode makes a node certificate: CN = id, O = node, serverAuth and
// clientAuth, valid for the given IPs and DNS names (Go checks these, not
// the CN, against the address dialled).
func (ca *CA) NewNode(id string, o NodeOptions) (*Pair, error) {
	if err := checkName(id); err != nil {
		return nil, err
	}
	if len(o.IPs) == 0 && len(o.DNSNames) == 0 {
		return nil, ErrNoSAN
	}
	tmpl, err := template(pkix.Name{CommonName: id, Organization: []string{RoleNode}}, cmp.Or(max(o.Validity, 0), DefaultLeafValidity))
	if err != nil {
		return nil, err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.IPAddresses = o.IPs
	tmpl.DNSNames = o.DNSNames
	return ca.sign(tmpl)
}

// NewClient makes a client certificate: CN = name, one O per role,
// clientAuth only. Roles must be among ClientRoles; node is refused (node
// certificates come from NewNode). Validity 0 (or negative) takes
// DefaultLeafValidity.
func (ca *CA) NewClient(name string, roles []string, validity time.Duration) (*Pair, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := CheckClientRoles(roles); err != nil {
		return nil, err
	}
	tmpl, err := template(pkix.Name{CommonName: name, Organization: slices.Clone(roles)}, cmp.Or(max(validity, 0), DefaultLeafValidity))
	if err != nil {
		return nil, err
	}
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.sign(tmpl)
}

// CheckClientRoles refuses an empty role list, node, and names outside
// ClientRoles.
func CheckClientRoles(roles []string) error {
	if len(roles) == 0 {
		return fmt.Errorf("%w: at least one role is needed (one of %s)", ErrBadRole, strings.Join(ClientRoles, ", "))
	}
	for _, r := range roles {
		switch {
		case r == RoleNode:
			return fmt.Errorf("%w: %q is for node certificates only (make one with create-node)", ErrBadRole, r)
		case !slices.Contains(ClientRoles, r):
			return fmt.Errorf("%w: %q is not one of %s", ErrBadRole, r, strings.Join(ClientRoles, ", "))
		}
	}
	return nil
}

func (ca *CA) sign(tmpl *x509.Certificate) (*Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: key: %w", err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: sign %s: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: parse %s: %w", tmpl.Subject.CommonName, err)
	}
	kp, err := keyPEM(key)
	if err != nil {
		return nil, err
	}
	return &Pair{Cert: cert, CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), KeyPEM: kp}, nil
}

// TLSCertificate is the pair as crypto/tls wants it.
func (p *Pair) TLSCertificate() (tls.Certificate, error) {
	return tls.X509KeyPair(p.CertPEM, p.KeyPEM)
}

// ClientTLS is a TLS 1.3 client config presenting the pair and trusting
// roots (e.g. CA.Pool()).
func (p *Pair) ClientTLS(roots *x509.CertPool) (*tls.Config, error) {
	cert, err := p.TLSCertificate()
	if err != nil {
		return nil, err
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: roots, Certificates: []tls.Certificate{cert}}, nil
}

// Write stores the certificate (0644) and key (0600). Without replace it
// refuses to overwrite either file; with replace each file is swapped in by
// rename, so a reader sees the old or the new file, never half of one.
func (p *Pair) Write(certFile, keyFile string, replace bool) error {
	return writePair(certFile, p.CertPEM, keyFile, p.KeyPEM, replace)
}

// Identity is what a certificate says about its holder: CN and the O values.
type Identity struct {
	Name  string
	Roles []string
}

// IdentityOf reads a certificate's identity. It does not verify anything:
// call it on a chain the TLS stack verified.
func IdentityOf(c *x509.Certificate) Identity {
	return Identity{Name: c.Subject.CommonName, Roles: slices.Clone(c.Subject.Organization)}
}

// IsNode reports whether c is a node certificate: O = node and both the
// serverAuth and clientAuth key usages.
func IsNode(c *x509.Certificate) bool {
	return slices.Contains(c.Subject.Organization, RoleNode) &&
		slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageServerAuth) &&
		slices.Contains(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
}

// ReadCerts reads every CERTIFICATE block of a PEM file.
func ReadCerts(file string) ([]*x509.Certificate, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	certs, err := ParseCerts(b)
	if err != nil {
		return nil, fmt.Errorf("pki: %s: %w", file, err)
	}
	return certs, nil
}

// ParseCerts parses every CERTIFICATE block of PEM data; other blocks are
// skipped. It fails when there is none.
func ParseCerts(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d: %w", len(out)+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, ErrNoCertInPEM
	}
	return out, nil
}

// ParseKey reads a PEM private key in PKCS#8, PKCS#1 (RSA) or SEC 1 (EC).
func ParseKey(b []byte) (crypto.Signer, error) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return nil, errors.New("no PRIVATE KEY block")
		}
		var k any
		var err error
		switch blk.Type {
		case "PRIVATE KEY":
			k, err = x509.ParsePKCS8PrivateKey(blk.Bytes)
		case "RSA PRIVATE KEY":
			k, err = x509.ParsePKCS1PrivateKey(blk.Bytes)
		case "EC PRIVATE KEY":
			k, err = x509.ParseECPrivateKey(blk.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, err
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("key of type %T cannot sign", k)
		}
		return s, nil
	}
}

func keyPEM(k crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, fmt.Errorf("pki: encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	eq, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && eq.Equal(b)
}

func template(subject pkix.Name, validity time.Duration) (*x509.Certificate, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: serial: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(1)), // never 0
		Subject:      subject,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(validity),
	}, nil
}

// checkName admits 1..64 printable characters without spaces or commas
// (names go into log lines and the token file's space-separated columns).
func checkName(s string) error {
	if s == "" || len(s) > maxName {
		return fmt.Errorf("%w: %q: want 1..%d characters", ErrBadName, s, maxName)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || unicode.IsSpace(r) || r == ',' {
			return fmt.Errorf("%w: %q: only printable characters, no spaces or commas", ErrBadName, s)
		}
	}
	return nil
}

func writePair(certFile string, certPEM []byte, keyFile string, keyPEM []byte, replace bool) error {
	if !replace {
		for _, f := range []string{certFile, keyFile} {
			if _, err := os.Lstat(f); err == nil {
				return fmt.Errorf("%w: %s (remove it or write elsewhere)", ErrFileExists, f)
			}
		}
	}
	// The key first: a reader that sees the new certificate then finds the
	// new key too, unless it read between the two renames (a Reloader
	// keeps its previous pair then and tries again on the next change).
	if err := writeFile(keyFile, keyPEM, 0o600, replace); err != nil {
		return err
	}
	return writeFile(certFile, certPEM, 0o644, replace)
}

func writeFile(path string, data []byte, mode os.FileMode, replace bool) error {
	if !replace {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return fmt.Errorf("pki: %w", err)
		}
		_, err = f.Write(data)
		return errors.Join(wrapErr(err), wrapErr(f.Close()))
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("pki: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pki: %w", err)
	}
	return wrapErr(os.Rename(tmp.Name(), path))
}

func wrapErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("pki: %w", err)
}
