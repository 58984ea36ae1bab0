// Package loglimit keeps a repeated log line from flooding the log: a
// Limiter lets one line per key through per interval and counts the ones it
// holds back, so the next line written can say how many there were.
//
// It only decides; it writes nothing and owns no logger, so each caller
// keeps its own message and keys. It reads no clock: callers pass the time,
// which keeps tests exact.
package loglimit

import (
	"sync"
	"time"
)

// Limiter decides, per key, which lines to write: the first line of a key,
// then the first one at least interval after the last written. Memory is
// bounded: a new key beyond maxKeys makes it forget every key and start
// over (at worst a line per key is written early).
//
// Concurrency: safe for concurrent use.
type Limiter struct {
	interval time.Duration
	maxKeys  int

	mu   sync.Mutex // guards keys
	keys map[string]*keyState
}

type keyState struct {
	last       time.Time // when the last line was written
	suppressed uint64    // lines held back since
}

// New returns a Limiter writing a key at most once per interval and
// remembering at most maxKeys keys (at least 1).
func New(interval time.Duration, maxKeys int) *Limiter {
	return &Limiter{interval: interval, maxKeys: max(maxKeys, 1), keys: map[string]*keyState{}}
}

// Allow reports whether a line for key may be written at now and, when it
// may, how many lines of key were held back since the last one written
// (0 otherwise). A line held back is counted.
func (l *Limiter) Allow(key string, now time.Time) (ok bool, suppressed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.keys[key]
	if st == nil {
		if len(l.keys) >= l.maxKeys {
			l.keys = map[string]*keyState{}
		}
		l.keys[key] = &keyState{last: now}
		return true, 0
	}
	if now.Sub(st.last) < l.interval {
		st.suppressed++
		return false, 0
	}
	n := st.suppressed
	st.last, st.suppressed = now, 0
	return true, n
}
