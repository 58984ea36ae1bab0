package detector

import (
	"errors"
	"fmt"

	"github.com/hotsplit/hotsplit/catalog"
)

// ErrInvalidConfig is wrapped by every error Config.Validate returns.
var ErrInvalidConfig = errors.New("invalid detector config")

// ConfigError names the Config field that is out of range. Its message is
// "field: problem" with the field spelled as in the replicated api.Config.
type ConfigError struct {
	Field   string
	Problem string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Problem }

// Unwrap makes errors.Is(err, ErrInvalidConfig) hold.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

// Config limits, the same as the fsm's: wide enough for tests in simulated
// time and for production, narrow enough that nothing overflows.
const (
	maxWeight           = 1000
	maxCandidateWindows = 1000
	maxCooldownMs       = 7 * 24 * 3600 * 1000
	maxSplitsPerCycle   = 1024
	maxSmoothingWindows = 64
	// MaxMergeWindows bounds merge_windows: the run of recent column
	// starts the cold state keeps has at most this many entries.
	MaxMergeWindows   = 10_000
	maxMergesPerCycle = 1024
	// A cold route scores at most half the threshold; a merged route must
	// stay at least a tenth below it.
	maxMergeThresholdBP = 5000
	minMergeMarginBP    = 1000
)

// The merge defaults (docs/design.md "Merges", chosen from the simlab
// comparison in docs/benchmarks.md): cold below a quarter of the threshold
// for 10 columns, no merge within 30 minutes of a route's creation, one
// merge per column, and the merged estimate at most half the threshold.
const (
	DefaultMergeThresholdBP  = 2500
	DefaultMergeWindows      = 10
	DefaultMergeDelayMs      = 30 * 60 * 1000
	DefaultMaxMergesPerCycle = 1
	DefaultMergeMarginBP     = 5000
)

// DefaultConfig returns the docs/design.md#the-detector defaults: Ww 4, Wr 1, threshold 50000
// weighted ops/min, 3 candidate windows, 10 min cooldown, 1 split per
// column, 1024 auto routes, top-key share 8000 bp, absolute floor
// threshold/2, 16 buckets, 5 smoothing windows, a hold band of 8000 bp,
// and the merge defaults above.
func DefaultConfig() Config {
	const threshold = 50_000
	return Config{
		MergeThresholdBP:    DefaultMergeThresholdBP,
		MergeWindows:        DefaultMergeWindows,
		MergeDelayMs:        DefaultMergeDelayMs,
		MaxMergesPerCycle:   DefaultMaxMergesPerCycle,
		MergeMarginBP:       DefaultMergeMarginBP,
		Threshold:           threshold,
		WriteWeight:         4,
		ReadWeight:          1,
		CandidateWindows:    3,
		CooldownMs:          10 * 60 * 1000,
		MaxSplitsPerCycle:   1,
		MaxAutoRoutes:       1024,
		TopKeyShareBP:       8000,
		TopKeyAbsoluteFloor: threshold / 2,
		Buckets:             16,
		SmoothingWindows:    5,
		HoldBandBP:          8000,
	}
}

// Validate checks every field's range and returns a *ConfigError for the
// first one out of range, in field order.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	switch {
	case c.Threshold < 1:
		return bad("threshold", "must be >= 1")
	case c.WriteWeight > maxWeight:
		return bad("write_weight", "%d above %d", c.WriteWeight, maxWeight)
	case c.ReadWeight > maxWeight:
		return bad("read_weight", "%d above %d", c.ReadWeight, maxWeight)
	case c.WriteWeight == 0 && c.ReadWeight == 0:
		return bad("write_weight", "write_weight and read_weight must not both be 0")
	case c.CandidateWindows < 1 || c.CandidateWindows > maxCandidateWindows:
		return bad("candidate_windows", "%d not in [1, %d]", c.CandidateWindows, maxCandidateWindows)
	case c.CooldownMs > maxCooldownMs:
		return bad("cooldown_ms", "%d above %d (7 days)", c.CooldownMs, maxCooldownMs)
	case c.MaxSplitsPerCycle < 1 || c.MaxSplitsPerCycle > maxSplitsPerCycle:
		return bad("max_splits_per_cycle", "%d not in [1, %d]", c.MaxSplitsPerCycle, maxSplitsPerCycle)
	case c.MaxAutoRoutes < 1:
		return bad("max_auto_routes", "must be >= 1")
	case c.TopKeyShareBP < 1 || c.TopKeyShareBP > fullShareBP:
		return bad("top_key_share_bp", "%d not in [1, %d]", c.TopKeyShareBP, fullShareBP)
	case c.Buckets < 1 || c.Buckets > catalog.MaxBuckets:
		return bad("buckets", "%d not in [1, %d]", c.Buckets, catalog.MaxBuckets)
	case c.SmoothingWindows < 1 || c.SmoothingWindows > maxSmoothingWindows:
		return bad("smoothing_windows", "%d not in [1, %d]", c.SmoothingWindows, maxSmoothingWindows)
	case c.HoldBandBP > fullShareBP:
		return bad("hold_band_bp", "%d above %d", c.HoldBandBP, fullShareBP)
	}
	return c.validateMerge()
}

// validateMerge checks the merge settings (RuleMerge): all absent (zero,
// merge_windows 0: a cluster below version 3), or each in range.
func (c Config) validateMerge() error {
	bad := func(field, format string, args ...any) error {
		return &ConfigError{Field: field, Problem: fmt.Sprintf(format, args...)}
	}
	if c.MergeWindows == 0 {
		switch {
		case c.MergeThresholdBP != 0:
			return bad("merge_threshold_bp", "set without merge_windows")
		case c.MergeDelayMs != 0:
			return bad("merge_delay_ms", "set without merge_windows")
		case c.MaxMergesPerCycle != 0:
			return bad("max_merges_per_cycle", "set without merge_windows")
		case c.MergeMarginBP != 0:
			return bad("merge_margin_bp", "set without merge_windows")
		}
		return nil
	}
	switch {
	case c.MergeThresholdBP < 1 || c.MergeThresholdBP > maxMergeThresholdBP:
		return bad("merge_threshold_bp", "%d not in [1, %d]", c.MergeThresholdBP, maxMergeThresholdBP)
	case c.MergeWindows <= c.CandidateWindows || c.MergeWindows > MaxMergeWindows:
		return bad("merge_windows", "%d not in [candidate_windows+1 = %d, %d]: a merge needs longer evidence than a split",
			c.MergeWindows, uint64(c.CandidateWindows)+1, MaxMergeWindows)
	case c.MergeDelayMs > maxCooldownMs:
		return bad("merge_delay_ms", "%d above %d (7 days)", c.MergeDelayMs, maxCooldownMs)
	case c.MaxMergesPerCycle > maxMergesPerCycle:
		return bad("max_merges_per_cycle", "%d above %d", c.MaxMergesPerCycle, maxMergesPerCycle)
	case c.MergeMarginBP < minMergeMarginBP || c.MergeMarginBP > fullShareBP:
		return bad("merge_margin_bp", "%d not in [%d, %d]", c.MergeMarginBP, minMergeMarginBP, fullShareBP)
	}
	return nil
}
