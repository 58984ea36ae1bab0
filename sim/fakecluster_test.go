package sim

import (
	"context"
	"sync"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// fakeCluster is an in-process Cluster: it serves a scripted catalog watch,
// answers GetConfig with a short step, and acknowledges (by default) every
// reported column at once, keeping one copy per (reporter, window) as the
// real leader's deduplication does.
type fakeCluster struct {
	stepMs    uint64
	configErr error
	// reportErr, if set, answers every Report instead of acknowledging.
	reportErr error
	// noAck makes Report answer without acknowledging anything.
	noAck bool
	// late acknowledges every column as late (dropped) instead.
	late bool

	mu      sync.Mutex
	events  []*api.WatchRoutesResponse // the catalog's history
	changed chan struct{}              // closed and replaced on every event
	// failWatches makes the next watches fail at once.
	failWatches int
	// once is sent by the next watch after the history, a single time.
	once      *api.WatchRoutesResponse
	watches   []uint64 // from_version of each watch
	columns   map[string]map[uint64]*api.ReportColumn
	conflicts int // a resent column that differed from the first copy
	reports   int
}

func newFakeCluster(stepMs uint64, initial ...*api.WatchRoutesResponse) *fakeCluster {
	return &fakeCluster{stepMs: stepMs, events: initial, changed: make(chan struct{}),
		columns: map[string]map[uint64]*api.ReportColumn{}}
}

// push appends catalog events for the watchers.
func (f *fakeCluster) push(evs ...*api.WatchRoutesResponse) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events = append(f.events, evs...)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakeCluster) GetConfig(context.Context, *api.GetConfigRequest) (*api.GetConfigResponse, error) {
	if f.configErr != nil {
		return nil, f.configErr
	}
	return &api.GetConfigResponse{Config: f.config()}, nil
}

func (f *fakeCluster) config() *api.Config {
	return &api.Config{StepMs: f.stepMs, Buckets: 16, WriteWeight: new(uint32(4)), ReadWeight: new(uint32(1))}
}

// eventVersion is the catalog version an event brings the watcher to.
func eventVersion(ev *api.WatchRoutesResponse) uint64 {
	if p := ev.GetSnapshotPage(); p != nil {
		return p.GetVersion()
	}
	return ev.GetDelta().GetVersion()
}

// Watch sends the history after fromVersion (all of it for 0, so a
// snapshot comes first), then each new event, until ctx ends.
func (f *fakeCluster) Watch(ctx context.Context, fromVersion uint64, fn func(*api.WatchRoutesResponse) error) error {
	f.mu.Lock()
	f.watches = append(f.watches, fromVersion)
	if f.failWatches > 0 {
		f.failWatches--
		f.mu.Unlock()
		return context.DeadlineExceeded
	}
	once := f.once
	f.once = nil
	f.mu.Unlock()
	sent := 0
	for {
		f.mu.Lock()
		evs, changed := f.events[sent:], f.changed
		sent = len(f.events)
		f.mu.Unlock()
		for _, ev := range evs {
			if fromVersion != 0 && eventVersion(ev) <= fromVersion {
				continue
			}
			if err := fn(proto.Clone(ev).(*api.WatchRoutesResponse)); err != nil {
				return err
			}
		}
		if once != nil {
			if err := fn(once); err != nil {
				return err
			}
			once = nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

func (f *fakeCluster) Report(_ context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reports++
	if f.reportErr != nil {
		return nil, f.reportErr
	}
	resp := &api.ReportResponse{Config: f.config()}
	if f.noAck {
		return resp, nil
	}
	cols := f.columns[req.GetReporterId()]
	if cols == nil {
		cols = map[uint64]*api.ReportColumn{}
		f.columns[req.GetReporterId()] = cols
	}
	for _, c := range req.GetColumns() {
		w := c.GetWindowStartMs()
		if old, ok := cols[w]; ok {
			if !proto.Equal(old, c) {
				f.conflicts++
			}
		} else {
			cols[w] = proto.Clone(c).(*api.ReportColumn)
		}
		resp.AckedWindowStarts = append(resp.AckedWindowStarts, w)
		if f.late {
			resp.LateWindowStarts = append(resp.LateWindowStarts, w)
			delete(cols, w)
		}
	}
	return resp, nil
}

// counts is reads and writes.
type counts struct{ reads, writes uint64 }

// totals sums the acknowledged rows: per reporter and per route.
func (f *fakeCluster) totals() (byReporter map[string]counts, byRoute map[uint64]counts) {
	f.mu.Lock()
	defer f.mu.Unlock()
	byReporter, byRoute = map[string]counts{}, map[uint64]counts{}
	for id, cols := range f.columns {
		for _, c := range cols {
			for _, r := range c.GetRows() {
				a, b := byReporter[id], byRoute[r.GetRouteId()]
				a.reads, a.writes = a.reads+r.GetReads(), a.writes+r.GetWrites()
				b.reads, b.writes = b.reads+r.GetReads(), b.writes+r.GetWrites()
				byReporter[id], byRoute[r.GetRouteId()] = a, b
			}
		}
	}
	return byReporter, byRoute
}

// rows returns every acknowledged row.
func (f *fakeCluster) rows() []*api.ReportRow {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*api.ReportRow
	for _, cols := range f.columns {
		for _, c := range cols {
			out = append(out, c.GetRows()...)
		}
	}
	return out
}

// firstColumnRows returns, per reporter, the rows of its earliest column.
func (f *fakeCluster) firstColumnRows() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for id, cols := range f.columns {
		first := uint64(0)
		for w := range cols {
			if first == 0 || w < first {
				first = w
			}
		}
		out[id] = len(cols[first].GetRows())
	}
	return out
}
