package storage

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Config says where a node's raft stores live and how they fail.
type Config struct {
	// ID names the node (to the jepsen disk seam; normal builds ignore it).
	ID      string
	DataDir string
	// NoSync skips fsync of the raft log (benchmarks only).
	NoSync bool
	// Halt stops the node on a storage fault: a failed write, a damaged
	// read. It may return (tests), and may be called from raft's
	// goroutines.
	Halt func(error)
	// Logger receives this package's own lines; RaftLogger is raft's
	// logger for the snapshot store.
	Logger     *slog.Logger
	RaftLogger hclog.Logger
	// Registerer receives hotsplit_log_legacy_entries_read_total.
	Registerer prometheus.Registerer
	// WrapLog puts a store between raft.db and the checksums (the node's
	// tests inject failing or timed writes); nil: none.
	WrapLog func(raft.LogStore) raft.LogStore
}

// Stores are a node's raft stores, each wrapped as docs/design.md#limits-and-bad-input asks: every
// log entry and stable-store value checksummed on write and verified on
// read, and a failed write, a damaged read or a snapshot that cannot be
// written stopping the node in one line (Config.Halt). Safe for concurrent
// use as raft uses them; Close once raft has shut down.
type Stores struct {
	Logs      raft.LogStore
	Stable    raft.StableStore
	Snapshots raft.SnapshotStore
	// Files is the snapshot store under Snapshots (for listing).
	Files *raft.FileSnapshotStore

	bolt   *raftboltdb.BoltStore
	legacy atomic.Uint64 // legacy entries read (no checksum, below checksummed_from)
}

// Open opens raft.db (the log and the stable store) defensively and
// wraps it: checksums under the fatal-on-write wrappers, the jepsen disk
// seam (if built in) under the checksums. It converts a data dir of an
// earlier build once (migrateStable), removes unfinished snapshots an
// earlier run left, and opens the snapshot store. It does not judge the
// data dir: CheckClusterVersion and CheckSnapshotCoverage do, once any
// recovery has seeded it.
func Open(cfg Config) (_ *Stores, err error) {
	path := filepath.Join(cfg.DataDir, "raft.db")
	bolt, err := openBoltStore(path, cfg.NoSync)
	if err != nil {
		return nil, err
	}
	st := &Stores{bolt: bolt}
	defer func() {
		if err != nil {
			bolt.Close()
		}
	}()
	base := wrapDiskLog(cfg.ID, bolt)
	if cfg.WrapLog != nil {
		base = cfg.WrapLog(base)
	}
	checked := &checksumLogStore{inner: base, path: path, halt: cfg.Halt, legacy: &st.legacy}
	sealed := &checksumStableStore{inner: bolt, path: path, halt: cfg.Halt}
	if checked.from, err = migrateStable(bolt, sealed, checked); err != nil {
		return nil, fmt.Errorf("raft stable store %s: %w", path, err)
	}
	st.Logs = fatalLogStore{LogStore: checked, path: path, halt: cfg.Halt}
	st.Stable = fatalStableStore{StableStore: sealed, path: path, halt: cfg.Halt}
	if err := removeStaleSnapshotTemps(cfg.DataDir, cfg.Logger); err != nil {
		return nil, err
	}
	if st.Files, err = raft.NewFileSnapshotStoreWithLogger(cfg.DataDir, snapshotsRetained, cfg.RaftLogger); err != nil {
		return nil, fmt.Errorf("open snapshot store in %s: %w", cfg.DataDir, err)
	}
	st.Snapshots = fatalSnapshotStore{SnapshotStore: wrapDiskSnapshots(cfg.ID, st.Files), dir: filepath.Join(cfg.DataDir, "snapshots"), halt: cfg.Halt}
	if cfg.Registerer != nil {
		cfg.Registerer.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hotsplit_log_legacy_entries_read_total", Help: "Raft log entries read without a checksum because an earlier build wrote them (below checksummed_from)."},
			func() float64 { return float64(st.legacy.Load()) }))
	}
	return st, nil
}

// LegacyEntries counts the log entries read without a checksum (written
// before this build first opened the data dir).
func (s *Stores) LegacyEntries() uint64 { return s.legacy.Load() }

// Close closes raft.db.
func (s *Stores) Close() error { return s.bolt.Close() }
