package transport

import (
	"fmt"
	"sync"

	"golang.org/x/time/rate"
)

// limitClass is the per-identity rate limit a method counts against.
type limitClass uint8

const (
	// limitNone, the zero value: a method whose row names no limit.
	limitNone limitClass = iota
	// limitTimestamp: GetTimestamp calls.
	limitTimestamp
	// limitMutation: every call that proposes a log entry on a client's
	// behalf, and MintUILogin (it fills a bounded table of login codes).
	// Load.Report is exempt: reporters are bounded by the report byte
	// budget instead, and refusing a report loses a column.
	limitMutation
)

func (c limitClass) String() string {
	switch c {
	case limitNone:
		return "none"
	case limitTimestamp:
		return "timestamp"
	case limitMutation:
		return "mutation"
	}
	return fmt.Sprintf("limitClass(%d)", uint8(c))
}

// RateLimits are per-identity token buckets, enforced by the node a call
// enters (a forwarded call is not counted again by the leader). A zero rate
// turns a class off.
type RateLimits struct {
	TimestampsPerSecond float64
	TimestampBurst      int
	MutationsPerSecond  float64
	MutationBurst       int
}

// DefaultRateLimits are generous for any one client: a data node takes
// timestamps in batches of up to 10,000, automation splits in bursts. A
// burst is ten seconds' worth (BurstFor).
func DefaultRateLimits() RateLimits {
	return RateLimits{TimestampsPerSecond: 5000, TimestampBurst: BurstFor(5000), MutationsPerSecond: 100, MutationBurst: BurstFor(100)}
}

// BurstFor is the burst of a per-second rate: ten seconds' worth.
func BurstFor(perSecond float64) int { return int(10 * perSecond) }

// maxLimitedIdentities bounds the limiter table; identities come from
// certificates and tokens the operator issued, so the bound is only met by
// a cluster with that many distinct clients, and then the table starts
// afresh (every identity gets a full burst once more).
const maxLimitedIdentities = 10000

// limiters holds one token bucket per (identity, class).
//
// Concurrency: safe for concurrent use; mu guards m.
type limiters struct {
	cfg RateLimits

	mu sync.Mutex
	m  map[limiterKey]*rate.Limiter
}

type limiterKey struct {
	name  string
	class limitClass
}

func newLimiters(cfg RateLimits) *limiters {
	return &limiters{cfg: cfg, m: make(map[limiterKey]*rate.Limiter)}
}

// allow takes one token for name in class; false means over the limit.
func (l *limiters) allow(name string, class limitClass) bool {
	var r float64
	var burst int
	switch class {
	case limitTimestamp:
		r, burst = l.cfg.TimestampsPerSecond, l.cfg.TimestampBurst
	case limitMutation:
		r, burst = l.cfg.MutationsPerSecond, l.cfg.MutationBurst
	default:
		return true
	}
	if r <= 0 {
		return true
	}
	k := limiterKey{name, class}
	l.mu.Lock()
	lim, ok := l.m[k]
	if !ok {
		if len(l.m) >= maxLimitedIdentities {
			clear(l.m)
		}
		lim = rate.NewLimiter(rate.Limit(r), max(burst, 1))
		l.m[k] = lim
	}
	l.mu.Unlock()
	return lim.Allow()
}
