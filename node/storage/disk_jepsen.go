//go:build jepsen

package storage

import (
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/raft"
)

// The disk-full seam: once armed, log-store and snapshot-sink writes of a
// node draw on a byte budget and fail with ENOSPC when it runs out, as a
// full disk would (docs/design.md#limits-and-bad-input's fail-stop must then hold). Budgets are per
// node id, so an in-process test can fill one node's disk of several.

// diskBudgets maps node id -> *atomic.Int64: bytes left; negative means
// unlimited (not armed).
var diskBudgets sync.Map

func diskBudget(id string) *atomic.Int64 {
	b, ok := diskBudgets.Load(id)
	if !ok {
		fresh := &atomic.Int64{}
		fresh.Store(-1)
		b, _ = diskBudgets.LoadOrStore(id, fresh)
	}
	return b.(*atomic.Int64)
}

// SetDiskFullAfter arms (n >= 0) or disarms (n < 0) node id's disk: its
// log and snapshot writes fail with ENOSPC once n more bytes were written.
func SetDiskFullAfter(id string, n int64) { diskBudget(id).Store(n) }

// spendDisk takes n bytes from the budget, or fails with ENOSPC.
func spendDisk(b *atomic.Int64, n int) error {
	for {
		left := b.Load()
		if left < 0 {
			return nil
		}
		if int64(n) > left {
			return fmt.Errorf("jepsen disk seam: %w", syscall.ENOSPC)
		}
		if b.CompareAndSwap(left, left-int64(n)) {
			return nil
		}
	}
}

type diskLog struct {
	raft.LogStore
	budget *atomic.Int64
}

func wrapDiskLog(id string, s raft.LogStore) raft.LogStore {
	return diskLog{LogStore: s, budget: diskBudget(id)}
}

func (d diskLog) StoreLog(l *raft.Log) error { return d.StoreLogs([]*raft.Log{l}) }

func (d diskLog) StoreLogs(logs []*raft.Log) error {
	size := 0
	for _, l := range logs {
		size += len(l.Data) + len(l.Extensions) + 32 // plus key and framing
	}
	if err := spendDisk(d.budget, size); err != nil {
		return err
	}
	return d.LogStore.StoreLogs(logs)
}

type diskSnapshots struct {
	raft.SnapshotStore
	budget *atomic.Int64
}

func wrapDiskSnapshots(id string, s raft.SnapshotStore) raft.SnapshotStore {
	return diskSnapshots{SnapshotStore: s, budget: diskBudget(id)}
}

func (d diskSnapshots) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := d.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return diskSink{SnapshotSink: sink, budget: d.budget}, nil
}

type diskSink struct {
	raft.SnapshotSink
	budget *atomic.Int64
}

func (d diskSink) Write(p []byte) (int, error) {
	if err := spendDisk(d.budget, len(p)); err != nil {
		return 0, err
	}
	return d.SnapshotSink.Write(p)
}
