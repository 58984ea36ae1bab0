// Package hlc is hotsplit's hybrid logical clock: 64-bit timestamps laid out
// as physical_ms<<16 | logical, strictly increasing across goroutines, with a
// fence (the ceiling) below which a leader may issue them (docs/design.md#hlc-and-the-fence).
//
// It uses only the standard library, keeps no replicated state of its own
// and never decides leadership: the scheduler raises the ceiling once the
// replicated AdvanceCeiling entry has applied. Durations are always computed
// on Physical(ts), never on raw timestamps.
package hlc

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// LogicalBits is the width of the logical counter in a timestamp.
const LogicalBits = 16

const logicalMask = 1<<LogicalBits - 1

// maxPhysicalMs is the largest physical part a timestamp can hold.
const maxPhysicalMs = 1<<(64-LogicalBits) - 1

// ErrCeilingExpired is returned by NextFenced when the next timestamp's
// physical part would reach the ceiling: the leader must renew the fence
// (or has lost it) before issuing more.
var ErrCeilingExpired = errors.New("hlc: ceiling expired")

// ErrBatchSize is returned for a batch size that is zero or too large.
var ErrBatchSize = errors.New("hlc: invalid batch size")

// ErrAheadOfClock is returned when a batch would carry the HLC into a
// millisecond the physical clock has not reached yet. Issuing it anyway
// would let a flood of requests push the HLC ahead of wall time without
// bound (every "now" in Apply would move with it); the oracle waits for
// the clock instead, as PD's TSO does (docs/design.md#clock-offsets). Nothing was issued.
var ErrAheadOfClock = errors.New("hlc: batch would run ahead of the physical clock")

// MaxBatch bounds one NextFencedBatch call: one millisecond's worth of
// logical values, so a batch never needs more than the next millisecond.
const MaxBatch = 1 << LogicalBits

// Make builds a timestamp from its parts; logical is truncated to 16 bits.
func Make(physicalMs, logical uint64) uint64 {
	return physicalMs<<LogicalBits | logical&logicalMask
}

// Physical returns the millisecond part of ts.
func Physical(ts uint64) uint64 { return ts >> LogicalBits }

// Logical returns the logical counter of ts.
func Logical(ts uint64) uint64 { return ts & logicalMask }

// Format renders ts as "physical.logical" for logs and the CLI.
func Format(ts uint64) string { return fmt.Sprintf("%d.%d", Physical(ts), Logical(ts)) }

// Source returns the physical time in milliseconds since the Unix epoch. It
// may jump backwards; the Clock stays monotonic regardless.
type Source func() int64

// wallAnchor pins the wall clock once; WallSource advances it by the
// monotonic clock. Reading only the monotonic clock halves the cost of a
// timestamp (one vDSO call instead of two) and makes the physical part
// immune to steps of the system clock after start-up; it still follows the
// clock's rate, and the HLC − wall skew metric shows any step since start.
var wallAnchor = time.Now()

// WallSource reads physical time: the wall clock at process start plus the
// monotonic time elapsed since.
func WallSource() int64 { return wallAnchor.UnixMilli() + time.Since(wallAnchor).Milliseconds() }

// Clock issues strictly increasing timestamps. All methods are safe for
// concurrent use and lock-free: the last issued value and the ceiling are
// single atomic words, so the fence check and the issue are one
// compare-and-swap.
type Clock struct {
	src       Source
	last      atomic.Uint64 // highest timestamp issued or observed
	ceilingMs atomic.Uint64 // exclusive bound on Physical for NextFenced; 0 = none
}

// New returns a Clock reading src (WallSource if nil). Its ceiling starts
// at zero, so NextFenced fails until SetCeiling.
func New(src Source) *Clock {
	if src == nil {
		src = WallSource
	}
	return &Clock{src: src}
}

func (c *Clock) physicalNow() uint64 {
	ms := c.src()
	switch {
	case ms < 0:
		return 0
	case uint64(ms) > maxPhysicalMs:
		return maxPhysicalMs
	}
	return uint64(ms)
}

// candidate is the smallest timestamp that may follow last at physical now.
// last+1 carries a logical overflow into the physical part by plain integer
// addition, which is exactly the layout's monotonic successor.
func candidate(last, physicalNow uint64) uint64 {
	return max(last+1, physicalNow<<LogicalBits)
}

// Next returns a timestamp greater than every timestamp this clock issued
// or observed before. It ignores the ceiling: use it for stamps that are
// themselves fenced by the log (such as the AdvanceCeiling entry).
func (c *Clock) Next() uint64 {
	for {
		last := c.last.Load()
		next := candidate(last, c.physicalNow())
		if c.last.CompareAndSwap(last, next) {
			return next
		}
	}
}

// NextFenced is Next, but fails with ErrCeilingExpired instead of issuing a
// timestamp whose physical part is at or past the ceiling.
func (c *Clock) NextFenced() (uint64, error) {
	return c.NextFencedBatch(1)
}

