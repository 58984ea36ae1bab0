// Package checker judges one jepsen run. From the client history, every
// node's decoded raft log and what the nodes reported at the end, it
// checks, in order: the committed prefixes agree; the model's replay of
// the log (jepsen/model) satisfies every catalog and split invariant; each
// node's own catalog history matches the log; all nodes reached one state
// hash; every client result agrees with the log (unknown outcomes are
// resolved by request id); versions never go backwards in real time;
// GetTimestamp batches strictly increase in real time; and porcupine finds
// a linearization of the catalog history (state = version and catalog
// hash; splits and merges from clients, automatic ones entering from the
// log) and of the switch history.
// With the integrity inputs it also recomputes every entry's checksum (and
// finds the flipped one in a log the bit-flip nemesis damaged), bounds
// every node's HLC − wall after the clocks settled, and bounds how far a
// command's stamp ran ahead of its leader's wall clock.
//
// It starts no process and talks to no node: everything it judges is in
// its Input. A violation is a finding about the system under test; an
// error from Check means the run could not be judged, which fails the run
// as well.
package checker

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/model"
	"github.com/hotsplit/hotsplit/jepsen/raftlog"
)

// PorcupineTimeout bounds each linearizability check; running out of time
// is a failure, never a pass.
const PorcupineTimeout = 60 * time.Second

// Input is everything one run left behind.
type Input struct {
	Ops []history.Op
	// Logs holds each node's decoded raft log, by node id.
	Logs map[string][]raftlog.Entry
	// Committed is the highest log index any node reported applied at the
	// end: entries up to it are committed.
	Committed uint64
	Nodes     []NodeFinal
	// Checksums: every node that wrote these logs checksums its entries
	// (every build that writes checksums), so each must carry a matching
	// one.
	Checksums bool
	// Damaged are logs the bit-flip nemesis damaged and set aside.
	Damaged []DamagedLog
	// SkewMs is each node's HLC − wall after the clocks healed and
	// settled; checked against SkewBoundMs when set.
	SkewMs      map[string]uint64
	SkewBoundMs uint64
	// MaxStampAheadMs, when positive, bounds how far a command's HLC may
	// run ahead of its leader's wall clock (AppendedAt).
	MaxStampAheadMs int64
}

// NodeFinal is what one node reported after the run healed.
type NodeFinal struct {
	ID string
	// Hashes maps applied index -> state hash, from repeated samples.
	Hashes map[uint64]string
	// Deltas is the node's catalog history from WatchRoutes, starting at
	// the version after WatchFrom. When the node's history did not reach
	// back that far it first sent its whole catalog: StartRoutes, at
	// version WatchFrom.
	WatchFrom   uint64
	StartRoutes []*api.RouteDescriptor
	Deltas      []*api.CatalogDelta
}

