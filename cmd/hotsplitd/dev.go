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
)

const devNodes = 3

// runDev starts a three-node cluster on loopback in this process, prints
// how to reach it, and runs until ctx ends.
func runDev(ctx context.Context, o *options, out io.Writer) error {
	dir := o.devDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "hotsplit-dev-")
		if err != nil {
			return fmt.Errorf("dev data dir: %w", err)
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	demoDefaults(o)
	// The nodes log to a file; the terminal keeps the demo's narrative.
	logPath := o.devLog
	if logPath == "" {
		logPath = filepath.Join(os.TempDir(), "hotsplit-dev.log")
	}
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
		devTiming(&cfg)
		if i == 0 {
			cfg.Bootstrap, cfg.Join = true, nil
		} else {
			cfg.Bootstrap, cfg.Join = false, []string{nodes[0].GRPCAddr()}
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
	fmt.Fprintf(out, "hotsplitctl endpoints: %s\n", ep)
	fmt.Fprintf(out, "metrics: http://%s/metrics (and the other nodes at %s)\n", https[0], strings.Join(https[1:], ", "))
	fmt.Fprintf(out, "look closer:\n  export HOTSPLIT_ENDPOINTS=%s\n  go run ./cmd/hotsplitctl routes list\n  go run ./cmd/hotsplitctl autosplit status\n  go run ./cmd/hotsplitctl autosplit explain ROUTE_ID\n  go run ./cmd/hotsplitctl routes watch\n", ep)
	fmt.Fprintf(out, "data: %s   node logs: %s   (Ctrl-C stops the demo)\n", dir, logPath)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go printEvents(loadCtx, nodes[0], out)
	if o.devWorkload != "none" {
		go runDemoLoad(loadCtx, endpoints, o, o.node.Logger, out)
	}
	select {
	case <-ctx.Done():
	case <-nodes[0].Halted():
	case <-nodes[1].Halted():
	case <-nodes[2].Halted():
	}
	return nil
}

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
