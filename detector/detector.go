// Package detector decides when a route is hot and where to split it
// (docs/design.md#the-detector), and which cold neighbours to merge
// (docs/design.md#merges, merge.go). It runs inside the FSM's Apply of
// ObserveColumn on every replica, so it is pure: no I/O, no goroutines, no
// clock, no randomness, no map iteration order in outputs, integer arithmetic
// only. "Now" and every other input are passed in explicitly.
//
// State is an immutable value: Observe and the On* transitions return a new
// State and never modify the one they were given, so the FSM can hand the
// old one to a snapshot in O(1).
package detector

import (
	"github.com/hotsplit/hotsplit/catalog"
)

// Reason mirrors api.Reason; the numeric values are equal (the fsm package
// tests this), so the detector stays free of the generated code.
type Reason int32

// Origin mirrors api.SplitOrigin; the numeric values are equal.
type Origin int32

// Reasons (see api.Reason for their meaning).
const (
	ReasonUnspecified       Reason = 0
	ReasonPlanned           Reason = 1
	ReasonCounting          Reason = 2
	ReasonCooldown          Reason = 3
	ReasonNoSplitKey        Reason = 4
	ReasonRouteCap          Reason = 5
	ReasonBudgetExhausted   Reason = 6
	ReasonNonActive         Reason = 7
	ReasonInLiveOp          Reason = 8
	ReasonSuppressedDisable Reason = 9
	ReasonAbsoluteFloor     Reason = 10
	ReasonTopKDegraded      Reason = 11
	ReasonTopKErrorBound    Reason = 12
	ReasonAlreadyIsolated   Reason = 13
	ReasonKeyTooLong        Reason = 14
	ReasonTopKShare         Reason = 15
	ReasonNoTopK            Reason = 16
	// RuleHoldBand and RuleColumnExplanations only.
	ReasonHoldBand       Reason = 40
	ReasonBelowThreshold Reason = 41
	// RuleMerge only: merge explanations (Tracked.Merge).
	ReasonMergePlanned    Reason = 50
	ReasonMergeDelay      Reason = 51
	ReasonMergeMargin     Reason = 52
	ReasonMergeSuppressed Reason = 53
	ReasonMergeBudget     Reason = 54
	// RuleEvidenceCuts only.
	ReasonNoEvidence   Reason = 60
	ReasonCutUncertain Reason = 61
)

// Origins (see api.SplitOrigin).
const (
	OriginUnspecified              Origin = 0
	OriginManual                   Origin = 1
	OriginIsolationCompound        Origin = 2
	OriginIsolationSingleLowerEdge Origin = 3
	OriginIsolationSingleUpperEdge Origin = 4
	OriginSubBucketMedian          Origin = 5
	// RuleBalanceSplit: the best-balanced point of the evidence (see balance).
	OriginBalance Origin = 40
)

// Evidence mirrors api.SplitEvidence: what placed a split (RuleEvidenceCuts
// and RuleHeavyKeyIsolation); the numeric values are equal.
type Evidence int32

// Evidence kinds (see api.SplitEvidence).
const (
	EvidenceUnspecified Evidence = 0
	// EvidenceBuckets: a cut at a bucket boundary; its side shares are
	// exact bucket loads.
	EvidenceBuckets Evidence = 1
	// EvidenceTopKeys: a cut between two keys whose loads the top-K counts
	// give, inside one bucket; the interval comes from their sampling
	// variance.
	EvidenceTopKeys Evidence = 2
	// EvidenceSamples: a cut placed among sampled keys inside one bucket;
	// the interval comes from the sample.
	EvidenceSamples Evidence = 3
	// EvidenceKeyLoad: the heavy key isolated by its own load, whatever its
	// share (RuleHeavyKeyIsolation).
	EvidenceKeyLoad Evidence = 4
)

