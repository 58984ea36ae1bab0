package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hotsplit/hotsplit/node"
	"github.com/hotsplit/hotsplit/pki"
)

const devNodes = 3

// devLogPath is the nodes' log file of --dev: flag, or one in the temporary
// directory that outlives the demo (the default data dir does not). The
// flag's help prints the default from here.
func devLogPath(flag string) string {
	if flag != "" {
		return flag
	}
	return filepath.Join(os.TempDir(), "hotsplit-dev.log")
}

// runDev starts a three-node cluster on loopback in this process, with TLS
// from an ephemeral CA, prints how to reach it, and runs until ctx ends.
func runDev(ctx context.Context, o *options, hup <-chan os.Signal, out io.Writer) error {
	dir := o.devDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "hotsplit-dev-")
		if err != nil {
			return fmt.Errorf("dev data dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	// Before the nodes' log file takes over the logger: this refusal is
	// for the terminal.
	restart, err := devRestart(dir, o.devPorts)
	if err != nil {
		return err
	}
	demoDefaults(o)
	certs, err := devPKI(filepath.Join(dir, "certs"))
	if err != nil {
		return err
	}
	// The nodes log to a file; the terminal keeps the demo's narrative.
	logPath := devLogPath(o.devLog)
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("dev log: %w", err)
	}
	defer logFile.Close()
	o.node.Logger = node.NewLogger(logFile, o.logLevel, o.logJSON)
	listeners, err := devListeners(o.devPorts)
	if err != nil {
		return err
	}
	var nodes []*node.Node
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := len(nodes) - 1; i >= 0; i-- {
			nodes[i].Close(cctx)
		}
	}()
	for i := range devNodes {
		cfg := o.node // flags such as --autoSplit* apply to the demo too
		cfg.ID = fmt.Sprintf("n%d", i+1)
		cfg.DataDir = filepath.Join(dir, cfg.ID)
		cfg.RaftAddr, cfg.GRPCAddr, cfg.HTTPAddr = "", "", ""
		cfg.RaftListener, cfg.GRPCListener, cfg.HTTPListener = listeners[3*i], listeners[3*i+1], listeners[3*i+2]
		cfg.TLS = &node.TLSFiles{CertFile: certs.file("node-" + cfg.ID + ".crt"), KeyFile: certs.file("node-" + cfg.ID + ".key"), CAFile: certs.file("ca.crt"), ReloadInterval: o.tls.ReloadInterval}
		devTiming(&cfg)
		if i == 0 {
			cfg.Bootstrap, cfg.Join = true, nil
		} else {
			cfg.Bootstrap, cfg.Join = false, []string{nodes[0].GRPCAddr()}
			// A restarted node is a member already; the leader needs it
			// back before it can admit anyone.
			if !restart {
				if err := admitDev(ctx, nodes[0], cfg.ID, listeners[3*i].Addr().String()); err != nil {
					return err
				}
			}
		}
		n, err := node.Start(cfg)
		if err != nil {
			return fmt.Errorf("start %s: %w", cfg.ID, err)
		}
		nodes = append(nodes, n)
	}
	var endpoints, https []string
	for _, n := range nodes {
		endpoints = append(endpoints, n.GRPCAddr())
		https = append(https, n.HTTPAddr())
	}
	ep := strings.Join(endpoints, ",")
	admin := []string{certs.file("client-admin.crt"), certs.file("client-admin.key")}
	fmt.Fprintf(out, "hotsplitctl endpoints: %s\n", ep)
	fmt.Fprintf(out, "metrics: curl --cacert %s --cert %s --key %s https://%s/metrics (and the other nodes at %s)\n", certs.file("ca.crt"), admin[0], admin[1], https[0], strings.Join(https[1:], ", "))
	fmt.Fprintf(out, "look closer (TLS with the demo's throwaway CA; you are its admin):\n  export HOTSPLIT_ENDPOINTS=%s HOTSPLIT_CACERT=%s HOTSPLIT_CERT=%s HOTSPLIT_KEY=%s\n", ep, certs.file("ca.crt"), admin[0], admin[1])
	fmt.Fprintf(out, "  go run ./cmd/hotsplitctl routes list\n  go run ./cmd/hotsplitctl autosplit status\n  go run ./cmd/hotsplitctl autosplit explain ROUTE_ID\n  go run ./cmd/hotsplitctl routes watch\n")
	if err := printPageLogin(ctx, nodes[0], certs, out); err != nil {
		return err
	}
	fmt.Fprintf(out, "data and certificates: %s   node logs: %s   (Ctrl-C stops the demo)\n", dir, logPath)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go printEvents(loadCtx, nodes[0], out)
	if o.devWorkload != "none" {
		go runDemoLoad(loadCtx, endpoints, certs, o, o.node.Logger, out)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-hup:
			for _, n := range nodes {
				reloadTLS(o.node.Logger, n)
			}
		}
	}
}

