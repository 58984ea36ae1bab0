package fsm

import (
	"errors"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
	"google.golang.org/protobuf/proto"
)

// ErrInvalidConfig wraps every ValidateConfig failure; the message names
// the field.
var ErrInvalidConfig = errors.New("invalid config")

// Limits of the load fields (the detector bounds its own): a step from
// 10 ms (tests in simulated time) to an hour, an op TTL up to 7 days.
const (
	minStepMs     = 10
	maxStepMs     = 3600 * 1000
	maxDurationMs = 7 * 24 * 3600 * 1000
)

// DefaultHoldBandBP is the hysteresis hold band clusters start with once
// HoldBand is on: a column scoring in [80%, 100%) of the threshold holds a
// route's counter. Chosen from the sim comparison in docs/benchmarks.md.
const DefaultHoldBandBP = 8000

// DefaultMoveTTLMs is how long a move's step waits for the data plane's
// acknowledgements before the leader aborts it (RangeMoves): ten minutes,
// room for a copy of a large route. minMoveTTLMs is the least one may set.
const (
	DefaultMoveTTLMs = 10 * 60 * 1000
	minMoveTTLMs     = 1000
)

// Automatic placement's defaults (docs/design.md#automatic-placement): a
// group over capacity for 3 complete columns moves one route per column,
// to a group that keeps 10% of its capacity free; a moved route stays 30
// minutes.
const (
	DefaultPlacementWindows = 3
	DefaultMoveCooldownMs   = 30 * 60 * 1000
	DefaultMaxMovesPerCycle = 1
	DefaultMoveMarginBP     = 1000
	maxPlacementWindows     = 100
	maxMoveMarginBP         = 9000
)

// maxLCMWaitMs bounds how far ahead a step change may take effect: the
// boundary both steps agree on (a multiple of both) must come within a day.
const maxLCMWaitMs = 24 * 3600 * 1000

// DefaultConfig returns the docs/design.md#the-detector/§8 defaults: Ww 4, Wr 1, threshold
// 50000 weighted ops/min, 3 candidate windows, 10 min cooldown, 1 split per
// cycle, 1024 auto routes, top-key share 80%, absolute floor threshold/2
// (following the threshold), 16 buckets, a 60 s step, op TTL = cooldown,
// 5 smoothing windows, a grace of half a step and the hold band of
// DefaultHoldBandBP.
func DefaultConfig() *api.Config {
	return &api.Config{
		Threshold:             50000,
		WriteWeight:           proto.Uint32(4),
		ReadWeight:            proto.Uint32(1),
		CandidateWindows:      3,
		CooldownMs:            10 * 60 * 1000,
		MaxSplitsPerCycle:     1,
		MaxAutoRoutes:         1024,
		TopKeyShareBp:         8000,
		TopKeyAbsoluteFloor:   25000,
		Buckets:               16,
		StepMs:                60 * 1000,
		OpTtlMs:               10 * 60 * 1000,
		SmoothingWindows:      5,
		GraceMs:               30 * 1000,
		HoldBandBp:            proto.Uint32(DefaultHoldBandBP),
		FloorFollowsThreshold: true,
		MergeThresholdBp:      proto.Uint32(detector.DefaultMergeThresholdBP),
		MergeWindows:          proto.Uint32(detector.DefaultMergeWindows),
		MergeDelayMs:          proto.Uint64(detector.DefaultMergeDelayMs),
		MaxMergesPerCycle:     proto.Uint32(detector.DefaultMaxMergesPerCycle),
		MergeMarginBp:         proto.Uint32(detector.DefaultMergeMarginBP),
	}
}

// withMergeDefaults returns c with every absent merge setting (AutoMerge) at
// its default, or c itself when none is absent. c is not modified.
func withMergeDefaults(c *api.Config) *api.Config {
	if c.MergeThresholdBp != nil && c.MergeWindows != nil && c.MergeDelayMs != nil && c.MaxMergesPerCycle != nil && c.MergeMarginBp != nil {
		return c
	}
	d := DefaultConfig()
	out := proto.Clone(c).(*api.Config)
	if out.MergeThresholdBp == nil {
		out.MergeThresholdBp = d.MergeThresholdBp
	}
	if out.MergeWindows == nil {
		// Longer than the split windows, whatever they are.
		out.MergeWindows = proto.Uint32(max(d.GetMergeWindows(), out.GetCandidateWindows()+1))
	}
	if out.MergeDelayMs == nil {
		out.MergeDelayMs = d.MergeDelayMs
	}
	if out.MaxMergesPerCycle == nil {
		out.MaxMergesPerCycle = d.MaxMergesPerCycle
	}
	if out.MergeMarginBp == nil {
		out.MergeMarginBp = d.MergeMarginBp
	}
	return out
}

