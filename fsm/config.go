package fsm

import (
	"errors"
	"fmt"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
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

// DefaultConfig returns the SPEC §6/§8 defaults: Ww 4, Wr 1, threshold
// 50000 weighted ops/min, 3 candidate windows, 10 min cooldown, 1 split per
// cycle, 1024 auto routes, top-key share 80%, absolute floor threshold/2,
// 16 buckets, a 60 s step, op TTL = cooldown, 5 smoothing windows and a
// grace of half a step.
func DefaultConfig() *api.Config {
	return &api.Config{
		Threshold:           50000,
		WriteWeight:         4,
		ReadWeight:          1,
		CandidateWindows:    3,
		CooldownMs:          10 * 60 * 1000,
		MaxSplitsPerCycle:   1,
		MaxAutoRoutes:       1024,
		TopKeyShareBp:       8000,
		TopKeyAbsoluteFloor: 25000,
		Buckets:             16,
		StepMs:              60 * 1000,
		OpTtlMs:             10 * 60 * 1000,
		SmoothingWindows:    5,
		GraceMs:             30 * 1000,
	}
}

// withDefaults returns a copy of c whose zero fields take the defaults.
// Derived defaults follow the given values: the absolute floor is half the
// (given) threshold, the op TTL the cooldown, the grace half the step.
func withDefaults(c *api.Config) *api.Config {
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
	fill64(&out.Threshold, d.Threshold)
	fill32(&out.WriteWeight, d.WriteWeight)
	fill32(&out.ReadWeight, d.ReadWeight)
	fill32(&out.CandidateWindows, d.CandidateWindows)
	fill64(&out.CooldownMs, d.CooldownMs)
	fill32(&out.MaxSplitsPerCycle, d.MaxSplitsPerCycle)
	fill32(&out.MaxAutoRoutes, d.MaxAutoRoutes)
	fill32(&out.TopKeyShareBp, d.TopKeyShareBp)
	fill64(&out.TopKeyAbsoluteFloor, out.Threshold/2)
	fill32(&out.Buckets, d.Buckets)
	fill64(&out.StepMs, d.StepMs)
	fill64(&out.OpTtlMs, out.CooldownMs)
	fill32(&out.SmoothingWindows, d.SmoothingWindows)
	fill64(&out.GraceMs, out.StepMs/2)
	return out
}

// Upper bounds of cluster version 2: a probe set max_auto_routes to 2^32−1
// and the floor without limit. They are checked by the transport before
// anything is proposed and by Apply once the cluster runs at Version2, so a
// v1 replica never disagrees with a v2 one.
const (
	// MaxAutoRoutesLimit bounds max_auto_routes.
	MaxAutoRoutesLimit = 1 << 20
	// MaxScoreLimit bounds threshold and top_key_absolute_floor (weighted
	// operations per minute: about 10^12, far beyond any store).
	MaxScoreLimit = 1 << 40
)

// ValidateConfigAt is ValidateConfig plus the bounds that hold from the
// given cluster version on.
func ValidateConfigAt(c *api.Config, clusterVersion uint32) error {
	if err := ValidateConfig(c); err != nil {
		return err
	}
	if clusterVersion < Version2 {
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

// PatchIsEmpty reports whether p sets no field. From cluster version 2 an
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
	}
	return nil
}

// ApplyPatch returns a new Config: c with the fields set in p replaced.
// Neither argument is modified.
func ApplyPatch(c *api.Config, p *api.ConfigPatch) *api.Config {
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
	set64(&out.Threshold, p.Threshold)
	set32(&out.WriteWeight, p.WriteWeight)
	set32(&out.ReadWeight, p.ReadWeight)
	set32(&out.CandidateWindows, p.CandidateWindows)
	set64(&out.CooldownMs, p.CooldownMs)
	set32(&out.MaxSplitsPerCycle, p.MaxSplitsPerCycle)
	set32(&out.MaxAutoRoutes, p.MaxAutoRoutes)
	set32(&out.TopKeyShareBp, p.TopKeyShareBp)
	set64(&out.TopKeyAbsoluteFloor, p.TopKeyAbsoluteFloor)
	set32(&out.Buckets, p.Buckets)
	set64(&out.StepMs, p.StepMs)
	set64(&out.OpTtlMs, p.OpTtlMs)
	set32(&out.SmoothingWindows, p.SmoothingWindows)
	set64(&out.GraceMs, p.GraceMs)
	return out
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
	}
}
