package node

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/backupfile"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/node/raftobs"
	"github.com/hotsplit/hotsplit/node/storage"
)

// Recovery seeds a node's raft state before it starts, for disaster
// recovery. At most one of RestoreSnapshot and ForceNewCluster may be set.
type Recovery struct {
	// RestoreSnapshot is a backup file (hotsplitctl snapshot save): the
	// node seeds a new single-voter cluster from it in an empty data dir.
	RestoreSnapshot string
	// ForceNewCluster turns the node's own data dir into a new single-voter
	// cluster (raft.RecoverCluster), after a lost quorum: every entry in
	// its log is applied, committed or not, so it serves this survivor's
	// log. Pick the survivor with the highest last index (hotsplitd
	// --inspect).
	ForceNewCluster bool
	// MaxClockOffset is the clock offset between nodes the restored HLC
	// allows for (default: Config.MaxClockOffset, else DefaultMaxClockOffset):
	// the HLC of a restored cluster starts this far above both the backup's
	// ceiling and the restoring node's clock.
	MaxClockOffset time.Duration
}

func (r Recovery) enabled() bool { return r.RestoreSnapshot != "" || r.ForceNewCluster }

// flag names the recovery flag r sets ("" for none).
func (r Recovery) flag() string {
	switch {
	case r.ForceNewCluster:
		return storage.FlagForceNewCluster
	case r.RestoreSnapshot != "":
		return storage.FlagRestoreSnapshot
	}
	return ""
}

// seedRecovery runs the configured recovery flag, if any, on the data
// dir's stores before raft starts: the seeded state becomes the newest
// snapshot, with this node as the only voter.
func (n *Node) seedRecovery(rc *raft.Config, trans raft.Transport) error {
	r := n.cfg.Recovery
	switch {
	case r.RestoreSnapshot != "" && r.ForceNewCluster:
		return errors.New("recovery: --restoreSnapshot and --forceNewCluster exclude each other")
	case r.RestoreSnapshot != "":
		return n.seedFromBackup(r.RestoreSnapshot, trans)
	case r.ForceNewCluster:
		return n.seedFromOwnLog(rc, trans)
	}
	return nil
}

// seedFromBackup is --restoreSnapshot: a new cluster, seeded in an empty
// data dir from a verified backup. Its log says what was seeded from what.
func (n *Node) seedFromBackup(path string, trans raft.Transport) error {
	stores := n.stores
	existing, err := raft.HasExistingState(stores.Logs, stores.Stable, stores.Snapshots)
	if err != nil {
		return fmt.Errorf("recovery: inspect raft state: %w", err)
	}
	if existing {
		return fmt.Errorf("recovery: data dir %s holds raft state: --restoreSnapshot seeds an empty data dir (restore into a new one)", n.cfg.DataDir)
	}
	st, hdr, err := openVerifiedBackup(path)
	if err != nil {
		return err
	}
	seeded, err := n.reseed(st)
	if err != nil {
		return err
	}
	// A new cluster starts its terms afresh: term 1 at the backup's
	// index, so raft's log stays monotonic in term.
	sink, err := stores.Snapshots.Create(raft.SnapshotVersionMax, st.Index(), 1, n.soleVoter(), st.Index(), trans)
	if err != nil {
		return fmt.Errorf("recovery: create snapshot: %w", err)
	}
	if err := fsm.WriteSnapshot(sink, st.Index(), seeded); err != nil {
		sink.Cancel()
		return fmt.Errorf("recovery: write snapshot: %w", err)
	}
	if err := sink.Close(); err != nil {
		return fmt.Errorf("recovery: write snapshot: %w", err)
	}
	if err := n.writeClusterID(seeded.GetClusterId()); err != nil {
		return err
	}
	if err := storage.WriteRecoveryMark(n.cfg.DataDir, storage.RecoveryMark{Flag: storage.FlagRestoreSnapshot, ClusterID: seeded.GetClusterId(), PreviousClusterID: hdr.GetClusterId(),
		Index: st.Index(), At: n.wallNow(), Backup: path}); err != nil {
		return err
	}
	n.log.Warn("seeded a new cluster from a backup (--restoreSnapshot is one-shot: drop it before the next start)", "backup", path, "backup_cluster_id", hdr.GetClusterId(),
		"cluster_id", seeded.GetClusterId(), "index", st.Index(), "backup_state_hash", hex.EncodeToString(hdr.GetStateHash()),
		"catalog_version", st.Catalog().Version(), "ceiling_ms", seeded.GetCeilingMs())
	return nil
}

