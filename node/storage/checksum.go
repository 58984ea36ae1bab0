package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
)

// ErrCorrupt marks a storage fault found on read: an entry or value whose
// checksum does not match, that does not decode, that is missing inside the
// log, or a bolt file whose pages panic the reader. The node stops on it
// with one line naming the file and the cause (docs/design.md#limits-and-bad-input).
var ErrCorrupt = errors.New("corrupt storage")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// entryMagic starts the Extensions of every log entry this build writes: a
// 3-byte tag, then the CRC-32C (big endian) of the entry's Index, Term,
// Type and Data, then the Extensions the entry had (raft and hotsplit set
// none today). The checksum lives in Extensions, not in Data, so that raft,
// the jepsen log reader and an older binary after a downgrade all read Data
// unchanged.
var entryMagic = []byte{'h', 's', 1}

const entryTagLen = 3 + 4

// entryChecksum is the CRC-32C a log entry carries: over Index and Term (8
// bytes each, big endian), Type (one byte) and Data. The jepsen checker
// recomputes it independently.
func entryChecksum(index, term uint64, typ raft.LogType, data []byte) uint32 {
	var hdr [17]byte
	binary.BigEndian.PutUint64(hdr[:8], index)
	binary.BigEndian.PutUint64(hdr[8:16], term)
	hdr[16] = byte(typ)
	return crc32.Update(crcBytes(0, hdr[:]), castagnoli, data)
}

// crcBytes is crc32.Update(crc, castagnoli, p) for a few bytes, written out
// so that a header on the stack does not escape to the heap on every read.
func crcBytes(crc uint32, p []byte) uint32 {
	crc = ^crc
	for _, b := range p {
		crc = castagnoli[byte(crc)^b] ^ crc>>8
	}
	return ^crc
}

// splitEntryTag returns the checksum and the original Extensions of an
// entry written by this build; ok is false for an entry without the tag.
func splitEntryTag(ext []byte) (sum uint32, rest []byte, ok bool) {
	if len(ext) < entryTagLen || string(ext[:3]) != string(entryMagic) {
		return 0, ext, false
	}
	return binary.BigEndian.Uint32(ext[3:entryTagLen]), ext[entryTagLen:], true
}

// checksumLogStore checksums every entry it stores and verifies every entry
// it reads. Entries below from (the log's end when this build first opened
// the data dir, kept in the stable store) may be legacy entries without a
// checksum: they are accepted and counted. Any other bad read — checksum
// mismatch, a missing checksum at or above from, an entry that does not
// decode, an entry missing inside [FirstIndex, LastIndex], a bbolt panic —
// halts the node: raft would panic on most of them, or apply a changed
// entry. A not-found outside the log's range passes through: raft uses it
// to decide to send a snapshot.
//
// It never modifies the *raft.Log values passed to StoreLogs (the leader
// applies those very objects): it stores tagged copies. Safe for concurrent
// use as far as the store under it is.
type checksumLogStore struct {
	inner  raft.LogStore
	path   string
	from   uint64
	halt   func(error)
	legacy *atomic.Uint64 // legacy entries read (no checksum, below from)
}

// fail halts on a storage fault and returns it (a test's halt returns).
func (s *checksumLogStore) fail(format string, args ...any) error {
	err := fmt.Errorf("%w: raft log %s: %s", ErrCorrupt, s.path, fmt.Sprintf(format, args...))
	s.halt(err)
	return err
}

// guard turns a bbolt panic (or, with SetPanicOnFault, a memory fault on
// its mmap) during op into a halt. op and index only name the operation;
// they are formatted on a panic alone, so the read path does not allocate.
func (s *checksumLogStore) guard(op string, index uint64, err *error) {
	if r := recover(); r != nil {
		*err = s.fail("%s %d: the bolt file is damaged: %v", op, index, r)
	}
}

func (s *checksumLogStore) FirstIndex() (idx uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard("first index", 0, &err)
	return s.inner.FirstIndex()
}

func (s *checksumLogStore) LastIndex() (idx uint64, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard("last index", 0, &err)
	return s.inner.LastIndex()
}

