package raftnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"time"
)

// The cluster id binding of a raft connection. After the TLS handshake and
// the node certificate check, both ends of a raft connection say which
// cluster they belong to, and a connection between two clusters closes
// before raft reads a byte: a node of another cluster (a survivor forked
// again with --forceNewCluster, a clone restored from a backup beside its
// original) can neither send this node entries nor ask for its vote, nor
// answer its own (a higher term in an answer would depose a leader).
//
// Negotiated, for rolling upgrades: a node offers raftClusterALPN in its
// TLS ClientHello and lists it as its server protocol. A build without the
// binding lists no server protocols, so it ignores the offer and the
// connection carries raft alone, as before; a dialer of such a build offers
// nothing and is accepted without the exchange. Only two nodes of this
// build or later exchange ids, so a mixed cluster keeps working and is
// protected between its upgraded members. Plaintext raft (--insecure) has
// no negotiation and no binding.
//
// The exchange: the dialer writes its frame, the acceptor reads it, writes
// its own and then decides; the dialer reads the acceptor's and decides. A
// frame is one version byte (1), one length byte and the cluster id (at
// most maxClusterIDLen bytes). An empty id is a node that does not know its
// cluster yet (fresh, joining): it is bound to nothing and refuses nothing.
const raftClusterALPN = "hotsplit-raft-cluster/1"

const (
	clusterFrameVersion = 1
	maxClusterIDLen     = 64
)

// ErrOtherCluster: the peer of a raft connection belongs to another
// cluster.
var ErrOtherCluster = errors.New("the peer belongs to another cluster")

func writeClusterFrame(w io.Writer, id string) error {
	if len(id) > maxClusterIDLen {
		return fmt.Errorf("cluster id of %d bytes exceeds %d", len(id), maxClusterIDLen)
	}
	_, err := w.Write(append([]byte{clusterFrameVersion, byte(len(id))}, id...))
	return err
}

func readClusterFrame(r io.Reader) (string, error) {
	var hdr [2]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return "", fmt.Errorf("reading the peer's cluster id: %w", err)
	}
	if hdr[0] != clusterFrameVersion || hdr[1] > maxClusterIDLen {
		return "", fmt.Errorf("the peer's cluster id frame: version %d, length %d (want version %d, at most %d bytes)", hdr[0], hdr[1], clusterFrameVersion, maxClusterIDLen)
	}
	id := make([]byte, hdr[1])
	if _, err := io.ReadFull(r, id); err != nil {
		return "", fmt.Errorf("reading the peer's cluster id: %w", err)
	}
	return string(id), nil
}

// sameCluster is the binding's rule: two ids conflict only when both are
// known.
func sameCluster(own, peer string) bool { return own == "" || peer == "" || own == peer }

// otherClusterError names both clusters.
func otherClusterError(peerID, peerCluster, own string) error {
	return fmt.Errorf("%w: node %q belongs to cluster %s, this node to %s", ErrOtherCluster, peerID, peerCluster, own)
}

// acceptClusterID runs the acceptor's side of the exchange on a connection
// that negotiated raftClusterALPN (under the handshake deadline already set
// on it).
func acceptClusterID(c net.Conn, own, peerID string) error {
	peer, err := readClusterFrame(c)
	if err != nil {
		return err
	}
	// Answer before deciding, so a refused dialer can say which cluster
	// refused it.
	if err := writeClusterFrame(c, own); err != nil {
		return fmt.Errorf("writing this node's cluster id: %w", err)
	}
	if !sameCluster(own, peer) {
		return otherClusterError(peerID, peer, own)
	}
	return nil
}

// dialClusterID runs the dialer's side of the exchange, bounded by
// deadline.
func dialClusterID(c net.Conn, own, peerID string, deadline time.Time) error {
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	if err := writeClusterFrame(c, own); err != nil {
		return fmt.Errorf("writing this node's cluster id: %w", err)
	}
	peer, err := readClusterFrame(c)
	if err != nil {
		return err
	}
	if !sameCluster(own, peer) {
		return otherClusterError(peerID, peer, own)
	}
	return nil
}
