package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// haltRecorder collects halts instead of exiting.
type haltRecorder struct{ errs []error }

func (h *haltRecorder) halt(err error) { h.errs = append(h.errs, err) }

func newChecked(from uint64) (*checksumLogStore, *raft.InmemStore, *haltRecorder) {
	inner := raft.NewInmemStore()
	h := &haltRecorder{}
	return &checksumLogStore{inner: inner, path: "/data/raft.db", from: from, halt: h.halt, legacy: &atomic.Uint64{}}, inner, h
}

func entries(from, to uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, &raft.Log{Index: i, Term: 2, Type: raft.LogCommand, Data: []byte{byte(i), 'x', 'y'}})
	}
	return out
}

func TestChecksumRoundTripLeavesTheCallersLogAlone(t *testing.T) {
	s, inner, h := newChecked(1)
	logs := entries(1, 5)
	logs[2].Extensions = []byte("middleware")
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	for i, l := range logs {
		want := []byte(nil)
		if i == 2 {
			want = []byte("middleware")
		}
		if !bytes.Equal(l.Extensions, want) {
			t.Fatalf("StoreLogs changed the caller's entry %d: Extensions %q", l.Index, l.Extensions)
		}
	}
	var raw raft.Log
	if err := inner.GetLog(3, &raw); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw.Extensions, entryMagic) || !bytes.Equal(raw.Data, logs[2].Data) {
		t.Fatalf("stored entry: Extensions %x Data %x (the checksum belongs in Extensions, Data unchanged)", raw.Extensions, raw.Data)
	}
	for _, want := range logs {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatal(err)
		}
		if got.Index != want.Index || got.Term != want.Term || !bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) {
			t.Fatalf("GetLog(%d) = %+v, want %+v", want.Index, got, want)
		}
	}
	if len(h.errs) != 0 {
		t.Fatalf("halted: %v", h.errs)
	}
}

func TestChecksumMismatchHaltsNamingIndexAndFile(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(l *raft.Log)
	}{
		{"data byte", func(l *raft.Log) { l.Data[1] ^= 0x20 }},
		{"term", func(l *raft.Log) { l.Term++ }},
		{"type", func(l *raft.Log) { l.Type = raft.LogNoop }},
		{"checksum", func(l *raft.Log) { l.Extensions[4] ^= 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, inner, h := newChecked(1)
			if err := s.StoreLogs(entries(1, 3)); err != nil {
				t.Fatal(err)
			}
			var raw raft.Log
			inner.GetLog(2, &raw)
			raw.Data = bytes.Clone(raw.Data)
			raw.Extensions = bytes.Clone(raw.Extensions)
			tc.tamper(&raw)
			inner.StoreLog(&raw)
			var got raft.Log
			err := s.GetLog(2, &got)
			if !errors.Is(err, ErrCorrupt) || len(h.errs) != 1 {
				t.Fatalf("GetLog of a tampered entry: err %v, halts %v", err, h.errs)
			}
			if msg := h.errs[0].Error(); !strings.Contains(msg, "entry 2") || !strings.Contains(msg, "/data/raft.db") || !strings.Contains(msg, "checksum mismatch") {
				t.Fatalf("halt line %q does not name the entry, the file and the cause", msg)
			}
		})
	}
}

func TestChecksumLegacyEntriesBelowFrom(t *testing.T) {
	s, inner, h := newChecked(4)
	inner.StoreLogs(entries(1, 5)) // written by an earlier build: no checksum
	for i := uint64(1); i <= 3; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("legacy entry %d: %v", i, err)
		}
	}
	if got := s.legacy.Load(); got != 3 {
		t.Fatalf("legacy entries counted %d, want 3", got)
	}
	var l raft.Log
	if err := s.GetLog(4, &l); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "no checksum") {
		t.Fatalf("entry at checksummed_from without a checksum: %v", err)
	}
	if len(h.errs) != 1 {
		t.Fatalf("halts %v, want one", h.errs)
	}
}

func TestChecksumNotFound(t *testing.T) {
	s, inner, h := newChecked(1)
	s.StoreLogs(entries(10, 20))
	var l raft.Log
	// Outside the log: raft's signal to send a snapshot, passed through.
	for _, i := range []uint64{9, 21} {
		if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) || len(h.errs) != 0 {
			t.Fatalf("GetLog(%d) outside [10, 20]: err %v, halts %v", i, err, h.errs)
		}
	}
	// A hole inside the log is corruption (raft would panic on it).
	inner.DeleteRange(15, 15)
	if err := s.GetLog(15, &l); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "missing inside the log [10, 20]") {
		t.Fatalf("GetLog of a hole: %v", err)
	}
}

// panicStore panics like bbolt on a damaged page.
type panicStore struct{ raft.LogStore }

func (panicStore) GetLog(uint64, *raft.Log) error { panic("invalid page type: 42") }

type decodeErrStore struct{ raft.LogStore }

func (decodeErrStore) GetLog(uint64, *raft.Log) error {
	return errors.New("msgpack decode error [pos 3]")
}

func TestChecksumPanicsAndDecodeErrorsHalt(t *testing.T) {
	for name, inner := range map[string]raft.LogStore{"panic": panicStore{raft.NewInmemStore()}, "decode": decodeErrStore{raft.NewInmemStore()}} {
		h := &haltRecorder{}
		s := &checksumLogStore{inner: inner, path: "/data/raft.db", from: 1, halt: h.halt, legacy: &atomic.Uint64{}}
		var l raft.Log
		if err := s.GetLog(7, &l); !errors.Is(err, ErrCorrupt) || len(h.errs) != 1 || !strings.Contains(err.Error(), "7") {
			t.Fatalf("%s: err %v, halts %v", name, err, h.errs)
		}
	}
}

