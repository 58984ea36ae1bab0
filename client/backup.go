package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/backupfile"
)

// SaveBackup streams a consistent snapshot from the leader into path, a
// backup file in package backupfile's format: it is written to
// path+".part", checked against the leader's SHA-256, synced and renamed,
// so path is either absent or complete. An attempt that fails midway
// starts the file over (the leader's State is immutable, but the next
// attempt may reach a newer leader and a newer state).
func (c *Client) SaveBackup(ctx context.Context, path string) (*backupfile.Info, error) {
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(tmp) // gone after a successful rename
	}()
	info, err := invoke(ctx, c, call{name: "Snapshot", long: true}, func(ctx context.Context, cc grpc.ClientConnInterface) (*backupfile.Info, error) {
		if err := f.Truncate(0); err != nil {
			return nil, err
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		return streamBackup(ctx, api.NewClusterClient(cc), f)
	})
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, fmt.Errorf("backup: sync %s: %w", tmp, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("backup: close %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	return info, nil
}

// streamBackup receives one snapshot stream and writes the backup file,
// checking the payload against the stream's own trailer (length and
// SHA-256) before it writes the file's.
func streamBackup(ctx context.Context, cl api.ClusterClient, f *os.File) (*backupfile.Info, error) {
	stream, err := cl.Snapshot(ctx, &api.SnapshotRequest{})
	if err != nil {
		return nil, err
	}
	first, err := stream.Recv()
	if err != nil {
		return nil, err
	}
	hdr := first.GetHeader()
	if hdr == nil {
		return nil, fmt.Errorf("%w: snapshot stream did not start with a header", ErrProtocol)
	}
	w, err := backupfile.NewWriter(f, hdr)
	if err != nil {
		return nil, err
	}
	payload := sha256.New()
	var size uint64
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			return nil, fmt.Errorf("%w: snapshot stream ended without a trailer", ErrProtocol)
		}
		if err != nil {
			return nil, err
		}
		if tr := msg.GetTrailer(); tr != nil {
			if tr.GetSize() != size || !bytes.Equal(tr.GetSha256(), payload.Sum(nil)) {
				return nil, fmt.Errorf("%w: snapshot stream: received %d bytes that do not match the leader's length %d and SHA-256", ErrProtocol, size, tr.GetSize())
			}
			break
		}
		chunk := msg.GetChunk()
		if chunk == nil {
			return nil, fmt.Errorf("%w: snapshot stream: a second header", ErrProtocol)
		}
		payload.Write(chunk)
		size += uint64(len(chunk))
		if _, err := w.Write(chunk); err != nil {
			return nil, err
		}
	}
	return w.Close()
}