// Rules is the set of rules Observe applies on top of the first release's:
// strict hysteresis, the sub-bucket median split key, and isolation on the
// point estimate of the hot key's load (the zero value). Which rules are on is
// replicated behaviour: the fsm derives the set from the cluster version
// through its feature table (fsm/versions.go), so that a cluster with an older
// member keeps the older behaviour on every replica
// (docs/design.md#cluster-versions-and-features). Each rule is one flag; a new
// rule is a new flag and a new row of that table, never a comparison of rule or
// version numbers.
type Rules uint32

// The rules. Each names one behaviour and is tested on its own.
const (
	// RuleHoldBand: a column scoring in the hold band (HoldBandBP of the
	// threshold up to it) holds a route's counter instead of resetting it.
	RuleHoldBand Rules = 1 << iota
	// RuleBalanceSplit: a split key at the best-balanced point of bucket
	// loads and sampled keys, with at least MinSideShareBP of the load on
	// each side by the evidence and the shortest separator as boundary
	// (else no_split_key); a route [H, H·0x00) is already_isolated by its
	// shape; the explanation keeps the numbers behind the cut.
	RuleBalanceSplit
	// RuleLowerBoundIsolation: isolation's share and floor tests use a
	// lower confidence bound of the hot key's load, the share measured
	// within the sample when the row says how much was sampled.
	RuleLowerBoundIsolation
	// RuleColumnExplanations: an explanation's score, counter and reason
	// always come from one column, with the settings it was judged by; a
	// tracked route that is not hot is explained too (hold_band, or
	// below_threshold once when it cools).
	RuleColumnExplanations
	// RuleMerge: adjacent routes of one group that have been cold for
	// MergeWindows complete columns are merged (merge.go); the state keeps
	// how long routes have been cold (cold.go).
	RuleMerge
	// RuleEvidenceCuts: with RuleBalanceSplit, the cut is chosen on exact
	// bucket loads and top-K counts first, samples only placing it inside
	// a bucket; each side's share carries a confidence interval and a cut
	// is refused (cut_uncertain) unless both lower bounds clear
	// MinSideShareBP; a cut between keys of known load may rest on fewer
	// than four sampled keys; a row without any evidence is declined
	// no_evidence (evidence.go).
	RuleEvidenceCuts
	// RuleHeavyKeyIsolation: the heaviest key is isolated when the lower
	// confidence bound of its own load clears the threshold (and the
	// floor), whatever its share of the route.
	RuleHeavyKeyIsolation
	// RulePooledEvidence: with RuleEvidenceCuts, a cut inside a bucket is
	// placed on the key evidence of the route's last PoolColumns counted
	// columns, not of one column alone (pool.go); the tracked entry keeps
	// the earlier columns' keys (Tracked.Pool).
	RulePooledEvidence
)

// AllRules is every rule this build's detector knows.
const AllRules = RuleHoldBand | RuleBalanceSplit | RuleLowerBoundIsolation | RuleColumnExplanations |
	RuleMerge | RuleEvidenceCuts | RuleHeavyKeyIsolation | RulePooledEvidence

// Has reports whether every rule of x is in r.
func (r Rules) Has(x Rules) bool { return r&x == x }

// MinSideShareBP is the least share of a route's load (basis points) that a
// RuleBalanceSplit split key must put on each side, by the evidence: a split that
// moves less than a fifth of the load away relieves too little to be worth
// two routes.
const MinSideShareBP = 2000

// Config mirrors the detector fields of the replicated api.Config. Scores
// and floors are weighted operations per minute; shares are basis points.
type Config struct {
	Threshold           uint64
	WriteWeight         uint32
	ReadWeight          uint32
	CandidateWindows    uint32
	CooldownMs          uint64
	MaxSplitsPerCycle   uint32
	MaxAutoRoutes       uint32
	TopKeyShareBP       uint32
	TopKeyAbsoluteFloor uint64
	Buckets             uint32
	SmoothingWindows    uint32
	// HoldBandBP (RuleHoldBand): a column scoring in [HoldBandBP·Threshold/10000,
	// Threshold) holds the counter instead of resetting it; 0 = strict.
	HoldBandBP uint32
	// The merge settings (RuleMerge, merge.go); all zero below version 3.
	// A route scoring below MergeThresholdBP of the threshold is cold; a
	// pair of adjacent routes cold for MergeWindows consecutive complete
	// columns, each created at least MergeDelayMs ago, whose merged
	// estimate lies MergeMarginBP of the threshold below it, is merged; at
	// most MaxMergesPerCycle per column (0: no automatic merges).
	MergeThresholdBP  uint32
	MergeWindows      uint32
	MergeDelayMs      uint64
	MaxMergesPerCycle uint32
	MergeMarginBP     uint32
}

