package checker

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// The integrity checks (docs/design.md#trust-and-integrity).
const (
	// CheckChecksum: every entry of every node's log carries a checksum
	// that matches it; a log the bit-flip nemesis damaged fails exactly
	// at the flipped entry.
	CheckChecksum = "checksum"
	// CheckClockSkew: after the clocks healed and settled, no node's HLC
	// runs more than the bound ahead of its own clock.
	CheckClockSkew = "clock-skew"
	// CheckClockStamp: no command was stamped further ahead of the wall
	// clock of the leader that appended it than the bound — a node whose
	// clock is off beyond --maxClockOffset never proposed.
	CheckClockStamp = "clock-stamp"
)

// DamagedLog is a node's raft log that the bit-flip nemesis damaged at
// Index and set aside; Entries are what could still be decoded from it.
type DamagedLog struct {
	Node    string
	Path    string
	Index   uint64
	Entries []raftlog.Entry
}

// checkChecksums recomputes every entry's checksum, independently of the
// node's own store.
func checkChecksums(logs map[string][]raftlog.Entry, damaged []DamagedLog) []error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(logs)) {
		for _, e := range logs[id] {
			if stored, computed, ok := e.Checksum(); !ok || stored != computed {
				errs = append(errs, fmt.Errorf("node %s: entry %d: checksum tagged %v, stored %08x, computed %08x", id, e.Index, ok, stored, computed))
				break
			}
		}
	}
	for _, d := range damaged {
		caught := true // an entry that no longer decodes is caught too
		for _, e := range d.Entries {
			stored, computed, ok := e.Checksum()
			switch {
			case e.Index == d.Index:
				caught = ok && stored != computed
			case !ok || stored != computed:
				errs = append(errs, fmt.Errorf("damaged log of %s: entry %d, which was not flipped, fails its checksum", d.Node, e.Index))
			}
		}
		if !caught {
			errs = append(errs, fmt.Errorf("damaged log of %s (%s): flipped entry %d still passes its checksum", d.Node, d.Path, d.Index))
		}
	}
	return errs
}

// checkSkew: each node's HLC − wall against the bound.
func checkSkew(skewMs map[string]uint64, boundMs uint64) []error {
	var errs []error
	for _, id := range slices.Sorted(maps.Keys(skewMs)) {
		if skewMs[id] > boundMs {
			errs = append(errs, fmt.Errorf("node %s: HLC − wall is %d ms after the clocks settled, above %d ms", id, skewMs[id], boundMs))
		}
	}
	return errs
}

// checkStamps: each command's HLC against the wall clock of the leader
// that appended it.
func checkStamps(log []raftlog.Entry, committed uint64, boundMs int64) []error {
	var errs []error
	for _, e := range log[:min(committed, uint64(len(log)))] {
		if e.Command == nil || e.AppendedAt.IsZero() {
			continue
		}
		if d := int64(e.Command.GetHlc()>>16) - e.AppendedAt.UnixMilli(); d > boundMs {
			errs = append(errs, fmt.Errorf("entry %d (%T) stamped %d ms ahead of its leader's wall clock, above %d ms: a node beyond --maxClockOffset proposed it", e.Index, e.Command.GetBody(), d, boundMs))
			if len(errs) >= maxReported {
				break
			}
		}
	}
	return errs
}
