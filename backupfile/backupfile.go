// Package backupfile is the format of a hotsplit backup file: what
// `hotsplitctl snapshot save` writes (through the client library) and
// `hotsplitd --restoreSnapshot` reads (the server's recovery). Both sides
// import this one definition, so the server never imports the client to
// read a backup and the client never imports server code to write one.
//
// A backup file (format version 1):
//
//	magic    8 bytes "HSBACKUP"
//	version  uvarint (1)
//	header   uvarint length, then SnapshotHeader (deterministic protobuf)
//	payload  the FSM snapshot (fsm.WriteState's output), as the leader streamed it
//	length   8 bytes big-endian: the payload's length
//	checksum 32 bytes: SHA-256 of every byte before it
//
// The checksum covers the header too, so a restore trusts neither the
// state hash nor the payload of a file that changed after it was written.
//
// The package owns the envelope only: it never decodes the payload (fsm
// does, and checks the state hash against the header) and does no I/O of
// its own beyond the file it is handed or asked to open. It imports only
// the standard library, protobuf and the generated API.
package backupfile

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

const (
	magic   = "HSBACKUP"
	version = 1
	// maxHeader bounds the header frame a reader accepts.
	maxHeader = 1 << 20
	trailer   = 8 + sha256.Size
)

// ErrBadBackup: a backup file that is not one, is truncated, or whose
// checksum does not match; the error says which.
var ErrBadBackup = errors.New("bad backup file")

// Info describes a written or opened backup file.
type Info struct {
	Header *api.SnapshotHeader
	// Size is the payload's length; Checksum the file's SHA-256 trailer.
	Size     uint64
	Checksum [sha256.Size]byte
}

// Writer writes one backup file: NewWriter the magic, version and header,
// Write the payload, Close the trailer. Not safe for concurrent use.
type Writer struct {
	dst  io.Writer
	sum  hash.Hash
	bw   *bufio.Writer // to dst and sum
	hdr  *api.SnapshotHeader
	size uint64
}

// NewWriter starts a backup file with header hdr on w.
func NewWriter(w io.Writer, hdr *api.SnapshotHeader) (*Writer, error) {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("backup header: %w", err)
	}
	bw := &Writer{dst: w, sum: sha256.New(), hdr: hdr}
	bw.bw = bufio.NewWriterSize(io.MultiWriter(w, bw.sum), 1<<16)
	buf := []byte(magic)
	buf = binary.AppendUvarint(buf, version)
	buf = binary.AppendUvarint(buf, uint64(len(b)))
	buf = append(buf, b...)
	if _, err := bw.bw.Write(buf); err != nil {
		return nil, err
	}
	return bw, nil
}

// Write appends p to the payload.
func (w *Writer) Write(p []byte) (int, error) {
	n, err := w.bw.Write(p)
	w.size += uint64(n)
	return n, err
}

// Close writes the trailer (the payload's length and the file's SHA-256)
// and returns what the file holds. It does not close the underlying
// writer; syncing and renaming the file are the caller's.
func (w *Writer) Close() (*Info, error) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], w.size)
	if _, err := w.bw.Write(n[:]); err != nil {
		return nil, err
	}
	if err := w.bw.Flush(); err != nil {
		return nil, err
	}
	info := &Info{Header: w.hdr, Size: w.size}
	copy(info.Checksum[:], w.sum.Sum(nil))
	if _, err := w.dst.Write(info.Checksum[:]); err != nil {
		return nil, err
	}
	return info, nil
}

// Backup is an opened, verified backup file.
type Backup struct {
	Info
	f      io.ReaderAt
	closer io.Closer
	offset int64
}

// Open opens a backup file and verifies its checksum over every byte, so
// a truncated or altered file is refused before anything is seeded from
// it. Payload then reads the FSM snapshot; Close the Backup.
func Open(path string) (*Backup, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("backup: %w", err)
	}
	b, err := Read(f, fi.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	b.closer = f
	return b, nil
}

// Read verifies and decodes the backup file of total bytes in f. The
// Backup reads its payload from f; closing it does not close f.
func Read(f io.ReaderAt, total int64) (*Backup, error) {
	if total < int64(len(magic))+2+trailer {
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
	m := make([]byte, len(magic))
	if _, err := io.ReadFull(br, m); err != nil || string(m) != magic {
		return nil, fmt.Errorf("%w: not a hotsplit backup (magic %q)", ErrBadBackup, m)
	}
	cr := &countingReader{r: br, n: int64(len(magic))}
	v, err := binary.ReadUvarint(cr)
	if err != nil || v != version {
		return nil, fmt.Errorf("%w: format version %d, this build reads %d", ErrBadBackup, v, version)
	}
	hl, err := binary.ReadUvarint(cr)
	if err != nil || hl > maxHeader {
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
	if _, err := f.ReadAt(n[:], total-trailer); err != nil {
		return nil, err
	}
	size := binary.BigEndian.Uint64(n[:])
	if size > uint64(total) || uint64(cr.n)+size+trailer != uint64(total) {
		return nil, fmt.Errorf("%w: payload of %d bytes does not fit a %d-byte file", ErrBadBackup, size, total)
	}
	b := &Backup{Info: Info{Header: hdr, Size: size}, f: f, offset: cr.n}
	copy(b.Checksum[:], want[:])
	return b, nil
}

// Payload reads the backup's FSM snapshot.
func (b *Backup) Payload() io.Reader { return io.NewSectionReader(b.f, b.offset, int64(b.Size)) }

// Close closes the file Open opened.
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
