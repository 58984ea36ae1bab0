package fsm

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/detector"
)

// Cluster versions (SPEC §5). Each wave of replicated changes is one
// version: Version1 is the release recorded in testdata/upgrade/baseline,
// Version2 the wave of trust, integrity, split keys and operations. What a
// version turns on is listed in one place, the feature table below; code
// asks State.Has(feature) (or Feature.EnabledAt(version) where it holds
// only a version), never compares version numbers. This file is the only
// non-test Go file allowed to (.ci/run's check_version_gates).
const (
	Version1 = 1
	Version2 = 2
	Version3 = 3
)

// SupportedVersion is the highest cluster_version this build can apply.
const SupportedVersion = Version3

// Feature is one replicated behaviour that a cluster version turns on, in
// the spirit of CockroachDB's clusterversion keys: the rules are keyed on
// the replicated cluster_version, never on the binary, so that a cluster
// with an older member keeps the older behaviour on every replica. Adding
// behaviour to a new version means adding rows, not comparisons.
type Feature int

// The features, in table order (the order raise hooks of one version run
// in).
const (
	HoldBand Feature = iota
	FloorFollowsThreshold
	ExplicitZeroWeights
	ScheduledStepChange
	EmptyPatchRefused
	ConfigLimits
	SampledEvidence
	BalanceSplitKeys
	LowerBoundIsolation
	ColumnExplanations
	DecisionExplanations
	StickyAbort
	Admission
	StateCheck
	ActorNotes
	PreviousClusterIDs
	ColumnRouteLoads
	ManualMerge
	RequestFingerprints
	UnchangedPatchNoop
	StepChangeWithoutColumns
	AutoMerge
	EvidenceCuts
	HeavyKeyIsolation
	HeatHistory
	OperatorBoundariesKept
	BoundedEvidence
	PooledEvidence
	numFeatures
)

// featureRow is one row of the table.
type featureRow struct {
	// name is the feature's name in errors and docs (snake_case).
	name string
	// version is the cluster version that turns the feature on.
	version uint32
	// doc says in one line what the feature changes.
	doc string
	// rules are the detector rules the feature turns on (0: none).
	rules detector.Rules
	// raise, if set, runs once when the cluster version rises to or past
	// version from below it (never at a bootstrap at that version, whose
	// defaults already hold): it brings the replicated state to what the
	// feature expects and returns "field=value" text for the decision that
	// records the raise. It replaces the fields of s it changes, never
	// modifies what they point to.
	raise func(s *State) string
}