// NextFencedBatch reserves n consecutive timestamps first, first+1, ...,
// first+n-1, all below the ceiling, and returns first.
//
// The batch may carry into a later millisecond only while its end stays at
// or below the physical clock (or within the millisecond of the last
// timestamp, which an observed remote timestamp may have put ahead):
// otherwise it fails with ErrAheadOfClock and issues nothing, so issuing
// never moves the HLC ahead of the wall clock. NextFencedBatchWait waits
// for the clock instead.
func (c *Clock) NextFencedBatch(n uint64) (uint64, error) {
	r := c.reserve(n)
	return r.first, r.err(n)
}

// reservation is the outcome of one reserve attempt; errors are only
// formatted (allocated) once the caller gives up.
type reservation struct {
	status           reserveStatus
	first, end       uint64 // the batch; end is set on refusals too
	nowMs, ceilingMs uint64
}

type reserveStatus uint8

const (
	reserved reserveStatus = iota
	badSize
	pastCeiling
	aheadOfClock
)

func (r reservation) err(n uint64) error {
	switch r.status {
	case badSize:
		return fmt.Errorf("%w: %d (want 1..%d)", ErrBatchSize, n, MaxBatch)
	case pastCeiling:
		return fmt.Errorf("%w: next %s at or past ceiling %d ms", ErrCeilingExpired, Format(r.end), r.ceilingMs)
	case aheadOfClock:
		return fmt.Errorf("%w: batch of %d would end at %s, the clock reads %d ms", ErrAheadOfClock, n, Format(r.end), r.nowMs)
	}
	return nil
}

func (c *Clock) reserve(n uint64) reservation {
	if n == 0 || n > MaxBatch {
		return reservation{status: badSize}
	}
	for {
		last := c.last.Load()
		now := c.physicalNow()
		first := candidate(last, now)
		end := first + n - 1
		if ceiling := c.ceilingMs.Load(); Physical(end) >= ceiling {
			return reservation{status: pastCeiling, end: end, ceilingMs: ceiling}
		}
		if Physical(end) > max(now, Physical(last)) {
			return reservation{status: aheadOfClock, end: end, nowMs: now}
		}
		if c.last.CompareAndSwap(last, end) {
			return reservation{first: first, end: end}
		}
	}
}

// aheadPoll is how often NextFencedBatchWait looks at the clock again.
const aheadPoll = 200 * time.Microsecond

// NextFencedBatchWait is NextFencedBatch, but when the batch would run
// ahead of the physical clock it waits, at most maxWait, for the clock to
// reach the batch's last millisecond. It gives up at once (ErrAheadOfClock)
// when that millisecond is further than maxWait away, e.g. after a new
// leader observed an old ceiling ahead of its own clock.
func (c *Clock) NextFencedBatchWait(n uint64, maxWait time.Duration) (uint64, error) {
	var deadline time.Time
	for {
		r := c.reserve(n)
		if r.status != aheadOfClock {
			return r.first, r.err(n)
		}
		now := time.Now()
		if deadline.IsZero() {
			deadline = now.Add(maxWait)
		}
		// The clock must still move this far; a millisecond of slack covers
		// reading it in the middle of one.
		gap := time.Duration(int64(Physical(r.end))-int64(c.physicalNow())) * time.Millisecond
		if now.After(deadline) || gap > deadline.Sub(now)+time.Millisecond {
			return 0, r.err(n)
		}
		time.Sleep(aheadPoll)
	}
}

// Observe makes every later timestamp greater than ts.
func (c *Clock) Observe(ts uint64) {
	for {
		last := c.last.Load()
		if ts <= last || c.last.CompareAndSwap(last, ts) {
			return
		}
	}
}

// Now returns the current HLC reading without issuing it: the larger of the
// last issued or observed timestamp and the physical clock. Use it to time
// things (renewal, column lag), never to stamp.
func (c *Clock) Now() uint64 {
	return max(c.last.Load(), c.physicalNow()<<LogicalBits)
}

// Last returns the highest timestamp issued or observed so far.
func (c *Clock) Last() uint64 { return c.last.Load() }

// SetCeiling raises the fence to ms; a lower value is ignored, so a late or
// reordered renewal can never shrink the window.
func (c *Clock) SetCeiling(ms uint64) {
	for {
		cur := c.ceilingMs.Load()
		if ms <= cur || c.ceilingMs.CompareAndSwap(cur, ms) {
			return
		}
	}
}

// Revoke drops the fence to zero so that NextFenced fails at once. The
// scheduler calls it when this node stops being leader: waiting for the old
// ceiling to pass would let a deposed leader keep issuing.
func (c *Clock) Revoke() { c.ceilingMs.Store(0) }

// Ceiling returns the current fence in milliseconds.
func (c *Clock) Ceiling() uint64 { return c.ceilingMs.Load() }

// PhysicalNow reads the physical source, in ms: the same reading the clock
// issues from (the jepsen clock seam shifts it), for measuring this node's
// clock against its peers'.
func (c *Clock) PhysicalNow() uint64 { return c.physicalNow() }

// AheadMs returns how far ts runs ahead of the physical source, in ms, and
// 0 when it does not: the HLC − wall skew of a node whose HLC stands at ts.
func (c *Clock) AheadMs(ts uint64) uint64 {
	if p, now := Physical(ts), c.physicalNow(); p > now {
		return p - now
	}
	return 0
}