// clearMerge drops the merge settings (a version below AutoMerge).
func clearMerge(c *api.Config) {
	c.MergeThresholdBp, c.MergeWindows, c.MergeDelayMs, c.MaxMergesPerCycle, c.MergeMarginBp = nil, nil, nil, nil, nil
}

// mergeFieldSet names a merge setting p sets ("" when none).
func mergeFieldSet(p *api.ConfigPatch) string {
	switch {
	case p.MergeThresholdBp != nil:
		return "merge_threshold_bp"
	case p.MergeWindows != nil:
		return "merge_windows"
	case p.MergeDelayMs != nil:
		return "merge_delay_ms"
	case p.MaxMergesPerCycle != nil:
		return "max_merges_per_cycle"
	case p.MergeMarginBp != nil:
		return "merge_margin_bp"
	}
	return ""
}

// withDefaults returns a copy of c (a Bootstrap config) whose unset fields
// take the defaults. Derived defaults follow the given values: the absolute
// floor is half the (given) threshold, the op TTL the cooldown, the grace
// half the step.
//
// Without ExplicitZeroWeights a zero weight is unset (the version 1 rule: a
// zero weight at bootstrap became the default); with it a weight is unset
// only when absent, so an explicit 0 is kept. With FloorFollowsThreshold an
// absolute floor left unset follows the threshold; with HoldBand an absent
// hold band takes DefaultHoldBandBP. The settings of a feature that is off
// stay absent, so that the state hashes of mixed-version replicas agree.
func withDefaults(c *api.Config, version uint32) *api.Config {
	d := DefaultConfig()
	out := &api.Config{}
	if c != nil {
		out = proto.Clone(c).(*api.Config)
	}
	fill64 := func(v *uint64, def uint64) {
		if *v == 0 {
			*v = def
		}
	}
	fill32 := func(v *uint32, def uint32) {
		if *v == 0 {
			*v = def
		}
	}
	fillWeight := func(v **uint32, def *uint32) {
		if *v == nil || (!clusterversion.ExplicitZeroWeights.EnabledAt(version) && **v == 0) {
			*v = proto.Uint32(*def)
		}
	}
	fill64(&out.Threshold, d.Threshold)
	fillWeight(&out.WriteWeight, d.WriteWeight)
	fillWeight(&out.ReadWeight, d.ReadWeight)
	fill32(&out.CandidateWindows, d.CandidateWindows)
	fill64(&out.CooldownMs, d.CooldownMs)
	fill32(&out.MaxSplitsPerCycle, d.MaxSplitsPerCycle)
	fill32(&out.MaxAutoRoutes, d.MaxAutoRoutes)
	fill32(&out.TopKeyShareBp, d.TopKeyShareBp)
	switch {
	case !clusterversion.HoldBand.EnabledAt(version):
		out.HoldBandBp = nil
	case out.HoldBandBp == nil:
		out.HoldBandBp = proto.Uint32(DefaultHoldBandBP)
	}
	out.FloorFollowsThreshold = clusterversion.FloorFollowsThreshold.EnabledAt(version) && out.TopKeyAbsoluteFloor == 0
	if !clusterversion.ScheduledStepChange.EnabledAt(version) {
		out.NextStepMs, out.NextStepAtMs = 0, 0
	}
	fill64(&out.TopKeyAbsoluteFloor, out.Threshold/2)
	fill32(&out.Buckets, d.Buckets)
	fill64(&out.StepMs, d.StepMs)
	fill64(&out.OpTtlMs, out.CooldownMs)
	fill32(&out.SmoothingWindows, d.SmoothingWindows)
	fill64(&out.GraceMs, out.StepMs/2)
	if clusterversion.AutoMerge.EnabledAt(version) {
		out = withMergeDefaults(out)
	} else {
		clearMerge(out)
	}
	if clusterversion.RangeMoves.EnabledAt(version) {
		out = withMoveDefaults(out)
	} else {
		out.MoveTtlMs, out.CrossGroup, out.PlacementWindows, out.MoveCooldownMs, out.MaxMovesPerCycle, out.MoveMarginBp = nil, false, nil, nil, nil, nil
	}
	return out
}

