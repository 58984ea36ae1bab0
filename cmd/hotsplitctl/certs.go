package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hotsplit/hotsplit/pki"
)

// tokenBytes is the randomness of a bearer token (docs/design.md#tls-and-identities: 32 bytes).
const tokenBytes = 32

// certFlags are the flags every certs subcommand shares.
type certFlags struct {
	dir, caCert, caKey string
	days               int
}

func (f *certFlags) register(cmd *cobra.Command, signs bool) {
	cmd.Flags().StringVar(&f.dir, "dir", "certs", "directory the files are written to")
	cmd.Flags().IntVar(&f.days, "days", 0, "validity in days (default: 3650 for a CA, 365 otherwise)")
	if signs {
		cmd.Flags().StringVar(&f.caCert, "ca-cert", "", "the CA certificate to sign with (default DIR/ca.crt)")
		cmd.Flags().StringVar(&f.caKey, "ca-key", "", "the CA key to sign with (default DIR/ca.key)")
	}
}

func (f *certFlags) validity(cmd *cobra.Command) (time.Duration, error) {
	if f.days < 0 || f.days > 100*365 {
		return 0, usageErrorf(cmd, "--days %d: want 1..36500 (0: the default)", f.days)
	}
	return time.Duration(f.days) * 24 * time.Hour, nil
}

func (f *certFlags) loadCA() (*pki.CA, error) {
	crt, key := f.caCert, f.caKey
	if crt == "" {
		crt = filepath.Join(f.dir, "ca.crt")
	}
	if key == "" {
		key = filepath.Join(f.dir, "ca.key")
	}
	return pki.LoadCA(crt, key)
}

func (a *app) certsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Make the cluster's CA, node and client certificates, and bearer tokens",
		Long: `Make the PEM files a secure cluster runs on: one CA per cluster (a certificate
is bound to its cluster by the CA that signed it), a certificate per node
(CN = node id, O = node, the node's IPs and DNS names), a certificate per
client (CN = name, one O per role) and bearer tokens for clients that cannot
hold a certificate. Keys are written mode 0600; existing files are never
overwritten. No cluster is contacted. See docs/security.md for the openssl
equivalents and for rotation.`,
		Example: `  hotsplitctl certs create-ca --dir certs
  hotsplitctl certs create-node n1 --ip 10.0.0.1 --dns hs1.example --dir certs
  hotsplitctl certs create-client alice --role operator --dir certs
  hotsplitctl certs create-token dashboard --role reader`,
		Args: groupArgs,
		RunE: groupRun,
	}
	cmd.AddCommand(a.createCACmd(), a.createNodeCmd(), a.createClientCmd(), a.createTokenCmd())
	return cmd
}

func (a *app) createCACmd() *cobra.Command {
	var f certFlags
	var name string
	cmd := &cobra.Command{
		Use:   "create-ca",
		Short: "Make a new cluster CA: DIR/ca.crt and DIR/ca.key",
		Long: `Make a new CA for one cluster. ca.crt goes to every node (--tlsCA) and every
client (--cacert); keep ca.key offline: whoever holds it can mint any node or
admin identity of the cluster.`,
		Example: `  hotsplitctl certs create-ca --dir certs --name prod-eu1`,
		Args:    exactArgs(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v, err := f.validity(cmd)
			if err != nil {
				return err
			}
			ca, err := pki.NewCA(name, v)
			if err != nil {
				return usageErr(cmd, err)
			}
			crt, key := filepath.Join(f.dir, "ca.crt"), filepath.Join(f.dir, "ca.key")
			if err := mkdir(f.dir); err != nil {
				return err
			}
			if err := ca.Write(crt, key, false); err != nil {
				return err
			}
			fmt.Fprintf(a.out, "wrote %s (give to every node and client) and %s (keep it safe)\n", crt, key)
			return nil
		},
	}
	f.register(cmd, false)
	cmd.Flags().StringVar(&name, "name", "hotsplit", "name of the cluster, in the CA's subject")
	return cmd
}