// Explanation is the detector's last word on one route, with the numbers
// behind it. Field meanings follow api.Explanation. AtMs and FirstAtMs are
// column ends (Column.AtMs); Repeats counts the further consecutive columns
// that gave the same Reason (0 the first time). Scores and per-minute
// figures are weighted operations per minute of that column.
type Explanation struct {
	Reason            Reason
	Origin            Origin
	IsolationReason   Reason
	AtMs              uint64
	FirstAtMs         uint64
	Repeats           uint32
	Score             uint64
	ConsecutiveOver   uint32
	CooldownLeftMs    uint64
	SplitKeys         [][]byte
	HotKey            []byte
	HotKeyLowerPerMin uint64
	HotKeyUpperPerMin uint64
	HotKeyShareBP     uint32
	MedianBucket      uint32
	OpID              uint64
	ProjectedRoutes   uint64
	// RuleBalanceSplit and RuleColumnExplanations only (see api.Explanation
	// fields 40-49).
	LeftShareBP        uint32
	RightShareBP       uint32
	BucketShareBP      uint32
	HotKeyUpperShareBP uint32
	SampleRate         uint32
	Floor              uint64
	Threshold          uint64
	CandidateWindows   uint32
	HoldBandBP         uint32
	SamplePoints       uint32
	// RuleMerge only (see api.Explanation fields 60-69): a merge
	// explanation's pair and the numbers it was judged by. Score is the
	// route's own score in the column.
	MergePartner     uint64
	MergedEstimate   uint64
	MergeLimit       uint64
	MergeThreshold   uint64
	ColdColumns      uint32
	MergeWindows     uint32
	MergeDelayLeftMs uint64
	// RuleEvidenceCuts and RuleHeavyKeyIsolation only (see api.Explanation
	// fields 70-79): what placed the split (or the best refused cut), the
	// confidence interval of each side's share, and how many keys of the
	// route had loads known from the top-K counts.
	Evidence                       Evidence
	LeftShareLoBP, LeftShareHiBP   uint32
	RightShareLoBP, RightShareHiBP uint32
	KnownKeys                      uint32
}

// Tracked is the sparse per-route state (docs/design.md#the-state-machine):
// kept only while the route has a non-zero counter, a cooldown not yet over, or
// a recent explanation.
type Tracked struct {
	RouteID         uint64
	ConsecutiveOver uint32
	LastScore       uint64
	CooldownUntilMs uint64
	// Most recent last; at most Config.SmoothingWindows. Display only.
	RecentScores []uint64
	Explanation  Explanation
	// Merge is the last merge explanation (RuleMerge): why the route was or
	// was not merged with a neighbour; zero when there is none.
	Merge Explanation
	// Pool is the key evidence of the route's previous counted columns
	// (RulePooledEvidence, pool.go): at most PoolColumns−1 columns and
	// MaxPooledKeys keys, in (age, key) order; nil without the rule.
	Pool []PooledKey
}

// PooledKey is one key's evidence from an earlier column of a route
// (RulePooledEvidence): its evidence weight and variance as that column's
// evidence had them (evidence.go), whether its load was known from the
// top-K counts, and its age (0: the column before the current one).
type PooledKey struct {
	Key              []byte
	Weight, Variance uint64
	Known            bool
	Age              uint32
}