// seedFromOwnLog is --forceNewCluster: a new cluster, seeded from this
// survivor's own data dir after a lost quorum. Its log says what was
// seeded from what.
func (n *Node) seedFromOwnLog(rc *raft.Config, trans raft.Transport) error {
	stores := n.stores
	existing, err := raft.HasExistingState(stores.Logs, stores.Stable, stores.Snapshots)
	if err != nil {
		return fmt.Errorf("recovery: inspect raft state: %w", err)
	}
	if !existing {
		return fmt.Errorf("recovery: data dir %s holds no raft state: --forceNewCluster recovers a survivor's own data dir", n.cfg.DataDir)
	}
	// RecoverCluster applies the whole log to a fresh FSM and snapshots it
	// with the new configuration; the wrapper reseeds what it snapshots.
	f := &reseedFSM{reseed: n.reseed}
	f.FSM = fsm.New(fsm.Options{Logger: discardLogger(), Halt: func(err error) {
		if f.err == nil {
			f.err = fmt.Errorf("recovery: replaying the log: %w", err)
		}
	}})
	last, err := lastIndex(stores.Logs, stores.Snapshots)
	if err != nil {
		return err
	}
	f.index = last
	conf := *rc
	conf.Logger = raftobs.NewLogger(n.log)
	if err := raft.RecoverCluster(&conf, f, stores.Logs, stores.Stable, stores.Snapshots, trans, n.soleVoter()); err != nil {
		return fmt.Errorf("recovery: force new cluster: %w", err)
	}
	if f.err != nil {
		return f.err
	}
	if err := n.writeClusterID(f.newID); err != nil {
		return err
	}
	if err := storage.WriteRecoveryMark(n.cfg.DataDir, storage.RecoveryMark{Flag: storage.FlagForceNewCluster, ClusterID: f.newID, PreviousClusterID: f.oldID, Index: last, At: n.wallNow()}); err != nil {
		return err
	}
	n.log.Warn("recovered a new single-voter cluster from this node's own log (every entry in it applied, committed or not; --forceNewCluster is one-shot: drop it before the next start)",
		"old_cluster_id", f.oldID, "cluster_id", f.newID, "index", last, "catalog_version", f.catalogVersion)
	return nil
}

// openVerifiedBackup reads a backup and checks it end to end: the file's
// checksum, the snapshot's invariants, its index and its state hash against
// the header.
func openVerifiedBackup(path string) (*fsm.State, *api.SnapshotHeader, error) {
	b, err := backupfile.Open(path)
	if err != nil {
		return nil, nil, fmt.Errorf("recovery: %w", err)
	}
	defer b.Close()
	st, err := fsm.ReadState(b.Payload())
	if err != nil {
		return nil, nil, fmt.Errorf("recovery: backup %s: %w", path, err)
	}
	hdr := b.Header
	if h := st.Hash(); !bytes.Equal(h[:], hdr.GetStateHash()) {
		return nil, nil, fmt.Errorf("recovery: backup %s: the state hashes to %x, its header says %x", path, h, hdr.GetStateHash())
	}
	if st.Index() != hdr.GetIndex() || st.ClusterID() != hdr.GetClusterId() {
		return nil, nil, fmt.Errorf("recovery: backup %s: state at index %d of cluster %q, header says %d of %q", path, st.Index(), st.ClusterID(), hdr.GetIndex(), hdr.GetClusterId())
	}
	return st, hdr, nil
}

// reseed gives st a new cluster id, this node as the only member, and an
// HLC start of max(restored ceiling, now) + the recovery's clock offset +
// the fence window, above anything the old cluster can have issued (it
// issued below its ceiling, and below its clock plus a window after the
// backup was taken). Now is the node's clock, the one its HLC will read.
func (n *Node) reseed(st *fsm.State) (*api.StateSnapshot, error) {
	window := n.cfg.CeilingWindow
	if window <= 0 {
		window = time.Second
	}
	offset := n.cfg.recoveryClockOffset()
	start := max(st.CeilingMs(), n.clock.PhysicalNow()) + uint64(offset.Milliseconds()) + uint64(window.Milliseconds())
	seeded, err := fsm.Reseed(st, newClusterID(), n.selfMember(), start)
	if err != nil {
		return nil, fmt.Errorf("recovery: %w", err)
	}
	return seeded, nil
}

// wallNow is the node's clock as a time, for the recovery mark.
func (n *Node) wallNow() time.Time { return time.UnixMilli(int64(n.clock.PhysicalNow())) }

// reseedFSM is the FSM raft.RecoverCluster replays the survivor's log into;
// its snapshot is the reseeded state at the log's last index.
type reseedFSM struct {
	*fsm.FSM
	reseed func(*fsm.State) (*api.StateSnapshot, error)
	index  uint64

	err            error
	oldID, newID   string
	catalogVersion uint64
}

func (f *reseedFSM) Snapshot() (raft.FSMSnapshot, error) {
	if f.err != nil {
		return nil, f.err // the replay halted: seed nothing
	}
	st := f.State()
	seeded, err := f.reseed(st)
	if err != nil {
		f.err = err
		return nil, err
	}
	f.oldID, f.newID, f.catalogVersion = st.ClusterID(), seeded.GetClusterId(), st.Catalog().Version()
	return &seededSnapshot{index: f.index, state: seeded}, nil
}

