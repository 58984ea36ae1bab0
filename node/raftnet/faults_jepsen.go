//go:build jepsen

package raftnet

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"
)

// The jepsen build's network seam. Each hotsplitd process is one node, so
// the link state is process-wide: the harness tells every node (POST
// /jepsen/net, served by the node) which peer addresses it cannot reach
// (both directions are cut by telling both sides) and how much to delay
// writes to each. None of it exists in normal builds.

// links is the process-wide link state.
var links = &linkState{cut: map[string]bool{}, delay: map[string]time.Duration{}}

type linkState struct {
	mu    sync.Mutex               // guards the fields below
	cut   map[string]bool          // peer address -> unreachable
	delay map[string]time.Duration // peer address -> added latency per write
	conns map[*faultConn]struct{}
}

// DefaultDialer is the fault-injecting dialer in jepsen builds: raft's
// stream layer and inter-node gRPC both dial through it.
func DefaultDialer() Dialer { return faultDialer{} }

type faultDialer struct{}

func (faultDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	links.mu.Lock()
	cut, delay := links.cut[addr], links.delay[addr]
	links.mu.Unlock()
	if cut {
		return nil, fmt.Errorf("jepsen: link to %s is cut", addr)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	fc := &faultConn{Conn: c, addr: addr, delay: delay}
	links.mu.Lock()
	if links.conns == nil {
		links.conns = map[*faultConn]struct{}{}
	}
	links.conns[fc] = struct{}{}
	links.mu.Unlock()
	return fc, nil
}

type faultConn struct {
	net.Conn
	addr  string
	delay time.Duration
}

func (c *faultConn) Write(p []byte) (int, error) {
	if c.delay > 0 {
		time.Sleep(c.delay)
	}
	return c.Conn.Write(p)
}

func (c *faultConn) Close() error {
	links.mu.Lock()
	delete(links.conns, c)
	links.mu.Unlock()
	return c.Conn.Close()
}

// SetLinkFaults replaces the link rules of this process: the peer
// addresses it cannot reach and the latency added to each write to a
// peer; it closes open connections to peers that are now cut (or whose
// delay changed).
func SetLinkFaults(cut []string, delayMs map[string]int64) {
	f := links
	f.mu.Lock()
	f.cut = map[string]bool{}
	for _, a := range cut {
		f.cut[a] = true
	}
	f.delay = map[string]time.Duration{}
	for a, ms := range delayMs {
		f.delay[a] = time.Duration(ms) * time.Millisecond
	}
	var closing []*faultConn
	for c := range f.conns {
		if f.cut[c.addr] || f.delay[c.addr] != c.delay {
			closing = append(closing, c)
		}
	}
	f.mu.Unlock()
	for _, c := range closing {
		c.Close()
	}
}