// boltLikeStable keeps Set and SetUint64 values in one key space, as
// raft-boltdb does (raft's InmemStore keeps two).
type boltLikeStable map[string][]byte

func (m boltLikeStable) Set(k, v []byte) error { m[string(k)] = bytes.Clone(v); return nil }
func (m boltLikeStable) Get(k []byte) ([]byte, error) {
	v, ok := m[string(k)]
	if !ok {
		return nil, errors.New("not found")
	}
	return v, nil
}
func (m boltLikeStable) SetUint64(k []byte, v uint64) error {
	return m.Set(k, binary.BigEndian.AppendUint64(nil, v))
}
func (m boltLikeStable) GetUint64(k []byte) (uint64, error) {
	v, err := m.Get(k)
	if err != nil {
		return 0, err
	}
	return binary.BigEndian.Uint64(v), nil
}

func TestStableStoreSealedValues(t *testing.T) {
	inner := boltLikeStable{}
	h := &haltRecorder{}
	sealed := &checksumStableStore{inner: inner, path: "/data/raft.db", halt: h.halt}
	// An earlier build's values: raw, without CRC.
	inner.SetUint64([]byte("CurrentTerm"), 7)
	inner.Set([]byte("LastVoteCand"), []byte("n2"))
	logs, _, _ := newChecked(0)
	logs.StoreLogs(entries(1, 12))
	from, err := migrateStable(inner, sealed, logs)
	if err != nil || from != 13 {
		t.Fatalf("first start: from %d, err %v; want 13", from, err)
	}
	// A second start reads the recorded value and converts nothing again.
	logs.StoreLogs(entries(13, 20))
	if from, err = migrateStable(inner, sealed, logs); err != nil || from != 13 {
		t.Fatalf("second start: from %d, err %v; want 13", from, err)
	}
	if v, err := sealed.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("CurrentTerm = %d, %v", v, err)
	}
	if v, err := sealed.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Fatalf("LastVoteCand = %q, %v", v, err)
	}
	if _, err := sealed.Get([]byte("absent")); err == nil || errors.Is(err, ErrCorrupt) {
		t.Fatalf("missing key: %v (want the store's not-found error)", err)
	}
	// A flipped bit, or a value written without CRC after the migration.
	raw, _ := inner.Get([]byte("CurrentTerm"))
	raw = bytes.Clone(raw)
	raw[7] ^= 1
	inner.Set([]byte("CurrentTerm"), raw)
	if _, err := sealed.GetUint64([]byte("CurrentTerm")); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `"CurrentTerm"`) {
		t.Fatalf("flipped value: %v", err)
	}
	inner.SetUint64([]byte("LastVoteTerm"), 3)
	if _, err := sealed.GetUint64([]byte("LastVoteTerm")); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unsealed value after the migration: %v", err)
	}
}

// FuzzChecksumRead: whatever a damaged disk returns, a read either yields
// the entry that was stored or reports ErrCorrupt; it never panics and
// never hands back changed bytes.
func FuzzChecksumRead(f *testing.F) {
	f.Add([]byte("data"), []byte{'h', 's', 1, 0, 0, 0, 0}, uint64(3), uint8(0))
	f.Add([]byte{}, []byte{}, uint64(1), uint8(2))
	f.Fuzz(func(t *testing.T, data, ext []byte, term uint64, typ uint8) {
		s, inner, _ := newChecked(1)
		orig := &raft.Log{Index: 5, Term: 9, Type: raft.LogCommand, Data: []byte("the entry")}
		s.StoreLogs([]*raft.Log{orig})
		inner.StoreLog(&raft.Log{Index: 5, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext})
		var got raft.Log
		err := s.GetLog(5, &got)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read error %v is not ErrCorrupt", err)
			}
			return
		}
		if sum, _, ok := splitEntryTag(ext); !ok || sum != entryChecksum(5, term, raft.LogType(typ), data) {
			t.Fatalf("accepted an entry whose checksum does not match: %+v", got)
		}
	})
}

// The jepsen checker recomputes entry checksums with code of its own
// (raftlog.Entry.Checksum): both must agree on what a real raft.db holds.
func TestChecksumMatchesTheJepsenReader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	store, err := openBoltStore(path, false)
	if err != nil {
		t.Fatal(err)
	}
	s := &checksumLogStore{inner: store, path: path, from: 1, halt: func(err error) { t.Error(err) }, legacy: &atomic.Uint64{}}
	if err := s.StoreLogs(entries(1, 20)); err != nil {
		t.Fatal(err)
	}
	store.Close()
	got, err := raftlog.ReadAny(path)
	if err != nil || len(got) != 20 {
		t.Fatalf("read %d entries: %v", len(got), err)
	}
	for _, e := range got {
		stored, computed, ok := e.Checksum()
		if !ok || stored != computed {
			t.Fatalf("entry %d: tagged %v, stored %08x, computed %08x", e.Index, ok, stored, computed)
		}
	}
}

// BenchmarkChecksumGetLog: verifying and stripping a checksum on the read
// path adds no allocation to the store's own.
func BenchmarkChecksumGetLog(b *testing.B) {
	s, _, _ := newChecked(1)
	logs := entries(1, 1)
	logs[0].Data = make([]byte, 512)
	s.StoreLogs(logs)
	var l raft.Log
	b.ReportAllocs()
	for b.Loop() {
		if err := s.GetLog(1, &l); err != nil {
			b.Fatal(err)
		}
	}
}