func (s *checksumLogStore) GetLog(index uint64, l *raft.Log) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard("read of entry", index, &err)
	if err := s.inner.GetLog(index, l); err != nil {
		if !errors.Is(err, raft.ErrLogNotFound) {
			return s.fail("entry %d does not decode: %v", index, err)
		}
		first, ferr := s.inner.FirstIndex()
		last, lerr := s.inner.LastIndex()
		if ferr == nil && lerr == nil && last > 0 && first <= index && index <= last {
			return s.fail("entry %d is missing inside the log [%d, %d]", index, first, last)
		}
		return err
	}
	if l.Index != index {
		return s.fail("entry %d holds index %d", index, l.Index)
	}
	sum, rest, ok := splitEntryTag(l.Extensions)
	if !ok {
		if index >= s.from {
			return s.fail("entry %d has no checksum (every entry from %d on carries one)", index, s.from)
		}
		s.legacy.Add(1)
		return nil
	}
	if got := entryChecksum(l.Index, l.Term, l.Type, l.Data); got != sum {
		return s.fail("entry %d: checksum mismatch (stored %08x, computed %08x)", index, sum, got)
	}
	if len(rest) == 0 {
		rest = nil
	}
	l.Extensions = rest
	return nil
}

func (s *checksumLogStore) StoreLog(l *raft.Log) error {
	return s.StoreLogs([]*raft.Log{l})
}

func (s *checksumLogStore) StoreLogs(logs []*raft.Log) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard("write of entries from", firstIndex(logs), &err)
	tagged := make([]raft.Log, len(logs))
	ptrs := make([]*raft.Log, len(logs))
	for i, l := range logs {
		tagged[i] = *l
		// A tag already present (an entry read from a downgraded node's
		// store and replicated) is replaced, never stacked.
		_, rest, _ := splitEntryTag(l.Extensions)
		ext := make([]byte, 0, entryTagLen+len(rest))
		ext = append(ext, entryMagic...)
		ext = binary.BigEndian.AppendUint32(ext, entryChecksum(l.Index, l.Term, l.Type, l.Data))
		tagged[i].Extensions = append(ext, rest...)
		ptrs[i] = &tagged[i]
	}
	return s.inner.StoreLogs(ptrs)
}

func firstIndex(logs []*raft.Log) uint64 {
	if len(logs) == 0 {
		return 0
	}
	return logs[0].Index
}

func (s *checksumLogStore) DeleteRange(lo, hi uint64) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard("delete of entries from", lo, &err)
	return s.inner.DeleteRange(lo, hi)
}

// checksumStableStore keeps every stable-store value as value + CRC-32C of
// key and value under the same key, and verifies it on every read; a
// mismatch is an error naming the file and the key (raft then refuses to
// start, in one line).
// Values written before this build (legacy, without CRC) are converted
// once, by migrateStable, when the data dir is first opened by it.
type checksumStableStore struct {
	inner raft.StableStore
	path  string
	halt  func(error)
}

func stableCRC(key, val []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, val)
}

func sealValue(key, val []byte) []byte {
	out := make([]byte, 0, len(val)+4)
	out = append(out, val...)
	return binary.BigEndian.AppendUint32(out, stableCRC(key, val))
}

// openValue verifies a sealed value and returns it without its CRC.
func openValue(key, sealed []byte) ([]byte, bool) {
	if len(sealed) < 4 {
		return nil, false
	}
	val, sum := sealed[:len(sealed)-4], binary.BigEndian.Uint32(sealed[len(sealed)-4:])
	return val, stableCRC(key, val) == sum
}

// fail reports a bad value. Raft reads the stable store only while it
// starts (NewRaft), where an error refuses the start in one line, so a read
// fault is returned rather than halted on; a panic may strike a write at
// any time and halts.
func (s *checksumStableStore) fail(key []byte, format string, args ...any) error {
	return fmt.Errorf("%w: raft stable store %s: key %q: %s", ErrCorrupt, s.path, key, fmt.Sprintf(format, args...))
}

