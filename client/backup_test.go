package client

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// backupBytes builds a backup file the way streamBackup writes it.
func backupBytes(t testing.TB, hdr *api.SnapshotHeader, payload []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := writeBackupHeader(&buf, hdr); err != nil {
		t.Fatal(err)
	}
	buf.Write(payload)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(payload)))
	buf.Write(n[:])
	sum := sha256.Sum256(buf.Bytes())
	buf.Write(sum[:])
	return buf.Bytes()
}

func TestReadBackupRoundTrip(t *testing.T) {
	hdr := &api.SnapshotHeader{Index: 42, Term: 3, ClusterId: "c1", StateHash: bytes.Repeat([]byte{7}, 32)}
	payload := []byte("HSFSMSNP some state")
	b, err := readBackup(bytes.NewReader(backupBytes(t, hdr, payload)), int64(len(backupBytes(t, hdr, payload))))
	if err != nil {
		t.Fatal(err)
	}
	if b.Header.GetIndex() != 42 || b.Header.GetClusterId() != "c1" || b.Size != uint64(len(payload)) {
		t.Fatalf("header %v size %d", b.Header, b.Size)
	}
	got, _ := io.ReadAll(b.Payload())
	if !bytes.Equal(got, payload) {
		t.Fatalf("payload %q", got)
	}
}

// Every single-byte change and every truncation is refused: the checksum
// covers the header and the payload.
func TestReadBackupRefusesDamage(t *testing.T) {
	good := backupBytes(t, &api.SnapshotHeader{Index: 1, ClusterId: "c"}, []byte("payload"))
	for i := range good {
		bad := bytes.Clone(good)
		bad[i] ^= 0x40
		if _, err := readBackup(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("byte %d flipped: err %v, want ErrBadBackup", i, err)
		}
	}
	for n := range len(good) {
		if _, err := readBackup(bytes.NewReader(good[:n]), int64(n)); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("truncated to %d: err %v, want ErrBadBackup", n, err)
		}
	}
}

// FuzzReadBackup: a backup file is outside bytes; reading one never
// panics, and what it accepts has a payload inside the file.
func FuzzReadBackup(f *testing.F) {
	f.Add(backupBytes(f, &api.SnapshotHeader{Index: 1, ClusterId: "c"}, []byte("payload")))
	f.Add([]byte("HSBACKUP"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := readBackup(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if b.offset+int64(b.Size)+backupTrailer != int64(len(data)) {
			t.Fatalf("accepted a payload of %d at %d in %d bytes", b.Size, b.offset, len(data))
		}
	})
}

// TestReadBackupFixture reads a backup file that streamBackup wrote before
// the format moved out of this package (a 4-route state at index 3 of
// cluster c1, streamed in two chunks): files already on disk must go on
// restoring, byte for byte.
func TestReadBackupFixture(t *testing.T) {
	data, err := os.ReadFile("testdata/format1.hsbackup")
	if err != nil {
		t.Fatal(err)
	}
	b, err := readBackup(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	hdr := b.Header
	if hdr.GetIndex() != 3 || hdr.GetTerm() != 2 || hdr.GetClusterId() != "c1" || hdr.GetServedBy() != "n1" ||
		hdr.GetCatalogVersion() != 3 || hdr.GetRoutes() != 4 || len(hdr.GetStateHash()) != sha256.Size {
		t.Fatalf("header %v", hdr)
	}
	payload, err := io.ReadAll(b.Payload())
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(payload)) != b.Size || b.Size != 328 || !bytes.HasPrefix(payload, []byte("HSFSMSNP")) {
		t.Fatalf("payload of %d bytes (size %d), starts %q", len(payload), b.Size, payload[:min(8, len(payload))])
	}
	if want := sha256.Sum256(data[:len(data)-sha256.Size]); b.Checksum != want {
		t.Fatalf("checksum %x, want %x", b.Checksum, want)
	}
}
