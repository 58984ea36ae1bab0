package fsm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
)

// effect is what a feature of the table (clusterversion) does to the
// replicated state besides its gate: the detector rules it turns on and
// the hook that brings existing state along when the cluster version rises
// past the feature's version. They live here because the state they act on
// does.
type effect struct {
	// rules are the detector rules the feature turns on (0: none).
	rules detector.Rules
	// raise, if set, runs once when the cluster version rises to or past
	// the feature's version from below it (never at a bootstrap at that
	// version, whose defaults already hold): it brings the replicated state
	// to what the feature expects and returns "field=value" text for the
	// decision that records the raise. It replaces the fields of s it
	// changes, never modifies what they point to.
	raise func(s *State) string
}

// effects lists the features that do more than gate.
var effects = map[clusterversion.Feature]effect{
	clusterversion.HoldBand:               {rules: detector.RuleHoldBand, raise: raiseHoldBand},
	clusterversion.FloorFollowsThreshold:  {raise: raiseFloorFollowsThreshold},
	clusterversion.BalanceSplitKeys:       {rules: detector.RuleBalanceSplit},
	clusterversion.LowerBoundIsolation:    {rules: detector.RuleLowerBoundIsolation},
	clusterversion.ColumnExplanations:     {rules: detector.RuleColumnExplanations},
	clusterversion.AutoMerge:              {rules: detector.RuleMerge, raise: raiseAutoMerge},
	clusterversion.EvidenceCuts:           {rules: detector.RuleEvidenceCuts},
	clusterversion.HeavyKeyIsolation:      {rules: detector.RuleHeavyKeyIsolation},
	clusterversion.OperatorBoundariesKept: {raise: raiseOperatorBoundaries},
	clusterversion.PooledEvidence:         {rules: detector.RulePooledEvidence},
	clusterversion.ShardGroups:            {raise: raiseShardGroups},
	clusterversion.RangeMoves:             {raise: raiseRangeMoves},
}

// hookRow is one raise hook in table order, with the version it runs at.
type hookRow struct {
	name    string
	version uint32
	raise   func(s *State) string
}

// raiseHooks lists the features' raise hooks in table order.
func raiseHooks() []hookRow {
	var out []hookRow
	for _, f := range clusterversion.All() {
		if e := effects[f]; e.raise != nil {
			out = append(out, hookRow{name: f.String(), version: f.Version(), raise: e.raise})
		}
	}
	return out
}

// Has reports whether f is on at the state's cluster version.
func (s *State) Has(f clusterversion.Feature) bool { return f.EnabledAt(s.clusterVersion) }

// Require returns nil if f is on at the state's cluster version, else an
// error wrapping clusterversion.ErrVersionTooLow.
func (s *State) Require(f clusterversion.Feature) error { return f.CheckAt(s.clusterVersion) }

// RaisesAt reports whether a rise to cluster version v runs raise hooks,
// and so records one "cluster version v: …" CONFIG decision. The
// rolling-upgrade process tests ask it to know which decisions a raise
// must have written.
func RaisesAt(v uint32) bool {
	return len(raiseSteps(raiseHooks(), v-1, v)) > 0
}

// rulesAt is the detector rule set of a cluster version: the rules of
// every feature on at it.
func rulesAt(version uint32) detector.Rules {
	var r detector.Rules
	for f, e := range effects {
		if f.EnabledAt(version) {
			r |= e.rules
		}
	}
	return r
}

// hookStep is the raise hooks of one crossed version: rows of a hook
// table, in table order.
type hookStep struct {
	version uint32
	rows    []int
}

// raiseSteps lists the raise hooks a raise from `from` to `to` crosses:
// every row of table whose version lies in (from, to], by version, then in
// table order. A jump over several versions runs the
// hooks of each in turn, as if the cluster had stopped at every one.
func raiseSteps(table []hookRow, from, to uint32) []hookStep {
	var rows []int
	for i, r := range table {
		if !clusterversion.Reaches(from, r.version) && clusterversion.Reaches(to, r.version) {
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
func (a *applier) raiseVersion(table []hookRow, v uint32) {
	from := a.s.clusterVersion
	if clusterversion.Reaches(from, v) {
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

// raiseRangeMoves: the move and placement settings start at their
// defaults (placement off).
func raiseRangeMoves(s *State) string {
	s.cfg = withMoveDefaults(s.cfg)
	c := s.cfg
	return fmt.Sprintf("move_ttl_ms=%d cross_group=false placement_windows=%d move_cooldown_ms=%d max_moves_per_cycle=%d move_margin_bp=%d",
		c.GetMoveTtlMs(), c.GetPlacementWindows(), c.GetMoveCooldownMs(), c.GetMaxMovesPerCycle(), c.GetMoveMarginBp())
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
