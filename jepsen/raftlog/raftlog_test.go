package raftlog

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mergeCmd(hlc uint64, left, right uint64) *api.Command {
	v := uint64(4)
	return &api.Command{Hlc: hlc, RequestId: "m1", MinVersion: 3, Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: left, RightRouteId: right,
		ExpectedVersion: &v, Actor: "CN=op", Note: "n"}}}
}

func splitCmd(hlc uint64, route uint64, key string) *api.Command {
	v := uint64(1)
	return &api.Command{Hlc: hlc, RequestId: "r1", Body: &api.Command_SplitRange{SplitRange: &api.SplitRange{RouteId: route, SplitKey: []byte(key), ExpectedVersion: &v}}}
}

// writeLog stores logs in a fresh raft.db the way a node does and closes it.
func writeLog(t *testing.T, logs []*raft.Log) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReadDecodesEveryCommand(t *testing.T) {
	boot := &api.Command{Hlc: 10, Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{ClusterId: "c", GroupId: 1}}}
	split := splitCmd(20, 1, "k5")
	merge := mergeCmd(30, 2, 3)
	auto := &api.Command{Hlc: 40, MinVersion: 3, Body: &api.Command_MergeRange{MergeRange: &api.MergeRange{LeftRouteId: 4, RightRouteId: 5, OpId: 7, Step: 1}}}
	path := writeLog(t, []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte{1, 2, 3}},
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: mustMarshal(t, boot)},
		{Index: 3, Term: 2, Type: raft.LogNoop},
		{Index: 4, Term: 2, Type: raft.LogCommand, Data: mustMarshal(t, split)},
		{Index: 5, Term: 2, Type: raft.LogCommand, Data: mustMarshal(t, merge)},
		{Index: 6, Term: 3, Type: raft.LogCommand, Data: mustMarshal(t, auto)},
	})
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 6 {
		t.Fatalf("%d entries, want 6", len(got))
	}
	for i, want := range []struct {
		term uint64
		typ  raft.LogType
		cmd  *api.Command
	}{{1, raft.LogConfiguration, nil}, {1, raft.LogCommand, boot}, {2, raft.LogNoop, nil}, {2, raft.LogCommand, split},
		{2, raft.LogCommand, merge}, {3, raft.LogCommand, auto}} {
		e := got[i]
		if e.Index != uint64(i+1) || e.Term != want.term || e.Type != want.typ {
			t.Errorf("entry %d: index %d term %d type %v, want %d %d %v", i, e.Index, e.Term, e.Type, i+1, want.term, want.typ)
		}
		if (e.Command == nil) != (want.cmd == nil) || (want.cmd != nil && !proto.Equal(e.Command, want.cmd)) {
			t.Errorf("entry %d: command %v, want %v", i, e.Command, want.cmd)
		}
	}
}

func TestReadRefusesACompactedLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	s, err := raftboltdb.New(raftboltdb.Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	data := mustMarshal(t, splitCmd(1, 1, "a"))
	if err := s.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Data: data}, {Index: 2, Term: 1, Data: data}, {Index: 3, Term: 1, Data: data}}); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 2); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Read(path); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Read of a compacted log: %v, want ErrCompacted", err)
	}
}

func TestReadRefusesAnUndecodableEntry(t *testing.T) {
	path := writeLog(t, []*raft.Log{{Index: 1, Term: 1, Type: raft.LogCommand, Data: []byte{0xff, 0xff}}})
	if _, err := Read(path); err == nil {
		t.Fatal("Read accepted garbage as a command")
	}
}

func TestDecodeCommandRefusesUnknownFields(t *testing.T) {
	good := mustMarshal(t, splitCmd(5, 2, "k"))
	unknown := protowire.AppendTag(nil, 999, protowire.VarintType)
	unknown = protowire.AppendVarint(unknown, 7)

	// An unknown field inside the split_range body (field 14).
	inner := mustMarshal(t, &api.SplitRange{RouteId: 2, SplitKey: []byte("k")})
	inner = append(inner, unknown...)
	nested := protowire.AppendTag(nil, 2, protowire.VarintType)
	nested = protowire.AppendVarint(nested, 5)
	nested = protowire.AppendTag(nested, 14, protowire.BytesType)
	nested = protowire.AppendBytes(nested, inner)

	// An unknown field inside the merge_range body (field 40).
	minner := mustMarshal(t, &api.MergeRange{LeftRouteId: 2, RightRouteId: 3})
	minner = append(minner, unknown...)
	mnested := protowire.AppendTag(nil, 40, protowire.BytesType)
	mnested = protowire.AppendBytes(mnested, minner)

	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"top level", append(append([]byte{}, good...), unknown...), ErrUnknownField},
		{"nested", nested, ErrUnknownField},
		{"nested in a merge", mnested, ErrUnknownField},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeCommand(tc.data); !errors.Is(err, tc.want) {
				t.Fatalf("DecodeCommand: %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := DecodeCommand(mustMarshal(t, &api.Command{Hlc: 3})); err == nil {
		t.Error("DecodeCommand accepted a command without a body")
	}
	if _, err := DecodeCommand(good); err != nil {
		t.Errorf("DecodeCommand refused a valid command: %v", err)
	}
}

func TestCheckAgreement(t *testing.T) {
	e := func(idx, term uint64, data string) Entry {
		return Entry{Index: idx, Term: term, Type: raft.LogCommand, Data: []byte(data)}
	}
	base := []Entry{e(1, 1, "a"), e(2, 1, "b"), e(3, 2, "c")}
	for _, tc := range []struct {
		name      string
		other     []Entry
		committed uint64
		ok        bool
	}{
		{"identical", []Entry{e(1, 1, "a"), e(2, 1, "b"), e(3, 2, "c")}, 3, true},
		{"differs only past the commit index", []Entry{e(1, 1, "a"), e(2, 1, "b"), e(3, 3, "x")}, 2, true},
		{"different term", []Entry{e(1, 1, "a"), e(2, 2, "b"), e(3, 2, "c")}, 3, false},
		{"different bytes", []Entry{e(1, 1, "a"), e(2, 1, "B"), e(3, 2, "c")}, 3, false},
		{"too short", []Entry{e(1, 1, "a")}, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckAgreement(map[string][]Entry{"n1": base, "n2": tc.other}, tc.committed)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckAgreement: %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

// FuzzDecodeCommand: raft.db bytes come from outside the checker. Decoding
// never panics, and whatever it accepts round-trips.
func FuzzDecodeCommand(f *testing.F) {
	f.Add(mustMarshal(f, splitCmd(9, 3, "key")))
	f.Add(mustMarshal(f, mergeCmd(9, 3, 4)))
	f.Add(mustMarshal(f, &api.Command{Body: &api.Command_SetAutoSplit{SetAutoSplit: &api.SetAutoSplit{Enabled: true, Reason: "r"}}}))
	f.Add([]byte{0x72, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := DecodeCommand(data)
		if err != nil {
			return
		}
		again, err := DecodeCommand(mustMarshal(t, cmd))
		if err != nil {
			t.Fatalf("an accepted command does not decode after re-encoding: %v", err)
		}
		if !proto.Equal(cmd, again) {
			t.Fatalf("round trip changed the command: %v vs %v", cmd, again)
		}
	})
}
