package storage

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// snapStore returns a file snapshot store in dir holding snapshots at the
// given indexes, and their ids.
func snapStore(t *testing.T, dir string, indexes ...uint64) (*raft.FileSnapshotStore, []string) {
	t.Helper()
	store, err := raft.NewFileSnapshotStoreWithLogger(dir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	var ids []string
	for _, i := range indexes {
		sink, err := store.Create(raft.SnapshotVersionMax, i, 1, raft.Configuration{}, 1, trans)
		if err != nil {
			t.Fatal(err)
		}
		sink.Write([]byte("state at " + string(rune('a'+i%26))))
		if err := sink.Close(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sink.ID())
	}
	return store, ids
}

func logFrom(first, last uint64) raft.LogStore {
	s := raft.NewInmemStore()
	if last > 0 {
		s.StoreLogs(entries(first, last))
	}
	return s
}

func TestSnapshotCoverage(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name        string
		snaps       []uint64
		corrupt     int // how many of the newest snapshots fail their CRC
		first, last uint64
		want        error
	}{
		{"fresh", nil, 0, 0, 0, nil},
		{"log from 1, no snapshot", nil, 0, 1, 40, nil},
		{"log continues the snapshot", []uint64{30}, 0, 21, 40, nil},
		{"log starts right after it", []uint64{30}, 0, 31, 40, nil},
		// Restored, force-new and InstallSnapshot data dirs.
		{"snapshot and an empty log", []uint64{30}, 0, 0, 0, nil},
		{"snapshots deleted", nil, 0, 21, 40, ErrSnapshotGap},
		{"log starts past the snapshot", []uint64{30}, 0, 35, 40, ErrSnapshotGap},
		{"newest corrupt, older covered", []uint64{20, 30}, 1, 21, 40, nil},
		{"newest corrupt, older lacks logs", []uint64{10, 30}, 1, 21, 40, ErrSnapshotGap},
		{"all corrupt", []uint64{10, 30}, 2, 1, 40, ErrNoValidSnapshot},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			store, ids := snapStore(t, dir, tc.snaps...)
			for _, id := range ids[len(ids)-tc.corrupt:] {
				path := filepath.Join(dir, "snapshots", id, "state.bin")
				b, _ := os.ReadFile(path)
				b[0] ^= 1
				os.WriteFile(path, b, 0o600)
			}
			path, err := checkSnapshotCoverage(store, logFrom(tc.first, tc.last), dir, quiet)
			if !errors.Is(err, tc.want) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			if err != nil && (!strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), "\n")) {
				t.Fatalf("error %q is not one line naming the data dir", err)
			}
			if err == nil && len(ids) > tc.corrupt && path != filepath.Join(dir, "snapshots", ids[len(ids)-1-tc.corrupt]) {
				t.Fatalf("picked %s, want the newest valid %s", path, ids[len(ids)-1-tc.corrupt])
			}
		})
	}
}

func TestStaleSnapshotTempsAreRemoved(t *testing.T) {
	dir := t.TempDir()
	_, ids := snapStore(t, dir, 5)
	stale := filepath.Join(dir, "snapshots", "1-9-123.tmp")
	if err := os.MkdirAll(stale, 0o750); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(stale, "state.bin"), []byte("half"), 0o600)
	if err := removeStaleSnapshotTemps(dir, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale %s still there: %v", stale, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshots", ids[0])); err != nil {
		t.Fatalf("a finished snapshot went too: %v", err)
	}
	if err := removeStaleSnapshotTemps(t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatalf("no snapshot dir: %v", err)
	}
}