func (a *app) createNodeCmd() *cobra.Command {
	var f certFlags
	var ips, dns []string
	cmd := &cobra.Command{
		Use:   "create-node ID",
		Short: "Make a node certificate: DIR/node-ID.crt and DIR/node-ID.key",
		Long: `Make the certificate of node ID (CN = ID, O = node, serverAuth and clientAuth),
signed by the cluster CA. Give every IP and DNS name the node's --raftAddr and
--grpcAddr (and --httpAddr) are reached at: peers and clients check these
names, not the CN.`,
		Example: `  hotsplitctl certs create-node n1 --ip 127.0.0.1
  hotsplitctl certs create-node n2 --ip 10.0.0.2 --dns hs2.example`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := f.validity(cmd)
			if err != nil {
				return err
			}
			var addrs []net.IP
			for _, s := range ips {
				ip := net.ParseIP(strings.TrimSpace(s))
				if ip == nil {
					return usageErrorf(cmd, "--ip %q is not an IP address", s)
				}
				addrs = append(addrs, ip)
			}
			if len(addrs) == 0 && len(dns) == 0 {
				return usageErrorf(cmd, "give at least one --ip or --dns: the addresses peers and clients reach node %s at", args[0])
			}
			ca, err := f.loadCA()
			if err != nil {
				return usageErr(cmd, err)
			}
			p, err := ca.NewNode(args[0], pki.NodeOptions{IPs: addrs, DNSNames: dns, Validity: v})
			if err != nil {
				return usageErr(cmd, err)
			}
			return a.writePair(f.dir, "node-"+args[0], p)
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringSliceVar(&ips, "ip", nil, "IP address the node is reached at (repeat or comma-separate)")
	cmd.Flags().StringSliceVar(&dns, "dns", nil, "DNS name the node is reached at (repeat or comma-separate)")
	return cmd
}

func (a *app) createClientCmd() *cobra.Command {
	var f certFlags
	var roles []string
	cmd := &cobra.Command{
		Use:   "create-client NAME",
		Short: "Make a client certificate: DIR/client-NAME.crt and DIR/client-NAME.key",
		Long: `Make the certificate of client NAME (CN = NAME, one O per --role, clientAuth),
signed by the cluster CA. Roles: ` + strings.Join(pki.ClientRoles, ", ") + ` (node identities come from
create-node only). Mutations are recorded under NAME.`,
		Example: `  hotsplitctl certs create-client alice --role operator
  hotsplitctl certs create-client dn7 --role reporter`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := f.validity(cmd)
			if err != nil {
				return err
			}
			if err := pki.CheckClientRoles(roles); err != nil {
				return usageErr(cmd, err)
			}
			ca, err := f.loadCA()
			if err != nil {
				return usageErr(cmd, err)
			}
			p, err := ca.NewClient(args[0], roles, v)
			if err != nil {
				return usageErr(cmd, err)
			}
			return a.writePair(f.dir, "client-"+args[0], p)
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringSliceVar(&roles, "role", nil, "role of the client (repeat for several): "+strings.Join(pki.ClientRoles, ", "))
	return cmd
}

func (a *app) createTokenCmd() *cobra.Command {
	var role string
	cmd := &cobra.Command{
		Use:   "create-token NAME",
		Short: "Make a bearer token for NAME and the line of the server's token file",
		Long: fmt.Sprintf(`Make a bearer token of %d random bytes for a client that cannot hold a
certificate. Printed on stdout: first the token itself (shown once: give it to
the client as --token or $HOTSPLIT_TOKEN), then the line "NAME ROLE SHA256"
to add to every node's token file; the SHA-256 is of the token text as sent.`, tokenBytes),
		Example: `  hotsplitctl certs create-token dashboard --role reader`,
		Args:    exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := pki.CheckClientRoles([]string{role}); err != nil {
				return usageErr(cmd, err)
			}
			name := args[0]
			if name == "" || strings.ContainsFunc(name, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
				return usageErrorf(cmd, "NAME %q: want printable ASCII without spaces", name)
			}
			b := make([]byte, tokenBytes)
			if _, err := rand.Read(b); err != nil {
				return fmt.Errorf("random token: %w", err)
			}
			token := base64.RawURLEncoding.EncodeToString(b)
			sum := sha256.Sum256([]byte(token))
			fmt.Fprintln(a.out, token)
			fmt.Fprintf(a.out, "%s %s %s\n", name, role, hex.EncodeToString(sum[:]))
			fmt.Fprintln(a.errOut, "line 1: the token (shown once); line 2: add it to every node's token file")
			return nil
		},
	}
	cmd.Flags().StringVar(&role, "role", "", "role of the token: "+strings.Join(pki.ClientRoles, ", "))
	return cmd
}

func (a *app) writePair(dir, base string, p *pki.Pair) error {
	if err := mkdir(dir); err != nil {
		return err
	}
	crt, key := filepath.Join(dir, base+".crt"), filepath.Join(dir, base+".key")
	if err := p.Write(crt, key, false); err != nil {
		return err
	}
	id := pki.IdentityOf(p.Cert)
	fmt.Fprintf(a.out, "wrote %s and %s: CN=%s O=%s, serial %s, valid until %s\n", crt, key, id.Name, strings.Join(id.Roles, ","),
		p.Cert.SerialNumber.Text(16), p.Cert.NotAfter.UTC().Format(time.DateOnly))
	if sans := slices.Concat(ipStrings(p.Cert.IPAddresses), p.Cert.DNSNames); len(sans) > 0 {
		fmt.Fprintf(a.out, "  valid for %s\n", strings.Join(sans, ", "))
	}
	return nil
}

func ipStrings(ips []net.IP) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

func mkdir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("certificate directory: %w", err)
	}
	return nil
}