// withMoveDefaults returns c with every absent move and placement setting
// (RangeMoves) at its default; c itself if none is absent.
func withMoveDefaults(c *api.Config) *api.Config {
	if c.MoveTtlMs != nil && c.PlacementWindows != nil && c.MoveCooldownMs != nil && c.MaxMovesPerCycle != nil && c.MoveMarginBp != nil {
		return c
	}
	out := proto.Clone(c).(*api.Config)
	fillOpt64(&out.MoveTtlMs, DefaultMoveTTLMs)
	fillOpt32(&out.PlacementWindows, DefaultPlacementWindows)
	fillOpt64(&out.MoveCooldownMs, DefaultMoveCooldownMs)
	fillOpt32(&out.MaxMovesPerCycle, DefaultMaxMovesPerCycle)
	fillOpt32(&out.MoveMarginBp, DefaultMoveMarginBP)
	return out
}

func fillOpt64(dst **uint64, v uint64) {
	if *dst == nil {
		*dst = proto.Uint64(v)
	}
}

func fillOpt32(dst **uint32, v uint32) {
	if *dst == nil {
		*dst = proto.Uint32(v)
	}
}

// movePatchField names a move or placement setting p sets ("" when none).
func movePatchField(p *api.ConfigPatch) string {
	switch {
	case p.MoveTtlMs != nil:
		return "move_ttl_ms"
	case p.CrossGroup != nil:
		return "cross_group"
	case p.PlacementWindows != nil:
		return "placement_windows"
	case p.MoveCooldownMs != nil:
		return "move_cooldown_ms"
	case p.MaxMovesPerCycle != nil:
		return "max_moves_per_cycle"
	case p.MoveMarginBp != nil:
		return "move_margin_bp"
	}
	return ""
}

// onlyPlacement reports whether p sets move or placement settings only:
// such a change resets no split hysteresis.
func onlyPlacement(p *api.ConfigPatch) bool {
	if movePatchField(p) == "" {
		return false
	}
	q := proto.Clone(p).(*api.ConfigPatch)
	q.MoveTtlMs, q.CrossGroup, q.PlacementWindows, q.MoveCooldownMs, q.MaxMovesPerCycle, q.MoveMarginBp = nil, nil, nil, nil, nil, nil
	return PatchIsEmpty(q)
}

// Upper bounds of ConfigLimits: a probe set max_auto_routes to 2^32−1 and
// the floor without limit. They are checked by the transport before
// anything is proposed and by Apply once ConfigLimits is on, so an older
// replica never disagrees with a newer one.
const (
	// MaxAutoRoutesLimit bounds max_auto_routes.
	MaxAutoRoutesLimit = 1 << 20
	// MaxScoreLimit bounds threshold and top_key_absolute_floor (weighted
	// operations per minute: about 10^12, far beyond any store).
	MaxScoreLimit = 1 << 40
)

// ValidateConfigAt is ValidateConfig plus the bounds that hold at the
// given cluster version (ConfigLimits).
func ValidateConfigAt(c *api.Config, clusterVersion uint32) error {
	if err := ValidateConfig(c); err != nil {
		return err
	}
	if !clusterversion.ConfigLimits.EnabledAt(clusterVersion) {
		return nil
	}
	bad := func(field string, v, limit uint64) error {
		return fmt.Errorf("%w: %s: %d above the limit of %d", ErrInvalidConfig, field, v, limit)
	}
	switch {
	case c.MaxAutoRoutes > MaxAutoRoutesLimit:
		return bad("max_auto_routes", uint64(c.MaxAutoRoutes), MaxAutoRoutesLimit)
	case c.Threshold > MaxScoreLimit:
		return bad("threshold", c.Threshold, MaxScoreLimit)
	case c.TopKeyAbsoluteFloor > MaxScoreLimit:
		return bad("top_key_absolute_floor", c.TopKeyAbsoluteFloor, MaxScoreLimit)
	}
	return nil
}

// PatchIsEmpty reports whether p sets no field. With EmptyPatchRefused an
// empty patch is refused: it would change nothing but reset every
// hysteresis counter.
func PatchIsEmpty(p *api.ConfigPatch) bool {
	return p == nil || proto.Size(p) == 0
}

