package transport

import (
	"net"
	"sync"
	"sync/atomic"
)

// LimitListener caps the connections open through ln at max: a connection
// accepted over the cap is closed at once (the client sees a reset rather
// than waiting in the accept queue) and counted under name ("grpc", "http",
// "raft"). Unlike x/net/netutil.LimitListener, which stops accepting, it
// keeps the kernel's accept queue drained so a flood cannot hold the
// listener.
func LimitListener(ln net.Listener, max int, name string, m *Metrics) net.Listener {
	return &limitListener{Listener: ln, max: int64(max), name: name, m: m}
}

type limitListener struct {
	net.Listener
	max  int64
	name string
	m    *Metrics
	open atomic.Int64
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) > l.max {
			l.open.Add(-1)
			c.Close()
			l.m.refuseConn(l.name)
			continue
		}
		l.m.connOpened(l.name, 1)
		return &limitedConn{Conn: c, l: l}, nil
	}
}

type limitedConn struct {
	net.Conn
	l    *limitListener
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.l.m.connOpened(c.l.name, -1)
	})
	return c.Conn.Close()
}
