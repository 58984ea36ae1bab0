package backupfile

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// fixture is a backup file written before the format moved to this
// package (by the client at 553a49f, from a real FSM snapshot: 4 routes at
// index 3 of cluster c1, streamed in two chunks). Files already on disk
// must go on restoring.
const fixture = "testdata/format1.hsnap"

// backupBytes writes a backup file with Writer, the payload in chunks.
func backupBytes(t testing.TB, hdr *api.SnapshotHeader, chunks ...[]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, hdr)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		if _, err := w.Write(c); err != nil {
			t.Fatal(err)
		}
	}
	info, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	if want := sha256.Sum256(buf.Bytes()[:buf.Len()-sha256.Size]); info.Checksum != want {
		t.Fatalf("Close reports checksum %x, the file's bytes hash to %x", info.Checksum, want)
	}
	return buf.Bytes()
}

func TestReadBackupRoundTrip(t *testing.T) {
	hdr := &api.SnapshotHeader{Index: 42, Term: 3, ClusterId: "c1", StateHash: bytes.Repeat([]byte{7}, 32)}
	payload := []byte("HSFSMSNP some state")
	data := backupBytes(t, hdr, payload[:5], payload[5:])
	b, err := Read(bytes.NewReader(data), int64(len(data)))
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
		if _, err := Read(bytes.NewReader(bad), int64(len(bad))); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("byte %d flipped: err %v, want ErrBadBackup", i, err)
		}
	}
	for n := range len(good) {
		if _, err := Read(bytes.NewReader(good[:n]), int64(n)); !errors.Is(err, ErrBadBackup) {
			t.Fatalf("truncated to %d: err %v, want ErrBadBackup", n, err)
		}
	}
}

// readFixture returns the fixture's bytes, decoded.
func readFixture(t *testing.T) ([]byte, *Backup) {
	t.Helper()
	data, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Read(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	return data, b
}

// TestReadBackupFixture decodes the file the old code wrote.
func TestReadBackupFixture(t *testing.T) {
	data, b := readFixture(t)
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

// TestWriterReproducesFixture: the same header and payload written again
// give the old file byte for byte, chunked either way.
func TestWriterReproducesFixture(t *testing.T) {
	data, b := readFixture(t)
	payload, _ := io.ReadAll(b.Payload())
	for _, chunks := range [][][]byte{{payload}, {payload[:100], payload[100:200], payload[200:]}} {
		if got := backupBytes(t, b.Header, chunks...); !bytes.Equal(got, data) {
			t.Fatalf("rewritten in %d chunks: %d bytes differ from the %d-byte fixture", len(chunks), len(got), len(data))
		}
	}
}

// FuzzReadBackup: a backup file is outside bytes; reading one never
// panics, and what it accepts has a payload inside the file.
func FuzzReadBackup(f *testing.F) {
	f.Add(backupBytes(f, &api.SnapshotHeader{Index: 1, ClusterId: "c"}, []byte("payload")))
	f.Add([]byte("HSBACKUP"))
	if data, err := os.ReadFile(fixture); err == nil {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if b.offset+int64(b.Size)+trailer != int64(len(data)) {
			t.Fatalf("accepted a payload of %d at %d in %d bytes", b.Size, b.offset, len(data))
		}
	})
}