// ValidateConfig checks every field of c; the error names the first field
// out of range, e.g. "invalid config: threshold: must be >= 1". The
// detector's fields are checked by detector.Config.Validate (one rule set
// for both), the load fields here.
func ValidateConfig(c *api.Config) error {
	if c == nil {
		return fmt.Errorf("%w: config: required", ErrInvalidConfig)
	}
	if err := detectorConfig(c).Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.StepMs < minStepMs || c.StepMs > maxStepMs:
		return bad("step_ms", "%d not in [%d, %d]", c.StepMs, minStepMs, maxStepMs)
	case c.OpTtlMs < 1 || c.OpTtlMs > maxDurationMs:
		return bad("op_ttl_ms", "%d not in [1, %d]", c.OpTtlMs, maxDurationMs)
	case c.GraceMs > c.StepMs:
		return bad("grace_ms", "%d above step_ms %d", c.GraceMs, c.StepMs)
	case (c.NextStepMs == 0) != (c.NextStepAtMs == 0):
		return bad("next_step_ms", "%d and next_step_at_ms %d must be set together", c.NextStepMs, c.NextStepAtMs)
	case c.NextStepMs != 0 && (c.NextStepMs < minStepMs || c.NextStepMs > maxStepMs):
		return bad("next_step_ms", "%d not in [%d, %d]", c.NextStepMs, minStepMs, maxStepMs)
	case c.NextStepMs != 0 && (c.NextStepAtMs%c.StepMs != 0 || c.NextStepAtMs%c.NextStepMs != 0):
		return bad("next_step_at_ms", "%d is not a boundary of both step_ms %d and next_step_ms %d", c.NextStepAtMs, c.StepMs, c.NextStepMs)
	case c.NextStepMs != 0 && c.GraceMs > c.NextStepMs:
		return bad("grace_ms", "%d above next_step_ms %d", c.GraceMs, c.NextStepMs)
	case c.MoveTtlMs != nil && (c.GetMoveTtlMs() < minMoveTTLMs || c.GetMoveTtlMs() > maxDurationMs):
		return bad("move_ttl_ms", "%d not in [%d, %d]", c.GetMoveTtlMs(), minMoveTTLMs, maxDurationMs)
	case c.PlacementWindows != nil && (c.GetPlacementWindows() < 1 || c.GetPlacementWindows() > maxPlacementWindows):
		return bad("placement_windows", "%d not in [1, %d]", c.GetPlacementWindows(), maxPlacementWindows)
	case c.MoveCooldownMs != nil && c.GetMoveCooldownMs() > maxDurationMs:
		return bad("move_cooldown_ms", "%d above %d", c.GetMoveCooldownMs(), maxDurationMs)
	case c.MaxMovesPerCycle != nil && c.GetMaxMovesPerCycle() > MaxGroups:
		return bad("max_moves_per_cycle", "%d above %d (one move per source and per target group)", c.GetMaxMovesPerCycle(), MaxGroups)
	case c.MoveMarginBp != nil && c.GetMoveMarginBp() > maxMoveMarginBP:
		return bad("move_margin_bp", "%d above %d", c.GetMoveMarginBp(), maxMoveMarginBP)
	}
	return nil
}

