package transport

import (
	"crypto/sha256"
	"hash"

	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
)

// snapshotChunk is the size of one chunk of a streamed snapshot.
const snapshotChunk = 256 << 10

// Snapshot streams the replicated state as of a linearizable read on the
// leader: a header (index, term, cluster id, state hash), the FSM snapshot
// in chunks, and a trailer with the chunks' SHA-256 and length. A follower
// does not forward the stream: it answers Unavailable with the leader hint,
// and the client goes there. The State is immutable, so the stream is
// consistent however long it takes and Apply goes on meanwhile.
func (c *clusterServer) Snapshot(_ *api.SnapshotRequest, stream grpc.ServerStreamingServer[api.SnapshotResponse]) error {
	ctx := stream.Context()
	if !c.s.cfg.Sched.IsReady() {
		return unavailable(c.s.leaderHint(), "snapshot: node %s is not the leader (or is establishing its fence); ask the leader", c.s.cfg.NodeID)
	}
	st, _, err := c.s.readState(ctx, api.Consistency_CONSISTENCY_LINEARIZABLE)
	if err != nil {
		return err
	}
	if !st.Bootstrapped() {
		return unavailable(nil, "snapshot: the cluster is not bootstrapped yet")
	}
	h := st.Hash()
	hdr := &api.SnapshotHeader{
		Index: st.Index(), Term: c.s.cfg.Raft.CurrentTerm(), ClusterId: st.ClusterID(), ClusterVersion: st.ClusterVersion(),
		StateHash: h[:], ServedBy: c.s.cfg.NodeID, CatalogVersion: st.Catalog().Version(), Routes: uint64(st.Catalog().Len()),
		LastHlc: st.LastHLC(), CeilingMs: st.CeilingMs(),
	}
	if err := stream.Send(&api.SnapshotResponse{Part: &api.SnapshotResponse_Header{Header: hdr}}); err != nil {
		return err
	}
	w := &chunkWriter{stream: stream, sum: sha256.New(), buf: make([]byte, 0, snapshotChunk)}
	if err := fsm.WriteState(w, st); err != nil {
		return err
	}
	if err := w.flush(); err != nil {
		return err
	}
	c.s.log.Info("snapshot streamed for a backup", "index", hdr.Index, "bytes", w.n, "catalog_version", hdr.CatalogVersion)
	return stream.Send(&api.SnapshotResponse{Part: &api.SnapshotResponse_Trailer{Trailer: &api.SnapshotTrailer{Sha256: w.sum.Sum(nil), Size: w.n}}})
}

// chunkWriter sends what is written to it in chunks of snapshotChunk
// bytes, hashing as it goes.
type chunkWriter struct {
	stream grpc.ServerStreamingServer[api.SnapshotResponse]
	sum    hash.Hash
	buf    []byte
	n      uint64
}

func (w *chunkWriter) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), snapshotChunk-len(w.buf))
		w.buf = append(w.buf, p[:k]...)
		p = p[k:]
		written += k
		if len(w.buf) == snapshotChunk {
			if err := w.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (w *chunkWriter) flush() error {
	if len(w.buf) == 0 {
		return nil
	}
	w.sum.Write(w.buf)
	w.n += uint64(len(w.buf))
	// gRPC may hold a sent message (stats handlers read it lazily): each
	// chunk gets its own buffer.
	err := w.stream.Send(&api.SnapshotResponse{Part: &api.SnapshotResponse_Chunk{Chunk: w.buf}})
	w.buf = make([]byte, 0, snapshotChunk)
	return err
}
