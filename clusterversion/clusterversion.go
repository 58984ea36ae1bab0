// Package clusterversion is the feature table: which replicated behaviour
// each cluster version turns on. Every package that gates behaviour on the
// replicated cluster_version asks it (Feature.EnabledAt, State.Has in fsm)
// instead of comparing version numbers; this file is the only non-test Go
// file outside the jepsen model that may compare them (the versiongate
// analyzer holds that).
//
// It is a leaf: it imports nothing of ours, holds no state and decides
// nothing about the replicated state itself. What a feature does beyond its
// gate — the detector rules it turns on, the hook that brings older state
// along when the version rises — lives with the code that owns that state
// (fsm).
package clusterversion

import (
	"errors"
	"fmt"
)

// Cluster versions (docs/design.md#cluster-versions-and-features). Each set
// of replicated changes released together is one version; testdata/upgrade/baseline records
// the last release of each.
const (
	Version1 = 1
	Version2 = 2
	Version3 = 3
	Version4 = 4
)

// Supported is the highest cluster_version this build can apply.
const Supported = Version4

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
	ShardGroups
	RangeMoves
	numFeatures
)

// row is one row of the table.
type row struct {
	// name is the feature's name in errors and docs (snake_case).
	name string
	// version is the cluster version that turns the feature on.
	version uint32
	// doc says in one line what the feature changes.
	doc string
}

// table is the feature table; docs/design.md ("Cluster versions and
// features") lists it and a test keeps the two equal.
var table = [numFeatures]row{
	HoldBand: {"hold_band", Version2,
		"a column scoring in [hold_band_bp, 100%) of the threshold holds a route's counter instead of resetting it (config hold_band_bp)"},
	FloorFollowsThreshold: {"floor_follows_threshold", Version2,
		"the top-key absolute floor follows the threshold (threshold/2) until an operator sets it; setting it to 0 makes it follow again"},
	ExplicitZeroWeights: {"explicit_zero_weights", Version2,
		"a read or write weight set to 0 (at bootstrap or by a patch) is kept as a present 0 instead of taking the default"},
	ScheduledStepChange: {"scheduled_step_change", Version2,
		"a step_ms change takes effect at the first boundary both steps share (next_step_ms, next_step_at_ms), so no column is lost"},
	EmptyPatchRefused: {"empty_patch_refused", Version2,
		"a SetConfig patch that sets no field is refused (it would only reset every hysteresis counter)"},
	ConfigLimits: {"config_limits", Version2,
		"max_auto_routes, threshold and top_key_absolute_floor have upper bounds (MaxAutoRoutesLimit, MaxScoreLimit)"},
	SampledEvidence: {"sampled_evidence", Version2,
		"column rows carry the merged operation sample, sample rates, raw sampled counts and variances"},
	BalanceSplitKeys: {"balance_split_keys", Version2,
		"the split key is the best-balanced point of bucket loads and sampled keys; a one-key route is already isolated by its shape"},
	LowerBoundIsolation: {"lower_bound_isolation", Version2,
		"single-key isolation tests share and floor on a lower confidence bound of the hot key's load"},
	ColumnExplanations: {"column_explanations", Version2,
		"an explanation's score, counter and reason come from one column, with the settings it was judged by; cold routes are explained too"},
	DecisionExplanations: {"decision_explanations", Version2,
		"planned and declined decisions keep the detector's explanation, so the why outlives the route"},
	StickyAbort: {"sticky_abort", Version2,
		"an operator's or stale abort before step 1 puts the planned route in cooldown, so the next hot column does not plan it again"},
	Admission: {"admission", Version2,
		"AdmitMember: a node that joins by itself must have been admitted from the raft address it gives"},
	StateCheck: {"state_check", Version2,
		"CheckState: a marker at which every replica hashes its state for the cross-replica comparison"},
	ActorNotes: {"actor_notes", Version2,
		"the actor is the authenticated identity; the caller's self-declared text is kept beside it as a note"},
	PreviousClusterIDs: {"previous_cluster_ids", Version2,
		"a cluster restored from a backup or recovered alone records the ids it had, so watchers resync"},
	ColumnRouteLoads: {"column_route_loads", Version3,
		"a column lists the load of every live reported route (route_loads), so an absent route was cold; rows carry only evidence"},
	ManualMerge: {"manual_merge", Version3,
		"MergeRange: an operator joins two adjacent ACTIVE routes of one group into a new route that records both parents; the split cooldown starts at the merge"},
	RequestFingerprints: {"request_fingerprints", Version3,
		"a request id is bound to its request: the table keeps a fingerprint and a description of the first one, and a reuse for another request is refused (REQUEST_ID_REUSED), never answered with the first result"},
	UnchangedPatchNoop: {"unchanged_patch_noop", Version3,
		"a SetConfig patch that leaves the config as it is changes nothing: no hysteresis reset, no decision; it answers \"unchanged\""},
	StepChangeWithoutColumns: {"step_change_without_columns", Version3,
		"a pending step change takes effect with the first fence renewal two of the longer step plus the grace past its boundary, even when no column came (an idle cluster)"},
	AutoMerge: {"auto_merge", Version3,
		"adjacent routes cold for merge_windows complete columns are merged by one-step merge ops (config merge_threshold_bp, merge_windows, merge_delay_ms, max_merges_per_cycle, merge_margin_bp)"},
	EvidenceCuts: {"evidence_cuts", Version3,
		"a cut rests on exact bucket loads and top-K counts first, samples only inside a bucket, may fall between a few keys of known load, and is made only when each side's share clears 20% at confidence (explained with its interval); a row without evidence is declined no_evidence"},
	HeavyKeyIsolation: {"heavy_key_isolation", Version3,
		"the heaviest key is isolated when its own load clears the threshold and the floor at confidence, whatever its share of the route"},
	HeatHistory: {"heat_history", Version3,
		"the key visualizer's heat history: each column with route_loads adds its band totals, each split and merge a mark; in snapshots and the state hash"},
	OperatorBoundariesKept: {"operator_boundaries_kept", Version3,
		"a bootstrap split key or a manual split's key marks the route it starts (operator_start); automatic merges never remove a marked boundary, a manual merge may; the raise marks every boundary the catalog has"},
	BoundedEvidence: {"bounded_evidence", Version3,
		"a column's rows (its evidence) total at most MaxColumnEvidenceBytes encoded; hot routes beyond it count through route_loads alone"},
	PooledEvidence: {"pooled_evidence", Version3,
		"a cut inside a bucket weighs each key by its evidence over the route's last 3 counted columns, not one (tracked pool of up to 512 keys, 16 KiB; in snapshots and the state hash)"},
	ShardGroups: {"shard_groups", Version4,
		"the shard group table (id, name, ACTIVE or DRAINING, capacity, data-node identities; at most 64 groups): AddGroup, SetGroup, RemoveGroup, a bootstrap over several groups; the raise makes a group of every group id the catalog uses"},
	RangeMoves: {"range_moves", Version4,
		"MoveRange: a MOVE op takes a route to another group in steps that wait for the data plane (begin, the target's copy, fence, the source's final watermark, the target's catch-up, commit; abort by an operator or after move_ttl_ms), each one catalog change delivered as a changed route"},
}