// features is the table; docs/design.md ("Cluster versions and features")
// lists it and a test keeps the two equal.
var features = [numFeatures]featureRow{
	HoldBand: {"hold_band", Version2,
		"a column scoring in [hold_band_bp, 100%) of the threshold holds a route's counter instead of resetting it (config hold_band_bp)",
		detector.RuleHoldBand, raiseHoldBand},
	FloorFollowsThreshold: {"floor_follows_threshold", Version2,
		"the top-key absolute floor follows the threshold (threshold/2) until an operator sets it; setting it to 0 makes it follow again",
		0, raiseFloorFollowsThreshold},
	ExplicitZeroWeights: {"explicit_zero_weights", Version2,
		"a read or write weight set to 0 (at bootstrap or by a patch) is kept as a present 0 instead of taking the default",
		0, nil},
	ScheduledStepChange: {"scheduled_step_change", Version2,
		"a step_ms change takes effect at the first boundary both steps share (next_step_ms, next_step_at_ms), so no column is lost",
		0, nil},
	EmptyPatchRefused: {"empty_patch_refused", Version2,
		"a SetConfig patch that sets no field is refused (it would only reset every hysteresis counter)",
		0, nil},
	ConfigLimits: {"config_limits", Version2,
		"max_auto_routes, threshold and top_key_absolute_floor have upper bounds (MaxAutoRoutesLimit, MaxScoreLimit)",
		0, nil},
	SampledEvidence: {"sampled_evidence", Version2,
		"column rows carry the merged operation sample, sample rates, raw sampled counts and variances",
		0, nil},
	BalanceSplitKeys: {"balance_split_keys", Version2,
		"the split key is the best-balanced point of bucket loads and sampled keys; a one-key route is already isolated by its shape",
		detector.RuleBalanceSplit, nil},
	LowerBoundIsolation: {"lower_bound_isolation", Version2,
		"single-key isolation tests share and floor on a lower confidence bound of the hot key's load",
		detector.RuleLowerBoundIsolation, nil},
	ColumnExplanations: {"column_explanations", Version2,
		"an explanation's score, counter and reason come from one column, with the settings it was judged by; cold routes are explained too",
		detector.RuleColumnExplanations, nil},
	DecisionExplanations: {"decision_explanations", Version2,
		"planned and declined decisions keep the detector's explanation, so the why outlives the route",
		0, nil},
	StickyAbort: {"sticky_abort", Version2,
		"an operator's or stale abort before step 1 puts the planned route in cooldown, so the next hot column does not plan it again",
		0, nil},
	Admission: {"admission", Version2,
		"AdmitMember: a node that joins by itself must have been admitted from the raft address it gives",
		0, nil},
	StateCheck: {"state_check", Version2,
		"CheckState: a marker at which every replica hashes its state for the cross-replica comparison",
		0, nil},
	ActorNotes: {"actor_notes", Version2,
		"the actor is the authenticated identity; the caller's self-declared text is kept beside it as a note",
		0, nil},
	PreviousClusterIDs: {"previous_cluster_ids", Version2,
		"a cluster restored from a backup or recovered alone records the ids it had, so watchers resync",
		0, nil},
	ColumnRouteLoads: {"column_route_loads", Version3,
		"a column lists the load of every live reported route (route_loads), so an absent route was cold; rows carry only evidence",
		0, nil},
	ManualMerge: {"manual_merge", Version3,
		"MergeRange: an operator joins two adjacent ACTIVE routes of one group into a new route that records both parents; the split cooldown starts at the merge",
		0, nil},
	RequestFingerprints: {"request_fingerprints", Version3,
		"a request id is bound to its request: the table keeps a fingerprint and a description of the first one, and a reuse for another request is refused (REQUEST_ID_REUSED), never answered with the first result",
		0, nil},
	UnchangedPatchNoop: {"unchanged_patch_noop", Version3,
		"a SetConfig patch that leaves the config as it is changes nothing: no hysteresis reset, no decision; it answers \"unchanged\"",
		0, nil},
	StepChangeWithoutColumns: {"step_change_without_columns", Version3,
		"a pending step change takes effect with the first fence renewal two of the longer step plus the grace past its boundary, even when no column came (an idle cluster)",
		0, nil},
	AutoMerge: {"auto_merge", Version3,
		"adjacent routes cold for merge_windows complete columns are merged by one-step merge ops (config merge_threshold_bp, merge_windows, merge_delay_ms, max_merges_per_cycle, merge_margin_bp)",
		detector.RuleMerge, raiseAutoMerge},
	EvidenceCuts: {"evidence_cuts", Version3,
		"a cut rests on exact bucket loads and top-K counts first, samples only inside a bucket, may fall between a few keys of known load, and is made only when each side's share clears 20% at confidence (explained with its interval); a row without evidence is declined no_evidence",
		detector.RuleEvidenceCuts, nil},
	HeavyKeyIsolation: {"heavy_key_isolation", Version3,
		"the heaviest key is isolated when its own load clears the threshold and the floor at confidence, whatever its share of the route",
		detector.RuleHeavyKeyIsolation, nil},
	HeatHistory: {"heat_history", Version3,
		"the key visualizer's heat history: each column with route_loads adds its band totals, each split and merge a mark; in snapshots and the state hash",
		0, nil},
	OperatorBoundariesKept: {"operator_boundaries_kept", Version3,
		"a bootstrap split key or a manual split's key marks the route it starts (operator_start); automatic merges never remove a marked boundary, a manual merge may; the raise marks every boundary the catalog has",
		0, raiseOperatorBoundaries},
	BoundedEvidence: {"bounded_evidence", Version3,
		"a column's rows (its evidence) total at most MaxColumnEvidenceBytes encoded; hot routes beyond it count through route_loads alone",
		0, nil},
	PooledEvidence: {"pooled_evidence", Version3,
		"a cut inside a bucket weighs each key by its evidence over the route's last 3 counted columns, not one (tracked pool of up to 512 keys, 16 KiB; in snapshots and the state hash)",
		detector.RulePooledEvidence, nil},
}

