package node

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// fatalLogStore and fatalStableStore stop the process (through halt) when a
// write fails. A node that cannot persist must not keep serving: raft would
// otherwise go on answering from memory with a log that disagrees with its
// disk (SPEC §12). Reads pass their errors through: raft handles those.
type fatalLogStore struct {
	raft.LogStore
	halt func(error)
}

func (s fatalLogStore) StoreLog(l *raft.Log) error {
	if err := s.LogStore.StoreLog(l); err != nil {
		s.halt(fmt.Errorf("raft log store: write of index %d failed: %w", l.Index, err))
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
		s.halt(fmt.Errorf("raft log store: write of %d entries from index %d failed: %w", len(logs), first, err))
		return err
	}
	return nil
}

func (s fatalLogStore) DeleteRange(lo, hi uint64) error {
	if err := s.LogStore.DeleteRange(lo, hi); err != nil {
		s.halt(fmt.Errorf("raft log store: delete of [%d, %d] failed: %w", lo, hi, err))
		return err
	}
	return nil
}

type fatalStableStore struct {
	raft.StableStore
	halt func(error)
}

func (s fatalStableStore) Set(key, val []byte) error {
	if err := s.StableStore.Set(key, val); err != nil {
		s.halt(fmt.Errorf("raft stable store: write of %q failed: %w", key, err))
		return err
	}
	return nil
}

func (s fatalStableStore) SetUint64(key []byte, val uint64) error {
	if err := s.StableStore.SetUint64(key, val); err != nil {
		s.halt(fmt.Errorf("raft stable store: write of %q failed: %w", key, err))
		return err
	}
	return nil
}
