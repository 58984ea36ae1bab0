package detector

import (
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/saturate"
)

// The RuleHeavyKeyIsolation rule: a key whose own load is above the
// threshold keeps any route holding it hot until it sits alone, whatever
// its share of that route — so it is isolated as soon as the lower
// confidence bound of its load per minute clears the threshold (and the
// floor, which an operator may have set above it). It runs after
// single-key isolation by share and before any cut: isolating the key
// costs the two boundaries it needs in any case, and at once, where a cut
// first would cost a cooldown.
//
// The bound is bound.go's, on the key's variance times the
// finite-population factor (rate−1)/rate (finitePopulation): at sample
// rate 1 every operation was counted and the bound is the count itself.

// heavyKey isolates row's heaviest key in r if its load alone is above the
// threshold and the floor at confidence, and reports whether it did.
func heavyKey(cfg Config, r *catalog.RouteDescriptor, row *Row, durMs uint64, c *splitChoice) bool {
	if row.TopKDegraded || c.hotKey == nil {
		return false
	}
	h := bestKey(row.TopKeys, r) // isolate's choice: c.hotKey
	hot := &row.TopKeys[h]
	lcb := perMinute(saturate.Wide(lowerBound(hot.Lower, finitePopulation(hot.Variance, row.SampleRate))), durMs)
	if lcb < max(cfg.Threshold, cfg.TopKeyAbsoluteFloor) {
		return false
	}
	saved := *c
	if isolationKeys(r, hot.Key, c) != ReasonUnspecified {
		*c = saved // too long to isolate: a cut may still help
		return false
	}
	c.isolation, c.isolationDecision = ReasonUnspecified, true
	c.evidence, c.hotLowerPerMin = EvidenceKeyLoad, lcb
	return true
}
