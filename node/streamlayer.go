package node

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/raft"
)

// Dialer opens connections to other nodes. Raft and inter-node gRPC both dial
// through the node's one Dialer, so the jepsen build can cut or delay every
// link to a chosen peer in one place.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// streamLayer is raft's transport over a listener and the node's Dialer.
type streamLayer struct {
	net.Listener
	advertise net.Addr
	dialer    Dialer
}

func newStreamLayer(ln net.Listener, advertise string, d Dialer) (*streamLayer, error) {
	addr, err := net.ResolveTCPAddr("tcp", advertise)
	if err != nil {
		return nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
	}
	if addr.IP == nil || addr.IP.IsUnspecified() {
		return nil, fmt.Errorf("raft advertise address %q: must be a reachable host, not unspecified", advertise)
	}
	return &streamLayer{Listener: ln, advertise: addr, dialer: d}, nil
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return s.dialer.DialContext(ctx, "tcp", string(address))
}
