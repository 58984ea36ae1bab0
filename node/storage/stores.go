package storage

import (
	"fmt"
	"path/filepath"

	"github.com/hashicorp/raft"
)

// fatalLogStore and fatalStableStore stop the process (through halt) when a
// write fails. A node that cannot persist must not keep serving: raft would
// otherwise go on answering from memory with a log that disagrees with its
// disk (docs/design.md#limits-and-bad-input). Reads pass their errors through: raft handles those.
type fatalLogStore struct {
	raft.LogStore
	path string
	halt func(error)
}

func (s fatalLogStore) StoreLog(l *raft.Log) error {
	if err := s.LogStore.StoreLog(l); err != nil {
		s.halt(fmt.Errorf("raft log %s: write of index %d failed: %w", s.path, l.Index, err))
		return err
	}
	return nil
}

func (s fatalLogStore) StoreLogs(logs []*raft.Log) error {
	if err := s.LogStore.StoreLogs(logs); err != nil {
		first := uint64(0)
		if len(logs) > 0 {
			first = logs[0].Index
		}
		s.halt(fmt.Errorf("raft log %s: write of %d entries from index %d failed: %w", s.path, len(logs), first, err))
		return err
	}
	return nil
}

func (s fatalLogStore) DeleteRange(lo, hi uint64) error {
	if err := s.LogStore.DeleteRange(lo, hi); err != nil {
		s.halt(fmt.Errorf("raft log %s: delete of [%d, %d] failed: %w", s.path, lo, hi, err))
		return err
	}
	return nil
}

type fatalStableStore struct {
	raft.StableStore
	path string
	halt func(error)
}

func (s fatalStableStore) Set(key, val []byte) error {
	if err := s.StableStore.Set(key, val); err != nil {
		s.halt(fmt.Errorf("raft stable store %s: write of %q failed: %w", s.path, key, err))
		return err
	}
	return nil
}

func (s fatalStableStore) SetUint64(key []byte, val uint64) error {
	if err := s.StableStore.SetUint64(key, val); err != nil {
		s.halt(fmt.Errorf("raft stable store %s: write of %q failed: %w", s.path, key, err))
		return err
	}
	return nil
}

// fatalSnapshotStore stops the node (through halt) when a snapshot cannot
// be created or written — a full disk, most likely. Raft would only log it
// and retry later, while the log it can no longer compact keeps growing on
// the same disk; stopping says why in one line instead.
type fatalSnapshotStore struct {
	raft.SnapshotStore
	dir  string
	halt func(error)
}

func (s fatalSnapshotStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		s.halt(fmt.Errorf("snapshot store %s: create of a snapshot at index %d failed: %w", s.dir, index, err))
		return nil, err
	}
	return fatalSink{SnapshotSink: sink, store: s}, nil
}

type fatalSink struct {
	raft.SnapshotSink
	store fatalSnapshotStore
}

func (k fatalSink) Write(p []byte) (int, error) {
	n, err := k.SnapshotSink.Write(p)
	if err != nil {
		k.store.halt(fmt.Errorf("snapshot %s: write failed: %w", filepath.Join(k.store.dir, k.ID()+".tmp"), err))
	}
	return n, err
}

func (k fatalSink) Close() error {
	if err := k.SnapshotSink.Close(); err != nil {
		k.store.halt(fmt.Errorf("snapshot %s: close failed: %w", filepath.Join(k.store.dir, k.ID()+".tmp"), err))
		return err
	}
	return nil
}