// ApplyPatch returns a new Config: c with the fields set in p replaced,
// under the rules of cluster version `version`. Neither argument is
// modified.
//
// FloorFollowsThreshold: the absolute floor follows the threshold
// (threshold/2) while floor_follows_threshold holds; setting
// top_key_absolute_floor pins it (floor_follows_threshold off), and setting
// it to 0 makes it follow the threshold again. ExplicitZeroWeights: a
// weight set to 0 is kept as a present 0 (without it, stored absent).
// ScheduledStepChange: a step_ms patch is not applied here, PatchConfig
// schedules it (ScheduleStep); without it the step applies at once.
// HoldBand: hold_band_bp is patched.
func ApplyPatch(c *api.Config, p *api.ConfigPatch, version uint32) *api.Config {
	out := &api.Config{}
	if c != nil {
		out = proto.Clone(c).(*api.Config)
	}
	if p == nil {
		return out
	}
	set64 := func(dst *uint64, v *uint64) {
		if v != nil {
			*dst = *v
		}
	}
	set32 := func(dst *uint32, v *uint32) {
		if v != nil {
			*dst = *v
		}
	}
	setWeight := func(dst **uint32, v *uint32) {
		switch {
		case v == nil:
		case *v == 0 && !clusterversion.ExplicitZeroWeights.EnabledAt(version):
			*dst = nil
		default:
			*dst = proto.Uint32(*v)
		}
	}
	set64(&out.Threshold, p.Threshold)
	setWeight(&out.WriteWeight, p.WriteWeight)
	setWeight(&out.ReadWeight, p.ReadWeight)
	set32(&out.CandidateWindows, p.CandidateWindows)
	set64(&out.CooldownMs, p.CooldownMs)
	set32(&out.MaxSplitsPerCycle, p.MaxSplitsPerCycle)
	set32(&out.MaxAutoRoutes, p.MaxAutoRoutes)
	set32(&out.TopKeyShareBp, p.TopKeyShareBp)
	set64(&out.TopKeyAbsoluteFloor, p.TopKeyAbsoluteFloor)
	set32(&out.Buckets, p.Buckets)
	if !clusterversion.ScheduledStepChange.EnabledAt(version) {
		set64(&out.StepMs, p.StepMs)
	}
	set64(&out.OpTtlMs, p.OpTtlMs)
	set32(&out.SmoothingWindows, p.SmoothingWindows)
	set64(&out.GraceMs, p.GraceMs)
	if clusterversion.HoldBand.EnabledAt(version) && p.HoldBandBp != nil {
		out.HoldBandBp = proto.Uint32(*p.HoldBandBp)
	}
	if clusterversion.AutoMerge.EnabledAt(version) {
		for _, f := range []struct{ dst, v **uint32 }{
			{&out.MergeThresholdBp, &p.MergeThresholdBp}, {&out.MergeWindows, &p.MergeWindows},
			{&out.MaxMergesPerCycle, &p.MaxMergesPerCycle}, {&out.MergeMarginBp, &p.MergeMarginBp},
		} {
			if *f.v != nil {
				*f.dst = proto.Uint32(**f.v)
			}
		}
		if p.MergeDelayMs != nil {
			out.MergeDelayMs = proto.Uint64(*p.MergeDelayMs)
		}
	}
	if clusterversion.RangeMoves.EnabledAt(version) {
		for _, f := range []struct{ dst, v **uint64 }{{&out.MoveTtlMs, &p.MoveTtlMs}, {&out.MoveCooldownMs, &p.MoveCooldownMs}} {
			if *f.v != nil {
				*f.dst = proto.Uint64(**f.v)
			}
		}
		for _, f := range []struct{ dst, v **uint32 }{{&out.PlacementWindows, &p.PlacementWindows}, {&out.MaxMovesPerCycle, &p.MaxMovesPerCycle},
			{&out.MoveMarginBp, &p.MoveMarginBp}} {
			if *f.v != nil {
				*f.dst = proto.Uint32(**f.v)
			}
		}
		if p.CrossGroup != nil {
			out.CrossGroup = *p.CrossGroup
		}
	}
	if clusterversion.FloorFollowsThreshold.EnabledAt(version) {
		if p.TopKeyAbsoluteFloor != nil {
			out.FloorFollowsThreshold = *p.TopKeyAbsoluteFloor == 0
		}
		if out.FloorFollowsThreshold {
			out.TopKeyAbsoluteFloor = out.Threshold / 2
		}
	}
	return out
}

// ScheduleStep returns c with a step change to newStep scheduled
// (ScheduledStepChange): the change takes effect at the first boundary that is a
// multiple of both the current and the new step and lies at least two
// current steps plus graceMs after nowMs — so every reporter hears of it
// in a Report response before it closes its last column of the old step,
// even one that misses a response. Re-patching the current step cancels a
// pending change; the same pending step keeps its boundary. A change whose
// common boundary lies more than a day ahead is refused: the steps share
// too few boundaries.
func ScheduleStep(c *api.Config, newStep, nowMs, graceMs uint64) (*api.Config, error) {
	out := proto.Clone(c).(*api.Config)
	old := out.GetStepMs()
	switch {
	case newStep == old:
		out.NextStepMs, out.NextStepAtMs = 0, 0
		return out, nil
	case newStep == out.GetNextStepMs():
		return out, nil
	case newStep < minStepMs || newStep > maxStepMs || old == 0:
		return nil, fmt.Errorf("%w: step_ms: %d not in [%d, %d]", ErrInvalidConfig, newStep, minStepMs, maxStepMs)
	}
	l := old / gcd(old, newStep) * newStep // both at most an hour: no overflow
	earliest := nowMs + 2*old + graceMs
	at := (earliest + l - 1) / l * l
	if at-nowMs > maxLCMWaitMs {
		return nil, fmt.Errorf("%w: step_ms: %d and the current step %d first share a boundary %d ms from now, more than a day; pick a step that divides or is a multiple of %d",
			ErrInvalidConfig, newStep, old, at-nowMs, old)
	}
	out.NextStepMs, out.NextStepAtMs = newStep, at
	return out, nil
}