func (s *checksumStableStore) guard(key []byte, err *error) {
	if r := recover(); r != nil {
		*err = s.fail(key, "the bolt file is damaged: %v", r)
		s.halt(*err)
	}
}

func (s *checksumStableStore) Set(key, val []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(key, &err)
	return s.inner.Set(key, sealValue(key, val))
}

// Get returns the value without its CRC; a missing key passes raft-boltdb's
// error through unchanged (raft compares its text).
func (s *checksumStableStore) Get(key []byte) (val []byte, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer s.guard(key, &err)
	sealed, err := s.inner.Get(key)
	if err != nil {
		return nil, err
	}
	val, ok := openValue(key, sealed)
	if !ok {
		return nil, s.fail(key, "checksum mismatch in a %d-byte value", len(sealed))
	}
	return val, nil
}

func (s *checksumStableStore) SetUint64(key []byte, val uint64) error {
	return s.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

func (s *checksumStableStore) GetUint64(key []byte) (uint64, error) {
	val, err := s.Get(key)
	if err != nil {
		return 0, err
	}
	if len(val) != 8 {
		return 0, s.fail(key, "%d bytes where a uint64 belongs", len(val))
	}
	return binary.BigEndian.Uint64(val), nil
}

// checksummedFromKey holds, in the stable store, the first log index this
// build (or a later one) wrote: entries below it may be legacy entries
// without a checksum. Its presence also says that every stable-store value
// carries a CRC.
var checksummedFromKey = []byte("hotsplit_checksummed_from")

// CurrentTermKey is raft's stable-store key of the current term
// (hashicorp/raft does not export it): the checksums seal its value, and
// an inspection reads it without starting raft.
const CurrentTermKey = "CurrentTerm"

// legacyStableKeys are the stable-store keys a data dir of an earlier build
// can hold: raft's own and the applied cluster version (version.go); true
// marks the uint64 ones (8 bytes legacy, 12 sealed).
var legacyStableKeys = []struct {
	key    []byte
	uint64 bool
}{{[]byte(CurrentTermKey), true}, {[]byte("LastVoteTerm"), true}, {[]byte("LastVoteCand"), false}, {ClusterVersionKey, true}}

// migrateStable runs before raft starts. On the first start of this build
// on a data dir it seals the legacy stable-store values with their CRC and
// records checksummed_from = LastIndex + 1; later it reads that back.
// Conversion is idempotent (a value already sealed is left alone), so a
// crash halfway through is repaired by the next start.
func migrateStable(raw raft.StableStore, sealed *checksumStableStore, logs raft.LogStore) (from uint64, err error) {
	if _, err := raw.Get(checksummedFromKey); err == nil {
		return sealed.GetUint64(checksummedFromKey)
	}
	for _, lk := range legacyStableKeys {
		v, err := raw.Get(lk.key)
		if err != nil || len(v) == 0 {
			continue // absent
		}
		if _, ok := openValue(lk.key, v); ok && (!lk.uint64 || len(v) == 12) {
			continue // sealed before a crash cut the migration short
		}
		if err := sealed.Set(lk.key, v); err != nil {
			return 0, err
		}
	}
	last, err := logs.LastIndex()
	if err != nil {
		return 0, err
	}
	from = last + 1
	if err := sealed.SetUint64(checksummedFromKey, from); err != nil {
		return 0, err
	}
	return from, nil
}

// openBoltStore opens raft.db defensively: bbolt panics on some damaged
// files (an invalid freelist page, a page that names another) and may
// fault on a truncated mmap; either becomes an error naming the file.
func openBoltStore(path string, noSync bool) (store *raftboltdb.BoltStore, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			store, err = nil, fmt.Errorf("%w: open %s: the bolt file is damaged: %v", ErrCorrupt, path, r)
		}
	}()
	store, err = raftboltdb.New(raftboltdb.Options{Path: path, NoSync: noSync, BoltOptions: &bbolt.Options{Timeout: 10 * time.Second}})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return store, nil
}