// devRestart reports whether dir holds the demo cluster of an earlier run.
// It restarts only at the ports it had (--devPorts): raft knows its
// members by address.
func devRestart(dir string, ports int) (bool, error) {
	if _, err := os.Stat(filepath.Join(dir, "n1")); err != nil {
		return false, nil
	}
	if ports == 0 {
		return false, fmt.Errorf("--devDir %s holds the demo cluster of an earlier run: restart it with the --devPorts it had, or remove %s to start a new one (the CA in %s is kept)",
			dir, strings.Join([]string{filepath.Join(dir, "n1"), "n2", "n3"}, ", "), filepath.Join(dir, "certs"))
	}
	return true, nil
}

// admitDev admits a demo node before it starts, as an admin would with
// `hotsplitctl cluster add`: a node joins with its own certificate only
// once admitted (cluster version 2).
func admitDev(ctx context.Context, leader *node.Node, id, raftAddr string) error {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for !leader.Scheduler().IsReady() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("admit %s: %s did not become a ready leader: %w", id, leader.ID(), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if err := leader.Scheduler().Admit(ctx, id, raftAddr, "dev"); err != nil {
		return fmt.Errorf("admit %s: %w", id, err)
	}
	return nil
}

// devCerts is the demo's certificate directory.
type devCerts string

func (d devCerts) file(name string) string { return filepath.Join(string(d), name) }

// devPKI makes the demo's throwaway CA and, signed by it, a certificate
// per node (127.0.0.1 and localhost), an admin client certificate for the
// operator at the terminal and a reporter+reader one for the simulated data
// plane. A --devDir kept from an earlier run keeps its CA (a browser that
// trusted it once keeps trusting the page) and gets fresh certificates.
func devPKI(dir string) (devCerts, error) {
	d := devCerts(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return d, fmt.Errorf("dev certificates: %w", err)
	}
	ca, err := devCA(d)
	if err != nil {
		return d, err
	}
	for i := range devNodes {
		id := fmt.Sprintf("n%d", i+1)
		p, err := ca.NewNode(id, pki.NodeOptions{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}})
		if err != nil {
			return d, err
		}
		if err := p.Write(d.file("node-"+id+".crt"), d.file("node-"+id+".key"), true); err != nil {
			return d, err
		}
	}
	for name, roles := range map[string][]string{"admin": {"admin"}, demoClient: {"reporter", "reader"}} {
		p, err := ca.NewClient(name, roles, 0)
		if err != nil {
			return d, err
		}
		if err := p.Write(d.file("client-"+name+".crt"), d.file("client-"+name+".key"), true); err != nil {
			return d, err
		}
	}
	return d, nil
}

// devCA loads the CA an earlier run left in d, unless it is missing or
// expires within a day: then it makes and writes a new one.
func devCA(d devCerts) (*pki.CA, error) {
	_, errCert := os.Stat(d.file("ca.crt"))
	_, errKey := os.Stat(d.file("ca.key"))
	if errCert == nil && errKey == nil {
		ca, err := pki.LoadCA(d.file("ca.crt"), d.file("ca.key"))
		if err != nil {
			return nil, fmt.Errorf("dev CA in %s (remove ca.crt and ca.key for a new one): %w", string(d), err)
		}
		if cs, err := pki.ParseCerts(ca.CertPEM()); err == nil && len(cs) > 0 && time.Until(cs[0].NotAfter) > 24*time.Hour {
			return ca, nil
		}
	}
	ca, err := pki.NewCA("hotsplit-dev", 0)
	if err != nil {
		return nil, err
	}
	if err := ca.Write(d.file("ca.crt"), d.file("ca.key"), true); err != nil {
		return nil, err
	}
	return ca, nil
}

// demoClient is the identity of the demo's simulated data plane.
const demoClient = "demo-sim"

// devTiming makes the demo react quickly on loopback unless flags say
// otherwise.
func devTiming(c *node.Config) {
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = 300 * time.Millisecond
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 300 * time.Millisecond
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = 150 * time.Millisecond
	}
}

// devListeners opens the nine demo listeners on 127.0.0.1: consecutive
// ports from base, or free ports when base is 0.
func devListeners(base int) ([]net.Listener, error) {
	var lns []net.Listener
	for i := range 3 * devNodes {
		addr := "127.0.0.1:0"
		if base > 0 {
			addr = fmt.Sprintf("127.0.0.1:%d", base+i)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range lns {
				l.Close()
			}
			return nil, errors.Join(fmt.Errorf("dev listener %s", addr), err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// devLoginTTL is how long the login URL the demo prints at start stays
// valid: long enough to read the output first.
const devLoginTTL = 15 * time.Minute

// printPageLogin prints a one-time login URL to the first node's key
// visualizer and how to make the browser trust the page.
func printPageLogin(ctx context.Context, n *node.Node, certs devCerts, out io.Writer) error {
	login, err := n.MintUILogin(ctx, devLoginTTL)
	if err != nil {
		return fmt.Errorf("dev: %w", err)
	}
	fmt.Fprintf(out, "key visualizer: %s\n", login.GetUrl())
	fmt.Fprintf(out, "  (one-time login to %s's page, valid %v; another: go run ./cmd/hotsplitctl ui. The page's certificate is signed by the demo's CA, %s, kept for the next run with --devDir: trust it once, docs/operations.md \"The key visualizer\")\n",
		n.ID(), devLoginTTL, certs.file("ca.crt"))
	return nil
}