// Violation is one finding.
type Violation struct {
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// Report is the verdict and what it was based on.
type Report struct {
	Violations []Violation
	Replay     *model.Replay
	// Resolved is the client history with unknown outcomes resolved.
	Resolved []history.Op
	// Stats for the run summary.
	Stats Stats
	// Catalog and Switch are porcupine's verdicts; CatalogInfo and
	// SwitchInfo feed the HTML visualisations.
	Catalog, Switch         porcupine.CheckResult
	CatalogInfo, SwitchInfo porcupine.LinearizationInfo
	CatalogModel            porcupine.Model
	SwitchModel             porcupine.Model
}

// Stats counts what the run did.
type Stats struct {
	Ops            int
	ByKindStatus   map[string]int
	Unknown        int
	UnknownApplied int
	LogEntries     uint64
	Versions       int
	ManualSplits   int
	AutoSplits     int
	ManualMerges   int
	AutoMerges     int
	// PinnedStarts: routes of the final catalog whose start an operator
	// placed; PinsReleased: manual merges that removed such a start (an
	// automatic merge never may).
	PinnedStarts, PinsReleased int
	// MergeRefusals counts clients' merges the FSM refused, by the log's
	// reason.
	MergeRefusals map[string]int
	Ops2Step      int // ops whose step 2 applied
	Switches      int
	PorcupineOps  int
	PorcupineTime time.Duration
}

// OK reports whether the run passed.
func (r *Report) OK() bool { return len(r.Violations) == 0 }

// Summary is a few lines for the test log.
func (r *Report) Summary() string {
	var b strings.Builder
	s := r.Stats
	fmt.Fprintf(&b, "ops %d (unknown %d, of which applied %d); log entries %d; catalog versions %d (manual splits %d, automatic %d, two-step ops finished %d; manual merges %d, automatic %d); switch changes %d\n",
		s.Ops, s.Unknown, s.UnknownApplied, s.LogEntries, s.Versions, s.ManualSplits, s.AutoSplits, s.Ops2Step, s.ManualMerges, s.AutoMerges, s.Switches)
	fmt.Fprintf(&b, "by kind: %s\n", formatCounts(s.ByKindStatus))
	if len(s.MergeRefusals) > 0 {
		fmt.Fprintf(&b, "merges refused by the FSM: %s\n", formatCounts(s.MergeRefusals))
	}
	if s.PinnedStarts > 0 || s.PinsReleased > 0 {
		fmt.Fprintf(&b, "operator boundaries: %d in the final catalog, %d removed by manual merges\n", s.PinnedStarts, s.PinsReleased)
	}
	fmt.Fprintf(&b, "porcupine: catalog %s, switch %s (%d ops, %v)\n", r.Catalog, r.Switch, s.PorcupineOps, s.PorcupineTime.Round(time.Millisecond))
	if r.OK() {
		b.WriteString("verdict: OK\n")
		return b.String()
	}
	byCheck := map[string]int{}
	for _, v := range r.Violations {
		byCheck[v.Check]++
	}
	fmt.Fprintf(&b, "verdict: %d VIOLATIONS (%s)\n", len(r.Violations), formatCounts(byCheck))
	for i, v := range r.Violations {
		if i == 20 {
			fmt.Fprintf(&b, "  ... %d more\n", len(r.Violations)-i)
			break
		}
		fmt.Fprintf(&b, "  %s\n", v)
	}
	return b.String()
}

// Has reports whether a violation of the named check was found.
func (r *Report) Has(check string) bool { return r.HasAbout(check, "") }

// HasAbout reports whether a violation of the named check whose detail
// contains about was found.
func (r *Report) HasAbout(check, about string) bool {
	for _, v := range r.Violations {
		if v.Check == check && strings.Contains(v.Detail, about) {
			return true
		}
	}
	return false
}

// Check names.
const (
	CheckLogAgreement = "log-agreement"
	CheckModel        = "model"
	CheckInvariant    = "invariant"
	CheckNodeHistory  = "node-history"
	CheckStateHash    = "state-hash"
	CheckClientVsLog  = "client-vs-log"
	CheckMonotonic    = "monotonic-versions"
	CheckTimestamps   = "timestamps"
	CheckLinearizable = "linearizability"
	// CheckLinearizableTimeout: porcupine could not decide in time. It
	// fails the run but never counts as catching a negative control.
	CheckLinearizableTimeout = "linearizability-timeout"
)

// Check judges one run.
func Check(in Input) (*Report, error) {
	r := &Report{Stats: Stats{Ops: len(in.Ops), ByKindStatus: history.Counts(in.Ops), LogEntries: in.Committed}}
	add := func(check string, errs ...error) {
		for _, err := range errs {
			if err != nil {
				r.Violations = append(r.Violations, Violation{Check: check, Detail: err.Error()})
			}
		}
	}
	if len(in.Logs) == 0 {
		return nil, fmt.Errorf("no raft logs to check")
	}
	add(CheckLogAgreement, raftlog.CheckAgreement(in.Logs, in.Committed))
	ref := majorityLog(in.Logs, in.Committed)
	replay, err := model.Run(ref, min(in.Committed, uint64(len(ref))))
	if err != nil {
		add(CheckModel, err)
		return r, nil
	}
	r.Replay = replay
	if replay.Final() == nil {
		return nil, fmt.Errorf("the committed log (%d entries) holds no Bootstrap", in.Committed)
	}
	r.Stats.Versions = len(replay.Catalogs)
	for _, s := range replay.Splits {
		if s.Auto() {
			r.Stats.AutoSplits++
			if s.Step == 2 {
				r.Stats.Ops2Step++
			}
		} else {
			r.Stats.ManualSplits++
		}
	}
	for _, m := range replay.Merges {
		if m.Auto() {
			r.Stats.AutoMerges++
		} else {
			r.Stats.ManualMerges++
			if m.Right.OperatorStart {
				r.Stats.PinsReleased++
			}
		}
	}
	for _, rt := range replay.Final().Routes {
		if rt.OperatorStart {
			r.Stats.PinnedStarts++
		}
	}
	for _, s := range replay.Switches[1:] {
		if s.Applied {
			r.Stats.Switches++
		}
	}
	add(CheckInvariant, replay.CheckCatalogs()...)
	add(CheckInvariant, model.CheckChanges(replay.Splits, replay.Merges, replay.EnabledBefore)...)
	for _, idx := range replay.FenceRejections {
		add(CheckInvariant, fmt.Errorf("catalog change at index %d refused by the HLC fence: a committed entry whose HLC did not move forward", idx))
	}
	add(CheckNodeHistory, checkNodeHistories(in.Nodes, replay, ref)...)
	if in.Checksums {
		add(CheckChecksum, checkChecksums(in.Logs, in.Damaged)...)
	}
	if in.SkewMs != nil {
		add(CheckClockSkew, checkSkew(in.SkewMs, in.SkewBoundMs)...)
	}
	if in.MaxStampAheadMs > 0 {
		add(CheckClockStamp, checkStamps(ref, in.Committed, in.MaxStampAheadMs)...)
	}
	add(CheckStateHash, checkStateHashes(in.Nodes)...)

	resolved, errs := resolve(in.Ops, replay)
	r.Resolved = resolved
	add(CheckClientVsLog, errs...)
	r.Stats.MergeRefusals = map[string]int{}
	for _, op := range resolved {
		if op.Kind == history.Merge && op.Status == history.Fail && op.FromFSM {
			r.Stats.MergeRefusals[replay.Requests[op.RequestID].Code.String()]++
		}
		if op.Status == history.Unknown {
			r.Stats.Unknown++
			if strings.HasPrefix(op.Resolution, "applied") {
				r.Stats.UnknownApplied++
			}
		}
	}
	add(CheckMonotonic, checkMonotonicVersions(resolved)...)
	add(CheckTimestamps, checkTimestamps(resolved)...)

	t0 := time.Now()
	catOps, catModel := catalogHistory(resolved, replay)
	r.CatalogModel = catModel
	r.Catalog, r.CatalogInfo = porcupine.CheckOperationsVerbose(catModel, catOps, PorcupineTimeout)
	swOps, swModel := switchHistory(resolved, replay)
	r.SwitchModel = swModel
	r.Switch, r.SwitchInfo = porcupine.CheckOperationsVerbose(swModel, swOps, PorcupineTimeout)
	r.Stats.PorcupineTime = time.Since(t0)
	r.Stats.PorcupineOps = len(catOps) + len(swOps)
	for _, v := range []struct {
		name string
		res  porcupine.CheckResult
	}{{"catalog", r.Catalog}, {"switch", r.Switch}} {
		name, res := v.name, v.res
		switch res {
		case porcupine.Ok:
		case porcupine.Unknown:
			add(CheckLinearizableTimeout, fmt.Errorf("%s history: porcupine timed out after %v (Unknown fails the run)", name, PorcupineTimeout))
		default:
			add(CheckLinearizable, fmt.Errorf("%s history is not linearizable (porcupine: %s)", name, res))
		}
	}
	return r, nil
}

// majorityLog is the reference log: among the logs that hold every
// committed entry, the largest group agreeing on all of them (ties: the
// group with the lowest node id), and in it the longest log. If the logs
// disagree (a safety violation, reported by CheckAgreement), the rest of
// the checks then judge the majority's history rather than an outlier's.
func majorityLog(logs map[string][]raftlog.Entry, committed uint64) []raftlog.Entry {
	type group struct {
		size int
		best []raftlog.Entry
	}
	groups := map[[32]byte]*group{}
	var order [][32]byte
	var fallback []raftlog.Entry
	for _, id := range slices.Sorted(maps.Keys(logs)) {
		l := logs[id]
		if len(l) > len(fallback) {
			fallback = l
		}
		if uint64(len(l)) < committed {
			continue
		}
		h := sha256.New()
		var b [17]byte
		for _, e := range l[:committed] {
			binary.BigEndian.PutUint64(b[:8], e.Term)
			binary.BigEndian.PutUint64(b[8:16], uint64(len(e.Data)))
			b[16] = byte(e.Type)
			h.Write(b[:])
			h.Write(e.Data)
		}
		var k [32]byte
		h.Sum(k[:0])
		g := groups[k]
		if g == nil {
			g = &group{}
			groups[k] = g
			order = append(order, k)
		}
		g.size++
		if len(l) > len(g.best) {
			g.best = l
		}
	}
	var pick *group
	for _, k := range order {
		if g := groups[k]; pick == nil || g.size > pick.size {
			pick = g
		}
	}
	if pick == nil {
		return fallback
	}
	return pick.best
}

func formatCounts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}
