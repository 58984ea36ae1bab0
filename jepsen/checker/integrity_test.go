package checker

import (
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// tagged returns an entry carrying its checksum as a node writes it.
func tagged(index uint64, data string) raftlog.Entry {
	e := raftlog.Entry{Index: index, Term: 3, Type: raft.LogCommand, Data: []byte(data)}
	var hdr [17]byte
	binary.BigEndian.PutUint64(hdr[:8], e.Index)
	binary.BigEndian.PutUint64(hdr[8:16], e.Term)
	hdr[16] = byte(e.Type)
	tab := crc32.MakeTable(crc32.Castagnoli)
	e.Extensions = binary.BigEndian.AppendUint32([]byte("hs\x01"), crc32.Update(crc32.Update(0, tab, hdr[:]), tab, e.Data))
	return e
}

func TestCheckChecksums(t *testing.T) {
	good := []raftlog.Entry{tagged(1, "a"), tagged(2, "bb"), tagged(3, "ccc")}
	if errs := checkChecksums(map[string][]raftlog.Entry{"n1": good}, nil); len(errs) != 0 {
		t.Fatalf("clean logs: %v", errs)
	}
	flipped := []raftlog.Entry{tagged(1, "a"), tagged(2, "bb"), tagged(3, "ccc")}
	flipped[1].Data = []byte("bB")
	untagged := []raftlog.Entry{tagged(1, "a"), {Index: 2, Term: 3, Data: []byte("bb")}}
	errs := checkChecksums(map[string][]raftlog.Entry{"n1": good, "n2": flipped, "n3": untagged}, nil)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "node n2: entry 2") || !strings.Contains(errs[1].Error(), "node n3: entry 2") {
		t.Fatalf("a flipped and an untagged entry: %v", errs)
	}
	// The nemesis's damaged log: caught at the flipped entry only.
	if errs := checkChecksums(nil, []DamagedLog{{Node: "n2", Index: 2, Entries: flipped}}); len(errs) != 0 {
		t.Fatalf("damaged log caught at its flip: %v", errs)
	}
	if errs := checkChecksums(nil, []DamagedLog{{Node: "n2", Index: 2, Entries: good}}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "still passes") {
		t.Fatalf("a flip the checksum misses: %v", errs)
	}
	if errs := checkChecksums(nil, []DamagedLog{{Node: "n2", Index: 3, Entries: flipped}}); len(errs) != 2 {
		t.Fatalf("a bad entry elsewhere and the named one passing: %v", errs)
	}
}

func TestCheckSkewAndStamps(t *testing.T) {
	if errs := checkSkew(map[string]uint64{"n1": 0, "n2": 2000, "n3": 2001}, 2000); len(errs) != 1 || !strings.Contains(errs[0].Error(), "n3") {
		t.Fatalf("skew: %v", errs)
	}
	at := time.UnixMilli(1_800_000_000_000)
	cmd := func(aheadMs int64) *api.Command {
		return &api.Command{Hlc: uint64(at.UnixMilli()+aheadMs) << 16, Body: &api.Command_AdvanceCeiling{AdvanceCeiling: &api.AdvanceCeiling{}}}
	}
	log := []raftlog.Entry{{Index: 1, AppendedAt: at, Command: cmd(100)}, {Index: 2, AppendedAt: at, Command: cmd(3000)}, {Index: 3, AppendedAt: at, Command: cmd(5000)}}
	if errs := checkStamps(log, 2, 2500); len(errs) != 1 || !strings.Contains(errs[0].Error(), "entry 2") {
		t.Fatalf("stamps (entry 3 is past the committed index): %v", errs)
	}
}
