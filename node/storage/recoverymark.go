package storage

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// RecoveryFile records in a data dir that a recovery flag
// (--forceNewCluster, --restoreSnapshot) ran on it. The flags are one-shot:
// a node restarted with the flag still set would fork yet another cluster
// (a new id, itself the only voter) out from under the members that joined
// the recovered one, and their removal checks would then see a leader whose
// configuration no longer lists them. So a start with a recovery flag on a
// data dir holding this file is refused, naming the flag to drop.
const RecoveryFile = "recovered"

// Recovery flag names as an operator types them.
const (
	FlagForceNewCluster = "--forceNewCluster"
	FlagRestoreSnapshot = "--restoreSnapshot"
)

// ErrRecoveryRan: a recovery flag is set on a data dir where a recovery
// already ran.
var ErrRecoveryRan = errors.New("a recovery flag already ran here")

// RecoveryMark is the content of RecoveryFile (JSON): what ran, when, and
// the cluster it made.
type RecoveryMark struct {
	Flag              string    `json:"flag"`
	ClusterID         string    `json:"cluster_id"`
	PreviousClusterID string    `json:"previous_cluster_id,omitempty"`
	Index             uint64    `json:"index"`
	At                time.Time `json:"at"`
	// Backup is the file --restoreSnapshot seeded from.
	Backup string `json:"backup,omitempty"`
}

// ReadRecoveryMark returns the data dir's recovery mark, nil if none.
func ReadRecoveryMark(dataDir string) (*RecoveryMark, error) {
	path := filepath.Join(dataDir, RecoveryFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dataDir, err)
	}
	var m RecoveryMark
	if err := json.Unmarshal(b, &m); err != nil || m.Flag == "" {
		return nil, fmt.Errorf("data dir %s: %s is not a recovery mark (%v): move it aside only if no recovery ran here", dataDir, path, err)
	}
	return &m, nil
}

// CheckRecoveryOnce refuses a recovery flag (FlagForceNewCluster,
// FlagRestoreSnapshot; "" for none) on a data dir where a recovery already
// ran, in one line naming the flag to drop. A data dir that must be
// recovered again (another quorum loss, later) needs its mark deleted
// first: a deliberate act, never a leftover flag.
func CheckRecoveryOnce(dataDir, flag string) error {
	if flag == "" {
		return nil
	}
	m, err := ReadRecoveryMark(dataDir)
	if err != nil || m == nil {
		return err
	}
	return fmt.Errorf("data dir %s: %w: %s ran here at %s (it made cluster %s); drop %s to restart this node "+
		"(to recover this data dir again after another quorum loss, delete %s first)",
		dataDir, ErrRecoveryRan, m.Flag, m.At.UTC().Format(time.RFC3339), m.ClusterID, flag, filepath.Join(dataDir, RecoveryFile))
}

// WriteRecoveryMark records a recovery that succeeded: written to a
// temporary file, synced and renamed, so the mark is whole or absent.
func WriteRecoveryMark(dataDir string, m RecoveryMark) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("recovery: encode the recovery mark: %w", err)
	}
	if err := writeFileAtomic(dataDir, RecoveryFile, append(b, '\n')); err != nil {
		return fmt.Errorf("recovery: %s ran, but recording it failed (drop %s before the next start): %w", m.Flag, m.Flag, err)
	}
	return nil
}

// writeFileAtomic writes name in dir through a synced temporary file and a
// rename, then syncs dir, so a crash leaves the old file or the new one.
func writeFileAtomic(dir, name string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o640); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
