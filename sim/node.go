package sim

import (
	"context"
	"sync"
	"sync/atomic"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/keyviz"
)

// node is one simulated data node: a sampler that counts what the node
// serves and the reporter that sends its columns to the cluster.
type node struct {
	id       string
	sampler  *keyviz.Sampler
	reporter *keyviz.Reporter
	acks     *ackTracker

	// Operations served, published by the driver after each batch.
	reads, writes atomic.Uint64
}

// ackTracker sits between a reporter and the cluster and remembers which
// columns (by window start) were sent and not yet settled — acknowledged,
// acknowledged as late, or refused for good. Run's final flush waits on it:
// the reporter itself only says how many columns it has pending, not which,
// and its counters move after the sampler's window does, so they cannot tell
// whether the column holding the last operation has gone out yet.
type ackTracker struct {
	next      keyviz.ReportSender
	permanent func(error) bool

	mu          sync.Mutex
	outstanding map[uint64]uint64 // sent, not settled: window start → operations in it
	sentAny     bool
	firstSent   uint64
	maxSent     uint64
	// Operations in columns settled as acknowledged (committed), late
	// (dropped by the cluster) and refused.
	acked, late, refused uint64
}

func newAckTracker(next keyviz.ReportSender, permanent func(error) bool) *ackTracker {
	return &ackTracker{next: next, permanent: permanent, outstanding: map[uint64]uint64{}}
}

// columnOps is the number of operations a column counts.
func columnOps(c *api.ReportColumn) uint64 {
	var n uint64
	for _, r := range c.GetRows() {
		n += r.GetReads() + r.GetWrites()
	}
	return n
}

// Report forwards req and records what it sent and what was settled.
func (t *ackTracker) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	t.mu.Lock()
	for _, c := range req.GetColumns() {
		w := c.GetWindowStartMs()
		t.outstanding[w] = columnOps(c)
		if !t.sentAny {
			t.sentAny, t.firstSent = true, w
		}
		t.maxSent = max(t.maxSent, w)
	}
	t.mu.Unlock()

	resp, err := t.next.Report(ctx, req)

	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if t.permanent(err) {
			// The reporter drops these columns: nothing will settle them.
			for _, c := range req.GetColumns() {
				t.refused += t.outstanding[c.GetWindowStartMs()]
				delete(t.outstanding, c.GetWindowStartMs())
			}
		}
		return resp, err
	}
	// Late windows are listed among the acknowledged ones too.
	for _, w := range resp.GetLateWindowStarts() {
		if ops, ok := t.outstanding[w]; ok {
			t.late += ops
			delete(t.outstanding, w)
		}
	}
	for _, w := range resp.GetAckedWindowStarts() {
		if ops, ok := t.outstanding[w]; ok {
			t.acked += ops
			delete(t.outstanding, w)
		}
	}
	return resp, nil
}

// settledOps returns the operations in columns acknowledged, acknowledged
// late, and refused so far.
func (t *ackTracker) settledOps() (acked, late, refused uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acked, t.late, t.refused
}

// settledThrough reports whether the column labelled last — or, when
// started is false, the first column the reporter ever sends — and every
// column before it have been sent and settled.
func (t *ackTracker) settledThrough(last uint64, started bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.sentAny {
		return false
	}
	if !started {
		last = t.firstSent
	}
	if t.maxSent < last {
		return false
	}
	for w := range t.outstanding {
		if w <= last {
			return false
		}
	}
	return true
}
