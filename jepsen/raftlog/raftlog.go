// Package raftlog reads the raft log of a stopped hotsplitd node
// (<dataDir>/raft.db, hashicorp/raft-boltdb v2) and decodes every command
// entry as an api.Command with the protobuf runtime alone.
//
// It is the jepsen checker's ground truth, so it shares no code with the
// FSM: a bug in the FSM's decoding or in its rules cannot hide itself by
// also shaping what the checker reads. It opens the database read-only and
// must only be used on a node that has stopped (bbolt would wait for the
// running node's lock; Read gives up after a short timeout instead).
package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// ErrCompacted: the log no longer starts at index 1 (a snapshot truncated
// it), so it cannot be the complete ground truth. The jepsen cluster runs
// with snapshot thresholds far above a scenario's entry count.
var ErrCompacted = errors.New("raft log compacted: it does not start at index 1")

// ErrUnknownField: a command entry holds a field this build's API does not
// know. The checker cannot interpret such an entry, so it refuses the log.
var ErrUnknownField = errors.New("unknown field in command entry")

// Entry is one raft log entry. Command is set for LogCommand entries only.
type Entry struct {
	Index   uint64
	Term    uint64
	Type    raft.LogType
	Data    []byte
	Command *api.Command
	// Extensions as stored: hotsplit's per-entry checksum (see Checksum).
	Extensions []byte
	// AppendedAt is the leader's wall clock when it appended the entry
	// (never shifted by the jepsen clock seam).
	AppendedAt time.Time
}

// Checksum returns the CRC-32C an entry's Extensions carry (a 3-byte tag
// "hs\x01", then the sum, big endian) and the one its Index, Term, Type
// and Data give; ok is false when the entry carries none. It is computed
// here independently of the node's store, so a bug there cannot hide.
func (e Entry) Checksum() (stored, computed uint32, ok bool) {
	if len(e.Extensions) < 7 || string(e.Extensions[:3]) != "hs\x01" {
		return 0, 0, false
	}
	var hdr [17]byte
	binary.BigEndian.PutUint64(hdr[:8], e.Index)
	binary.BigEndian.PutUint64(hdr[8:16], e.Term)
	hdr[16] = byte(e.Type)
	table := crc32.MakeTable(crc32.Castagnoli)
	return binary.BigEndian.Uint32(e.Extensions[3:7]), crc32.Update(crc32.Update(0, table, hdr[:]), table, e.Data), true
}

// ReadAny is Read for a log that may be damaged (a bit-flip victim's): it
// returns every entry it can decode, in index order, without refusing a
// compacted log or an undecodable command.
func ReadAny(dbPath string) ([]Entry, error) {
	var out []Entry
	err := scan(dbPath, func(first, _ uint64) error { return nil }, func(i uint64, l *raft.Log, err error) error {
		if err == nil {
			out = append(out, entryOf(l))
		}
		return nil
	})
	return out, err
}

// Read returns every entry of the raft log in dbPath, in index order.
func Read(dbPath string) ([]Entry, error) {
	var out []Entry
	err := scan(dbPath, func(first, last uint64) error {
		if first != 1 {
			return fmt.Errorf("%s: %w (first index %d)", dbPath, ErrCompacted, first)
		}
		out = make([]Entry, 0, last)
		return nil
	}, func(i uint64, l *raft.Log, err error) error {
		if err != nil {
			return fmt.Errorf("%s: entry %d: %w", dbPath, i, err)
		}
		e := entryOf(l)
		if l.Type == raft.LogCommand {
			if e.Command, err = DecodeCommand(l.Data); err != nil {
				return fmt.Errorf("%s: entry %d: %w", dbPath, i, err)
			}
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

func entryOf(l *raft.Log) Entry {
	return Entry{Index: l.Index, Term: l.Term, Type: l.Type, Data: l.Data, Extensions: l.Extensions, AppendedAt: l.AppendedAt}
}

// scan opens dbPath read-only, tells span the log's first and last index
// (only when it holds entries), then hands each index's entry (or its read
// error) to each, stopping at the first error either returns.
func scan(dbPath string, span func(first, last uint64) error, each func(i uint64, l *raft.Log, err error) error) error {
	store, err := raftboltdb.New(raftboltdb.Options{
		Path:        dbPath,
		BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: 2 * time.Second},
	})
	if err != nil {
		return fmt.Errorf("open %s read-only: %w", dbPath, err)
	}
	defer store.Close()
	first, err := store.FirstIndex()
	if err != nil {
		return fmt.Errorf("%s: first index: %w", dbPath, err)
	}
	last, err := store.LastIndex()
	if err != nil {
		return fmt.Errorf("%s: last index: %w", dbPath, err)
	}
	if last == 0 {
		return nil
	}
	if err := span(first, last); err != nil {
		return err
	}
	for i := first; i <= last; i++ {
		var l raft.Log
		err := store.GetLog(i, &l)
		if err := each(i, &l, err); err != nil {
			return err
		}
	}
	return nil
}

// DecodeCommand decodes one command entry. It refuses unknown fields at any
// depth (ErrUnknownField) and an entry without a command body.
func DecodeCommand(data []byte) (*api.Command, error) {
	cmd := &api.Command{}
	if err := proto.Unmarshal(data, cmd); err != nil {
		return nil, fmt.Errorf("decode command: %w", err)
	}
	if path := firstUnknown(cmd.ProtoReflect(), "command"); path != "" {
		return nil, fmt.Errorf("%w at %s", ErrUnknownField, path)
	}
	if cmd.GetBody() == nil {
		return nil, errors.New("decode command: no command body")
	}
	return cmd, nil
}

// firstUnknown returns the path of the first message holding unknown
// fields, or "".
func firstUnknown(m protoreflect.Message, path string) string {
	if len(m.GetUnknown()) > 0 {
		return path
	}
	found := ""
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			// The API has no message-valued maps.
			return true
		}
		p := path + "." + string(fd.Name())
		if fd.IsList() {
			for i := 0; i < v.List().Len() && found == ""; i++ {
				found = firstUnknown(v.List().Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		} else {
			found = firstUnknown(v.Message(), p)
		}
		return found == ""
	})
	return found
}

// CheckAgreement verifies that every log holds the same entries (term, type
// and bytes) at indexes 1..committed, and that each is that long. Entries
// past committed may differ: they were never acknowledged.
func CheckAgreement(logs map[string][]Entry, committed uint64) error {
	var ref []Entry
	var refName string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(logs)) {
		l := logs[name]
		if uint64(len(l)) < committed {
			errs = append(errs, fmt.Errorf("node %s: log ends at index %d, below the committed index %d", name, len(l), committed))
			continue
		}
		if ref == nil {
			ref, refName = l, name
			continue
		}
		for i := uint64(0); i < committed; i++ {
			a, b := ref[i], l[i]
			if a.Term != b.Term || a.Type != b.Type || !bytes.Equal(a.Data, b.Data) {
				errs = append(errs, fmt.Errorf("committed entry %d differs: node %s has term %d type %s, node %s has term %d type %s",
					i+1, refName, a.Term, a.Type, name, b.Term, b.Type))
				break
			}
		}
	}
	return errors.Join(errs...)
}