// ErrVersionTooLow: the cluster runs a version below the one a feature
// needs (a member has not been upgraded). The wrapping error names the
// feature, the version it needs and the version the cluster runs.
var ErrVersionTooLow = errors.New("cluster version too low")

// String is the feature's name.
func (f Feature) String() string { return f.row().name }

// Version is the cluster version that turns f on: the min_version of a
// command that needs it.
func (f Feature) Version() uint32 { return f.row().version }

// EnabledAt reports whether f is on in a cluster at version.
func (f Feature) EnabledAt(version uint32) bool { return version >= f.row().version }

// CheckAt returns nil if f is on at version, else an error wrapping
// ErrVersionTooLow.
func (f Feature) CheckAt(version uint32) error {
	if f.EnabledAt(version) {
		return nil
	}
	return fmt.Errorf("%w: %s needs cluster version %d, the cluster runs %d", ErrVersionTooLow, f, f.Version(), version)
}

func (f Feature) row() *featureRow {
	if f < 0 || f >= numFeatures {
		panic(fmt.Sprintf("fsm: unknown feature %d", int(f)))
	}
	return &features[f]
}

// Has reports whether f is on at the state's cluster version.
func (s *State) Has(f Feature) bool { return f.EnabledAt(s.clusterVersion) }

// Require returns nil if f is on at the state's cluster version, else an
// error wrapping ErrVersionTooLow.
func (s *State) Require(f Feature) error { return f.CheckAt(s.clusterVersion) }

// Supported reports whether this build can apply cluster version v.
func Supported[V ~uint32 | ~uint64](v V) bool { return uint64(v) <= SupportedVersion }

// IsVersion reports whether v names a cluster version at all: 0 is unset.
func IsVersion(v uint32) bool { return v >= Version1 }

// Reaches reports whether a cluster (or a node) at version v runs what
// needs version need: a command's min_version, a cluster version a joining
// node must support.
func Reaches(v, need uint32) bool { return v >= need }

// Versions lists every cluster version this build supports, oldest first.
func Versions() []uint32 {
	out := make([]uint32, 0, SupportedVersion)
	for v := uint32(Version1); Supported(v); v++ {
		out = append(out, v)
	}
	return out
}

// RaisesAt reports whether a rise to cluster version v runs raise hooks,
// and so records one "cluster version v: …" CONFIG decision. The
// rolling-upgrade process tests ask it to know which decisions a raise
// must have written.
func RaisesAt(v uint32) bool {
	return len(raiseSteps(features[:], v-1, v)) > 0
}

// rulesAt is the detector rule set of a cluster version: the rules of
// every feature on at it.
func rulesAt(version uint32) detector.Rules {
	var r detector.Rules
	for f := range numFeatures {
		if f.EnabledAt(version) {
			r |= features[f].rules
		}
	}
	return r
}

// hookStep is the raise hooks of one crossed version: rows of a table, in
// table order.
type hookStep struct {
	version uint32
	rows    []int
}

