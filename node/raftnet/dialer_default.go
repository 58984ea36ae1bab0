//go:build !jepsen

package raftnet

import "net"

// DefaultDialer is a plain TCP dialer: normal builds have no fault seam.
func DefaultDialer() Dialer { return &net.Dialer{} }