// ErrVersionTooLow: the cluster runs a version below the one a feature
// needs (a member has not been upgraded). The wrapping error names the
// feature, the version it needs and the version the cluster runs.
var ErrVersionTooLow = errors.New("cluster version too low")

// All lists every feature in table order.
func All() []Feature {
	out := make([]Feature, numFeatures)
	for f := range numFeatures {
		out[f] = f
	}
	return out
}

// String is the feature's name.
func (f Feature) String() string { return f.row().name }

// Version is the cluster version that turns f on: the min_version of a
// command that needs it.
func (f Feature) Version() uint32 { return f.row().version }

// Doc says in one line what f changes.
func (f Feature) Doc() string { return f.row().doc }

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

func (f Feature) row() *row {
	if f < 0 || f >= numFeatures {
		panic(fmt.Sprintf("clusterversion: unknown feature %d", int(f)))
	}
	return &table[f]
}

// IsSupported reports whether this build can apply cluster version v.
func IsSupported[V ~uint32 | ~uint64](v V) bool { return uint64(v) <= Supported }

// IsVersion reports whether v names a cluster version at all: 0 is unset.
func IsVersion(v uint32) bool { return v >= Version1 }

// Reaches reports whether a cluster (or a node) at version v runs what
// needs version need: a command's min_version, a cluster version a joining
// node must support.
func Reaches(v, need uint32) bool { return v >= need }

// Versions lists every cluster version this build supports, oldest first.
func Versions() []uint32 {
	out := make([]uint32, 0, Supported)
	for v := uint32(Version1); IsSupported(v); v++ {
		out = append(out, v)
	}
	return out
}