// raiseSteps lists the raise hooks a raise from `from` to `to` crosses:
// every row of table with a hook whose version lies in (from, to], by
// version, then in table order. A jump over several versions runs the
// hooks of each in turn, as if the cluster had stopped at every one.
func raiseSteps(table []featureRow, from, to uint32) []hookStep {
	var rows []int
	for i, r := range table {
		if r.raise != nil && r.version > from && r.version <= to {
			rows = append(rows, i)
		}
	}
	slices.SortStableFunc(rows, func(i, j int) int { return cmp.Compare(table[i].version, table[j].version) })
	var steps []hookStep
	for _, i := range rows {
		if n := len(steps); n == 0 || steps[n-1].version != table[i].version {
			steps = append(steps, hookStep{version: table[i].version})
		}
		steps[len(steps)-1].rows = append(steps[len(steps)-1].rows, i)
	}
	return steps
}

// raiseVersion moves the cluster version to v (never down), running the
// raise hooks of table for every crossed version in order. The hooks of
// one version are recorded in one CONFIG decision, "cluster version N:
// <what each hook set>". The cluster version is N while N's hooks run.
func (a *applier) raiseVersion(table []featureRow, v uint32) {
	from := a.s.clusterVersion
	if v <= from {
		return
	}
	a.f.log.Info("fsm: cluster version raised", "from", from, "to", v)
	if a.s.bootstrapped {
		for _, step := range raiseSteps(table, from, v) {
			a.s.clusterVersion = step.version
			set := make([]string, 0, len(step.rows))
			for _, i := range step.rows {
				set = append(set, table[i].raise(a.s))
			}
			a.s.detCfg = detectorConfig(a.s.cfg)
			detail := fmt.Sprintf("cluster version %d: %s", step.version, strings.Join(set, " "))
			a.decide(&api.Decision{Kind: api.DecisionKind_DECISION_KIND_CONFIG, Actor: "cluster", Detail: detail})
			a.f.log.Info("fsm: config upgraded", "detail", detail)
		}
	}
	a.s.clusterVersion = v
}

// raiseHoldBand: the hold band starts at its default.
func raiseHoldBand(s *State) string {
	if s.cfg.HoldBandBp == nil {
		c := proto.Clone(s.cfg).(*api.Config)
		c.HoldBandBp = proto.Uint32(DefaultHoldBandBP)
		s.cfg = c
	}
	return fmt.Sprintf("hold_band_bp=%d", s.cfg.GetHoldBandBp())
}

// raiseFloorFollowsThreshold: the floor follows the threshold if it still
// is the version 1 default (half the threshold).
func raiseFloorFollowsThreshold(s *State) string {
	c := proto.Clone(s.cfg).(*api.Config)
	c.FloorFollowsThreshold = c.GetTopKeyAbsoluteFloor() == c.GetThreshold()/2
	s.cfg = c
	return fmt.Sprintf("floor_follows_threshold=%v", c.GetFloorFollowsThreshold())
}

// raiseOperatorBoundaries: a version 2 catalog keeps no record of who
// placed a boundary, so every boundary it has is marked as an operator's:
// after an upgrade, automatic merges undo only what version 3 split by
// itself, never an operator's version 2 layout. The catalog version does
// not move: the layout is the same.
func raiseOperatorBoundaries(s *State) string {
	next, n, err := s.cat.MarkAllStarts()
	if err != nil {
		// A catalog that passed restore and every apply is valid; should
		// it not be, every replica leaves it unmarked alike.
		return fmt.Sprintf("operator_starts=unmarked(%v)", err)
	}
	s.cat = next
	return fmt.Sprintf("operator_starts=%d", n)
}

// raiseAutoMerge: the merge settings start at their defaults.
func raiseAutoMerge(s *State) string {
	c := withMergeDefaults(s.cfg)
	if c != s.cfg {
		s.cfg = c
	}
	return fmt.Sprintf("merge_threshold_bp=%d merge_windows=%d merge_delay_ms=%d max_merges_per_cycle=%d merge_margin_bp=%d",
		c.GetMergeThresholdBp(), c.GetMergeWindows(), c.GetMergeDelayMs(), c.GetMaxMergesPerCycle(), c.GetMergeMarginBp())
}