// PatchConfig is the config a SetConfig of p makes of cur in a cluster at
// version `version` at nowMs, validated; the error names the field. The FSM
// applies exactly this; the transport calls it first so that a bad value
// never reaches the log.
func PatchConfig(cur *api.Config, version uint32, p *api.ConfigPatch, nowMs uint64) (*api.Config, error) {
	if clusterversion.EmptyPatchRefused.EnabledAt(version) && PatchIsEmpty(p) {
		return nil, fmt.Errorf("%w: patch: sets no field", ErrInvalidConfig)
	}
	if !clusterversion.HoldBand.EnabledAt(version) && p.HoldBandBp != nil {
		return nil, fmt.Errorf("%w: hold_band_bp: needs cluster version %d, the cluster is at %d", ErrInvalidConfig, clusterversion.HoldBand.Version(), version)
	}
	if f := mergeFieldSet(p); f != "" && !clusterversion.AutoMerge.EnabledAt(version) {
		return nil, fmt.Errorf("%w: %s: needs cluster version %d, the cluster is at %d", ErrInvalidConfig, f, clusterversion.AutoMerge.Version(), version)
	}
	if f := movePatchField(p); f != "" && !clusterversion.RangeMoves.EnabledAt(version) {
		return nil, fmt.Errorf("%w: %s: needs cluster version %d, the cluster is at %d", ErrInvalidConfig, f, clusterversion.RangeMoves.Version(), version)
	}
	cfg := ApplyPatch(cur, p, version)
	if clusterversion.ScheduledStepChange.EnabledAt(version) && p.StepMs != nil {
		var err error
		if cfg, err = ScheduleStep(cfg, p.GetStepMs(), nowMs, max(cur.GetGraceMs(), cfg.GetGraceMs())); err != nil {
			return nil, err
		}
	}
	if err := ValidateConfigAt(cfg, version); err != nil {
		return nil, err
	}
	return cfg, nil
}

// promoteStep moves a pending step whose boundary a column at windowStartMs
// has reached into step_ms. It returns c itself when nothing is due.
func promoteStep(c *api.Config, windowStartMs uint64) *api.Config {
	if c.GetNextStepAtMs() == 0 || windowStartMs < c.GetNextStepAtMs() {
		return c
	}
	out := proto.Clone(c).(*api.Config)
	out.StepMs, out.NextStepMs, out.NextStepAtMs = out.NextStepMs, 0, 0
	return out
}

// promoteStepByTime moves a pending step into step_ms once nowMs (an
// entry's HLC) is two of the longer step plus the grace past its boundary
// (StepChangeWithoutColumns). A cluster that reports promotes it earlier,
// with its first column at or past the boundary (promoteStep); the wait
// keeps the time rule behind every column of the old step, which commits
// within a grace of the boundary. It returns c itself when nothing is due.
func promoteStepByTime(c *api.Config, nowMs uint64) *api.Config {
	at := c.GetNextStepAtMs()
	if at == 0 {
		return c
	}
	longer := max(c.GetStepMs(), c.GetNextStepMs())
	grace := c.GetGraceMs()
	if grace == 0 {
		grace = longer / 2
	}
	if nowMs < at+2*longer+grace {
		return c
	}
	return promoteStep(c, at)
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// detectorConfig maps the replicated Config to the detector's view.
func detectorConfig(c *api.Config) detector.Config {
	return detector.Config{
		Threshold:           c.GetThreshold(),
		WriteWeight:         c.GetWriteWeight(),
		ReadWeight:          c.GetReadWeight(),
		CandidateWindows:    c.GetCandidateWindows(),
		CooldownMs:          c.GetCooldownMs(),
		MaxSplitsPerCycle:   c.GetMaxSplitsPerCycle(),
		MaxAutoRoutes:       c.GetMaxAutoRoutes(),
		TopKeyShareBP:       c.GetTopKeyShareBp(),
		TopKeyAbsoluteFloor: c.GetTopKeyAbsoluteFloor(),
		Buckets:             c.GetBuckets(),
		SmoothingWindows:    c.GetSmoothingWindows(),
		HoldBandBP:          c.GetHoldBandBp(),
		MergeThresholdBP:    c.GetMergeThresholdBp(),
		MergeWindows:        c.GetMergeWindows(),
		MergeDelayMs:        c.GetMergeDelayMs(),
		MaxMergesPerCycle:   c.GetMaxMergesPerCycle(),
		MergeMarginBP:       c.GetMergeMarginBp(),
	}
}
