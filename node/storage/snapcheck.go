package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// ErrSnapshotGap: the snapshot raft would restore and the log do not meet,
// so entries between them exist nowhere on this node. Raft would start and
// then panic (log not found) on the first of them.
var ErrSnapshotGap = errors.New("snapshot and log leave a gap")

// ErrNoValidSnapshot: the data dir holds snapshots and every one of them
// fails its CRC check; raft would refuse to start with a vaguer message.
var ErrNoValidSnapshot = errors.New("no snapshot passes its CRC check")

// removeStaleSnapshotTemps deletes the "<id>.tmp" directories a snapshot
// left behind when the process died (or the disk filled) while writing it:
// raft ignores them, but they hold disk space forever.
func removeStaleSnapshotTemps(dataDir string, log *slog.Logger) error {
	dir := filepath.Join(dataDir, "snapshots")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("snapshot dir %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.RemoveAll(path); err != nil {
			return fmt.Errorf("remove stale snapshot %s: %w", path, err)
		}
		log.Warn("removed an unfinished snapshot left by an earlier run", "path", path)
	}
	return nil
}

// CheckSnapshotCoverage is checkSnapshotCoverage on the data dir's
// snapshots, read through a quiet store: the check names what it refuses
// in one line, and raft's own ERROR per bad CRC would be a second.
func CheckSnapshotCoverage(dataDir string, logs raft.LogStore, log *slog.Logger) (string, error) {
	quiet, err := QuietSnapshots(dataDir)
	if err != nil {
		return "", fmt.Errorf("open snapshots in %s: %w", dataDir, err)
	}
	return checkSnapshotCoverage(quiet, logs, dataDir, log)
}

// checkSnapshotCoverage runs before raft starts. It picks the snapshot
// raft will restore — the newest whose CRC checks, as raft does — and
// refuses a data dir whose log does not continue from it: with log entries
// present, the first must be at most that snapshot's index + 1. Snapshots
// that fail their CRC are named in a warning (raft skips them). A data dir
// restored from, or installed with, a snapshot and an empty log passes.
//
// It returns the path of the snapshot raft will restore ("" for none).
func checkSnapshotCoverage(snaps raft.SnapshotStore, logs raft.LogStore, dataDir string, log *slog.Logger) (string, error) {
	snapDir := filepath.Join(dataDir, "snapshots")
	picked, err := pickSnapshot(snaps, snapDir, log)
	if err != nil {
		return "", err
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return "", err
	}
	last, err := logs.LastIndex()
	if err != nil {
		return "", err
	}
	snapIndex, from, path := uint64(0), "no snapshot", ""
	if picked != nil {
		path = filepath.Join(snapDir, picked.ID)
		snapIndex, from = picked.Index, fmt.Sprintf("snapshot %s at index %d", path, picked.Index)
	}
	if last > 0 && snapIndex+1 < first {
		return "", fmt.Errorf("%w in %s: raft would restore %s but the log in raft.db starts at index %d, so entries %d..%d exist nowhere (a snapshot newer than it failed its CRC check, or was deleted)",
			ErrSnapshotGap, dataDir, from, first, snapIndex+1, first-1)
	}
	return path, nil
}

// snapshotsRetained is how many snapshots a data dir keeps.
const snapshotsRetained = 3

// QuietSnapshots opens a data dir's snapshots for reading without raft's
// own log lines: the caller reports what it finds in its own words.
func QuietSnapshots(dataDir string) (*raft.FileSnapshotStore, error) {
	return raft.NewFileSnapshotStoreWithLogger(dataDir, snapshotsRetained, hclog.NewNullLogger())
}

// pickSnapshot returns the newest snapshot whose CRC checks (nil when
// there is none), warning by name about newer ones that fail.
func pickSnapshot(snaps raft.SnapshotStore, snapDir string, log *slog.Logger) (*raft.SnapshotMeta, error) {
	metas, err := snaps.List()
	if err != nil {
		return nil, fmt.Errorf("list snapshots in %s: %w", snapDir, err)
	}
	var bad []string
	for _, m := range metas {
		_, rc, err := snaps.Open(m.ID)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", m.ID, err))
			continue
		}
		rc.Close()
		if len(bad) > 0 {
			log.Warn("snapshots failed their CRC check; raft starts from an older one", "failed", strings.Join(bad, ", "), "using", m.ID, "dir", snapDir)
		}
		return m, nil
	}
	if len(metas) > 0 {
		return nil, fmt.Errorf("%w in %s: %s", ErrNoValidSnapshot, snapDir, strings.Join(bad, ", "))
	}
	return nil, nil
}
