//go:build !jepsen

package node

import "net"

// defaultDialer is a plain TCP dialer: normal builds have no fault seam.
func defaultDialer(string) Dialer { return &net.Dialer{} }