type seededSnapshot struct {
	index uint64
	state *api.StateSnapshot
}

func (s *seededSnapshot) Persist(sink raft.SnapshotSink) error {
	if err := fsm.WriteSnapshot(sink, s.index, s.state); err != nil {
		sink.Cancel()
		return err
	}
	return nil // RecoverCluster closes the sink
}

func (s *seededSnapshot) Release() {}

// lastIndex is the highest index in the log or the newest snapshot.
func lastIndex(logs raft.LogStore, snaps raft.SnapshotStore) (uint64, error) {
	last, err := logs.LastIndex()
	if err != nil {
		return 0, fmt.Errorf("recovery: last log index: %w", err)
	}
	if list, err := snaps.List(); err == nil && len(list) > 0 {
		last = max(last, list[0].Index)
	}
	return last, nil
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// Inspection is what `hotsplitd --inspect DATA_DIR` prints: enough to pick
// the best survivor for --forceNewCluster (the highest last index, then the
// highest term) without starting anything.
type Inspection struct {
	DataDir        string
	NodeID         string
	ClusterID      string
	LastIndex      uint64
	LastTerm       uint64
	CurrentTerm    uint64
	SnapshotIndex  uint64
	SnapshotTerm   uint64
	ClusterVersion uint64
	Configuration  []raft.Server
	Removed        string
	// Recovered says which recovery flag ran on the data dir, when, and
	// the cluster it made ("" if none).
	Recovered string
}

// Inspect reads a data dir without starting raft: raft.db is opened read
// only (it waits at most a second for a running node's lock, so stop the
// node first).
func Inspect(dataDir string) (*Inspection, error) {
	if _, err := os.Stat(filepath.Join(dataDir, "raft.db")); err != nil {
		return nil, fmt.Errorf("inspect %s: %w", dataDir, err)
	}
	in := &Inspection{DataDir: dataDir}
	if b, err := os.ReadFile(filepath.Join(dataDir, clusterIDFile)); err == nil {
		in.ClusterID = string(bytes.TrimSpace(b))
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, removedFile)); err == nil {
		in.Removed = string(bytes.TrimSpace(b))
	}
	if m, err := storage.ReadRecoveryMark(dataDir); err != nil {
		in.Recovered = err.Error()
	} else if m != nil {
		in.Recovered = fmt.Sprintf("%s at %s: cluster %s at index %d", m.Flag, m.At.UTC().Format(time.RFC3339), m.ClusterID, m.Index)
	}
	store, err := openStoreForInspection(dataDir)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	if in.LastIndex, err = store.LastIndex(); err != nil {
		return nil, fmt.Errorf("inspect %s: %w", dataDir, err)
	}
	if in.LastIndex > 0 {
		var l raft.Log
		if err := store.GetLog(in.LastIndex, &l); err == nil {
			in.LastTerm = l.Term
		}
	}
	in.CurrentTerm, _ = store.GetUint64([]byte(storage.CurrentTermKey))
	in.ClusterVersion, _ = store.GetUint64(storage.ClusterVersionKey)
	snaps, err := storage.QuietSnapshots(dataDir)
	if err == nil {
		if list, err := snaps.List(); err == nil && len(list) > 0 {
			in.SnapshotIndex, in.SnapshotTerm = list[0].Index, list[0].Term
			in.Configuration = list[0].Configuration.Servers
		}
	}
	if in.SnapshotIndex > in.LastIndex {
		in.LastIndex, in.LastTerm = in.SnapshotIndex, in.SnapshotTerm
	}
	// The latest configuration entry in the log wins over the snapshot's.
	first, _ := store.FirstIndex()
	for i := in.LastIndex; i >= first && i > 0 && i > in.SnapshotIndex; i-- {
		var l raft.Log
		if store.GetLog(i, &l) != nil {
			break
		}
		if l.Type == raft.LogConfiguration {
			in.Configuration = raft.DecodeConfiguration(l.Data).Servers
			break
		}
	}
	return in, nil
}

func openStoreForInspection(dataDir string) (*raftboltdb.BoltStore, error) {
	s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dataDir, "raft.db"), BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: time.Second}})
	if err != nil {
		return nil, fmt.Errorf("inspect %s: open raft.db (is the node still running?): %w", dataDir, err)
	}
	return s, nil
}

// writeClusterID records the seeded cluster's id in the data dir, so the
// node announces itself to the new cluster, not the old one.
func (n *Node) writeClusterID(id string) error {
	if err := os.WriteFile(filepath.Join(n.cfg.DataDir, clusterIDFile), []byte(id+"\n"), 0o640); err != nil {
		return fmt.Errorf("recovery: record the cluster id: %w", err)
	}
	return nil
}
