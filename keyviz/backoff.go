package keyviz

import (
	"math/rand/v2"
	"time"
)

// backoff is a capped exponential backoff with jitter: each wait is drawn
// uniformly from [d/2, d], and d doubles up to the cap after every failure.
// The jitter keeps reporters that failed together (a leader change) from
// retrying together. Not safe for concurrent use.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) backoff {
	return backoff{min: min, max: max, cur: min}
}

func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(2*b.cur, b.max)
	return d/2 + rand.N(d/2+1)
}

func (b *backoff) reset() { b.cur = b.min }
