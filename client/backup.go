package client

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// A backup file (format version 1), written by SaveBackup and read by
// OpenBackup (hotsplitd --restoreSnapshot):
//
//	magic    8 bytes "HSBACKUP"
//	version  uvarint (1)
//	header   uvarint length, then SnapshotHeader (deterministic protobuf)
//	payload  the FSM snapshot, as the leader streamed it
//	length   8 bytes big-endian: the payload's length
//	checksum 32 bytes: SHA-256 of every byte before it
//
// The checksum covers the header too, so a restore trusts neither the
// state hash nor the payload of a file that changed after it was written.
const (
	backupMagic   = "HSBACKUP"
	backupVersion = 1
	// maxBackupHeader bounds the header frame a reader accepts.
	maxBackupHeader = 1 << 20
	backupTrailer   = 8 + sha256.Size
)

// ErrBadBackup: a backup file that is not one, is truncated, or whose
// checksum does not match; the error says which.
var ErrBadBackup = errors.New("bad backup file")

// BackupInfo describes a written or opened backup file.
type BackupInfo struct {
	Header *api.SnapshotHeader
	// Size is the payload's length; Checksum the file's SHA-256 trailer.
	Size     uint64
	Checksum [sha256.Size]byte
}

// SaveBackup streams a consistent snapshot from the leader into path: it is
// written to path+".part", checked against the leader's SHA-256, synced and
// renamed, so path is either absent or complete. An attempt that fails
// midway starts the file over (the leader's State is immutable, but the
// next attempt may reach a newer leader and a newer state).
func (c *Client) SaveBackup(ctx context.Context, path string) (*BackupInfo, error) {
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(tmp) // gone after a successful rename
	}()
	info, err := invoke(ctx, c, call{name: "Snapshot", long: true}, func(ctx context.Context, cc grpc.ClientConnInterface) (*BackupInfo, error) {
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

// streamBackup receives one snapshot stream and writes the backup file.
func streamBackup(ctx context.Context, cl api.ClusterClient, f *os.File) (*BackupInfo, error) {
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
	sum := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(f, sum), 1<<16)
	if err := writeBackupHeader(bw, hdr); err != nil {
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
		if _, err := bw.Write(chunk); err != nil {
			return nil, err
		}
	}
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], size)
	if _, err := bw.Write(n[:]); err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	info := &BackupInfo{Header: hdr, Size: size}
	copy(info.Checksum[:], sum.Sum(nil))
	if _, err := f.Write(info.Checksum[:]); err != nil {
		return nil, err
	}
	return info, nil
}

func writeBackupHeader(w io.Writer, hdr *api.SnapshotHeader) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(hdr)
	if err != nil {
		return err
	}
	buf := []byte(backupMagic)
	buf = binary.AppendUvarint(buf, backupVersion)
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	buf = append(buf, b...)
	_, err = w.Write(buf)
	return err
}

// Backup is an opened, verified backup file.
type Backup struct {
	BackupInfo
	f      io.ReaderAt
	closer io.Closer
	offset int64
}

// OpenBackup opens a backup file and verifies its checksum over every
// byte, so a truncated or altered file is refused before anything is
// seeded from it. Payload then reads the FSM snapshot; Close the Backup.
func OpenBackup(path string) (*Backup, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("backup: %w", err)
	}
	b, err := readBackup(f, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b.closer = f
	return b, nil
}

// readBackup verifies and decodes the backup file of total bytes in f.
func readBackup(f io.ReaderAt, total int64) (*Backup, error) {
	if total < int64(len(backupMagic))+2+backupTrailer {
		return nil, fmt.Errorf("%w: %d bytes is too short", ErrBadBackup, total)
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(f, 0, total-sha256.Size)); err != nil {
		return nil, err
	}
	var want [sha256.Size]byte
	if _, err := f.ReadAt(want[:], total-sha256.Size); err != nil {
		return nil, err
	}
	if !bytes.Equal(sum.Sum(nil), want[:]) {
		return nil, fmt.Errorf("%w: SHA-256 does not match its checksum (altered or truncated)", ErrBadBackup)
	}
	br := bufio.NewReader(io.NewSectionReader(f, 0, total))
	magic := make([]byte, len(backupMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != backupMagic {
		return nil, fmt.Errorf("%w: not a hotsplit backup (magic %q)", ErrBadBackup, magic)
	}
	cr := &countingReader{r: br, n: int64(len(backupMagic))}
	v, err := binary.ReadUvarint(cr)
	if err != nil || v != backupVersion {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrBadBackup, v, backupVersion)
	}
	hl, err := binary.ReadUvarint(cr)
	if err != nil || hl > maxBackupHeader {
		return nil, fmt.Errorf("%w: header length %d", ErrBadBackup, hl)
	}
	hb := make([]byte, hl)
	if _, err := io.ReadFull(cr, hb); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	hdr := &api.SnapshotHeader{}
	if err := proto.Unmarshal(hb, hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrBadBackup, err)
	}
	var n [8]byte
	if _, err := f.ReadAt(n[:], total-backupTrailer); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > uint64(total) || uint64(cr.n)+size+backupTrailer != uint64(total) {
		return nil, fmt.Errorf("%w: payload of %d bytes does not fit a %d-byte file", ErrBadBackup, size, total)
	}
	b := &Backup{BackupInfo: BackupInfo{Header: hdr, Size: size}, f: f, offset: cr.n}
	copy(b.Checksum[:], want[:])
	return b, nil
}

// Payload reads the backup's FSM snapshot.
func (b *Backup) Payload() io.Reader { return io.NewSectionReader(b.f, b.offset, int64(b.Size)) }

// Close closes the file.
func (b *Backup) Close() error {
	if b.closer == nil {
		return nil
	}
	return b.closer.Close()
}

type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}