// KeyEstimate bounds one key's weighted operations in a column, already
// scaled by the reporters' sample rates: the true count lies in
// [Lower, Upper]. Isolation decides on Lower; Upper only explains a miss
// (topk_error_bound).
type KeyEstimate struct {
	Key          []byte
	Lower, Upper uint64
	// RuleLowerBoundIsolation: the raw sampled reads and writes behind Lower, and Lower's
	// variance as a sum of scaled Poisson counts (Σ rate²·(ww²·writes +
	// wr²·reads)); isolation decides on the lower confidence bound of
	// Lower (see lowerBound). Zero variance: Lower is taken as exact.
	SampledReads, SampledWrites uint64
	Variance                    uint64
}

// WeightedKey is one key of a row's operation sample with the weighted
// operations it stands for.
type WeightedKey struct {
	Key    []byte
	Weight uint64
}

// Row is one route's load in a column.
type Row struct {
	RouteID               uint64
	Reads, Writes         uint64
	ReadBytes, WriteBytes uint64
	// Weighted operations per bucket of catalog.NewLayout(route, len(Buckets)).
	// A count that is not that layout's effective K is no bucket evidence.
	Buckets      []uint64
	TopKeys      []KeyEstimate
	TopKDegraded bool
	// RuleBalanceSplit: a sample of the row's operations, distinct keys (where the
	// load lies inside a bucket), and the largest sample rate behind it.
	Samples    []WeightedKey
	SampleRate uint32
	// RuleLowerBoundIsolation: the row's sampled operations scaled and weighted like the
	// keys' Lower, and their variance; a hot key's share is measured
	// against them (one sample). 0: unknown, the share is measured against
	// the exact load instead.
	SampledTotal, SampledVariance uint64
}

// Column is one cluster-wide load window [WindowStartMs, AtMs).
type Column struct {
	WindowStartMs uint64
	AtMs          uint64
	Rows          []Row
	// Complete: the rows list the load of every live route that had any
	// (a version 3 column with route_loads), so a live route without a row
	// was cold. Only complete columns count towards a merge (RuleMerge).
	Complete bool
}

// LiveOp is the footprint of an op that is not yet DONE or ABORTED: the
// routes it will still split (never re-promoted while it lives) and how many
// routes it will still add.
type LiveOp struct {
	OpID           uint64
	RouteIDs       []uint64
	RemainingDelta int
}

// Input is everything Observe reads besides the state and the column.
type Input struct {
	Config  Config
	Catalog *catalog.Catalog
	LiveOps []LiveOp
	// NowMs is the apply time (physical ms of the entry's HLC); a route is
	// in cooldown while NowMs < CooldownUntilMs.
	NowMs uint64
	// Enabled is the switch: when false, eligible routes are explained as
	// suppressed_disabled and nothing is planned.
	Enabled bool
	// Planned ops get ids NextOpID, NextOpID+1, … in plan order.
	NextOpID uint64
	// Rules are the rules on at the replicated cluster version.
	Rules Rules
	// CreatedAtMs is when a route was created: the physical time of its
	// split_at_hlc or merged_at_hlc (RuleMerge: no merge within
	// MergeDelayMs of it, and only columns that started after it count as
	// its cold columns). nil: every route is taken as created at 0.
	CreatedAtMs func(*catalog.RouteDescriptor) uint64
}

// Plan is an op the detector decided on: one split key (one step) or two
// (a compound isolation [H, H·0x00): two steps). Keys are in step order:
// step 1 splits RouteID at Keys[0]; step 2 of a compound splits step 1's
// right child [H, end) at Keys[1], so that child is the one OnSplit must
// treat as consumed. RouteDelta is the routes the op adds (1 or 2; -1 for
// a merge).
type Plan struct {
	// Kind is PlanSplit or, under RuleMerge, PlanMerge: one MergeRange of
	// RouteID (the left route) and RightRouteID, RouteDelta -1, Score the
	// merged estimate, no keys.
	Kind         PlanKind
	RightRouteID uint64
	OpID         uint64
	RouteID      uint64
	Origin       Origin
	Keys         [][]byte
	RouteDelta   int
	Score        uint64
	Explanation  Explanation
}

// PlanKind says what a Plan does.
type PlanKind uint8

// Plan kinds.
const (
	PlanSplit PlanKind = iota
	PlanMerge
)
