package keyviz

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"pgregory.net/rapid"
)

// fakeClock is a manual clock: a Timer fires only when Advance reaches it.
type fakeClock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []clockWaiter
}

type clockWaiter struct {
	at time.Time
	ch chan time.Time
}

func newFakeClock(ms uint64) *fakeClock {
	return &fakeClock{now: time.UnixMilli(int64(ms))}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Timer(d time.Duration) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch, func() {}
	}
	c.waiters = append(c.waiters, clockWaiter{at: c.now.Add(d), ch: ch})
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.waiters = slices.DeleteFunc(c.waiters, func(w clockWaiter) bool { return w.ch == ch })
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(c.now) {
			kept = append(kept, w)
		} else {
			w.ch <- c.now
		}
	}
	c.waiters = kept
}

// pendingTimers counts timers not yet fired (the loops' waits).
func (c *fakeClock) pendingTimers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}

// waitLimit is how long a test waits for a condition before failing.
const waitLimit = 10 * time.Second

// fakeSender records requests (as clones) and answers with respond.
type fakeSender struct {
	mu      sync.Mutex
	reqs    []*api.ReportRequest
	respond func(call int, req *api.ReportRequest) (*api.ReportResponse, error)
}

func (f *fakeSender) Report(_ context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs = append(f.reqs, proto.Clone(req).(*api.ReportRequest))
	return f.respond(len(f.reqs)-1, req)
}

func (f *fakeSender) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func (f *fakeSender) req(i int) *api.ReportRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[i]
}

func windows(req *api.ReportRequest) []uint64 {
	var ws []uint64
	for _, c := range req.Columns {
		ws = append(ws, c.WindowStartMs)
	}
	return ws
}

func ackAll(req *api.ReportRequest) *api.ReportResponse {
	return &api.ReportResponse{AckedWindowStarts: windows(req)}
}

const (
	testStep   = time.Second
	testResend = 300 * time.Millisecond
	testMaxBo  = 40 * time.Millisecond
)

type harness struct {
	s      *Sampler
	r      *Reporter
	clk    *fakeClock
	sender *fakeSender
}

// startReporter runs a reporter on a fake clock half-way through the window
// [t0, t0+1s), with a one-route sampler and the given sender behaviour.
func startReporter(t *testing.T, respond func(int, *api.ReportRequest) (*api.ReportResponse, error), adjust func(*ReporterConfig)) *harness {
	t.Helper()
	return startReporterWith(t, mustCatalog(t), respond, adjust)
}

// startReporterWith is startReporter with the sampler's routes taken from
// cat (none if nil).
func startReporterWith(t *testing.T, cat *catalog.Catalog, respond func(int, *api.ReportRequest) (*api.ReportResponse, error), adjust func(*ReporterConfig)) *harness {
	t.Helper()
	s := newTestSampler(t, SamplerConfig{Load: LoadConfig{StepMs: uint64(testStep.Milliseconds()), Buckets: 16, WriteWeight: 4, ReadWeight: 1}, SampleRate: 1})
	if cat != nil {
		setCatalog(t, s, cat)
	}
	h := &harness{s: s, clk: newFakeClock(t0 + 500), sender: &fakeSender{respond: respond}}
	cfg := ReporterConfig{
		ReporterID: "node-1", Sampler: s, Sender: h.sender,
		Clock: h.clk.Now, Timer: h.clk.Timer,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: testMaxBo, ResendInterval: testResend,
	}
	if adjust != nil {
		adjust(&cfg)
	}
	r, err := NewReporter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	// The close loop waits for the end of the first window; an unstarted
	// column has no boundary of its own, so time must not move before.
	testutil.WaitFor(t, waitLimit, "the close loop to wait", func() bool { return h.clk.pendingTimers() >= 1 })
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	})
	return h
}

// boundary advances the clock to the next step boundary and waits for the
// column to be closed.
func (h *harness) boundary(t *testing.T) {
	t.Helper()
	closed := h.r.Stats().ColumnsClosed
	now := uint64(h.clk.Now().UnixMilli())
	h.clk.Advance(time.Duration(h.s.NextBoundary(now)-now) * time.Millisecond)
	testutil.WaitFor(t, waitLimit, "the column to close", func() bool { return h.r.Stats().ColumnsClosed == closed+1 })
}

func TestReporterResendsUntilAcked(t *testing.T) {
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		if call < 2 {
			return &api.ReportResponse{}, nil // received, not yet committed
		}
		return ackAll(req), nil
	}, nil)
	h.s.Observe(1, []byte("a"), true)
	h.s.Observe(1, []byte("b"), false)
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the first report", func() bool { return h.sender.calls() == 1 })
	for call := 2; call <= 3; call++ {
		// The close loop waits for the next boundary, the send loop to resend.
		testutil.WaitFor(t, waitLimit, "both loops to wait", func() bool { return h.clk.pendingTimers() == 2 })
		h.clk.Advance(testResend)
		testutil.WaitFor(t, waitLimit, fmt.Sprintf("report %d", call), func() bool { return h.sender.calls() == call })
	}
	testutil.WaitFor(t, waitLimit, "the acknowledgement", func() bool { return h.r.Stats().Pending == 0 })
	first := h.sender.req(0)
	if len(first.Columns) != 1 || first.ReporterId != "node-1" || first.Columns[0].WindowStartMs != t0 {
		t.Fatalf("first report %v", first)
	}
	if r := first.Columns[0].Rows; len(r) != 1 || r[0].Writes != 1 || r[0].Reads != 1 {
		t.Fatalf("rows %v", r)
	}
	for i := 1; i < 3; i++ {
		if !proto.Equal(h.sender.req(i), first) {
			t.Fatalf("resend %d differs: %v vs %v", i, h.sender.req(i), first)
		}
	}
	if st := h.r.Stats(); st.ColumnsSent != 3 || st.ColumnsAcked != 1 || st.ColumnsLate != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Acknowledged: never sent again; the next column goes alone.
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the next report", func() bool { return h.sender.calls() == 4 })
	if ws := windows(h.sender.req(3)); !slices.Equal(ws, []uint64{t0 + 1000}) {
		t.Fatalf("next report windows %v, want only the new column", ws)
	}
}

// Every new column goes out with all unacknowledged ones, oldest first.
func TestReporterSendsAllUnacknowledgedWithNewColumn(t *testing.T) {
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		return &api.ReportResponse{}, nil
	}, func(c *ReporterConfig) { c.ResendInterval = time.Hour })
	for i := range 3 {
		h.boundary(t)
		testutil.WaitFor(t, waitLimit, "a report", func() bool { return h.sender.calls() == i+1 })
		// The new column woke the send loop before its resend was due: that
		// timer is stopped, not left armed beside the new one.
		testutil.WaitFor(t, waitLimit, "the close wait and one resend wait", func() bool { return h.clk.pendingTimers() == 2 })
	}
	if ws := windows(h.sender.req(2)); !slices.Equal(ws, []uint64{t0, t0 + 1000, t0 + 2000}) {
		t.Fatalf("third report windows %v", ws)
	}
}

func TestReporterDropsOldestWhenPendingFull(t *testing.T) {
	var mu sync.Mutex
	up := false
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		if !up {
			return nil, errors.New("no leader")
		}
		return ackAll(req), nil
	}, func(c *ReporterConfig) { c.MaxPending = 3 })
	for range 5 {
		h.s.Observe(1, []byte("k"), true)
		h.boundary(t)
	}
	// Parked in its backoff, the send loop has no stale batch in hand: the
	// next attempt is built from the three newest columns.
	testutil.WaitFor(t, waitLimit, "the backoff wait", func() bool { return h.clk.pendingTimers() == 2 })
	if st := h.r.Stats(); st.ColumnsDropped != 2 || st.Pending != 3 || st.ReportFailures == 0 {
		t.Fatalf("stats %+v, want 2 dropped, 3 pending, failures", st)
	}
	mu.Lock()
	up = true
	mu.Unlock()
	calls := h.sender.calls()
	h.clk.Advance(testMaxBo) // past any backoff
	testutil.WaitFor(t, waitLimit, "the acknowledgement", func() bool { return h.r.Stats().Pending == 0 })
	last := h.sender.req(h.sender.calls() - 1)
	if ws := windows(last); !slices.Equal(ws, []uint64{t0 + 2000, t0 + 3000, t0 + 4000}) || h.sender.calls() != calls+1 {
		t.Fatalf("delivered windows %v in %d calls, want the newest three in one", ws, h.sender.calls()-calls)
	}
}

func TestReporterRetriesSameColumnsAfterFailure(t *testing.T) {
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		if call < 2 {
			return nil, errors.New("unavailable")
		}
		return ackAll(req), nil
	}, nil)
	h.s.Observe(1, []byte("k"), true)
	h.boundary(t)
	for call := 2; call <= 3; call++ {
		testutil.WaitFor(t, waitLimit, "the backoff wait", func() bool { return h.sender.calls() == call-1 && h.clk.pendingTimers() == 2 })
		h.clk.Advance(testMaxBo)
		testutil.WaitFor(t, waitLimit, fmt.Sprintf("attempt %d", call), func() bool { return h.sender.calls() == call })
	}
	testutil.WaitFor(t, waitLimit, "the acknowledgement", func() bool { return h.r.Stats().Pending == 0 })
	for i := 1; i < 3; i++ {
		if !proto.Equal(h.sender.req(i), h.sender.req(0)) {
			t.Fatalf("attempt %d sent other columns: %v vs %v", i, h.sender.req(i), h.sender.req(0))
		}
	}
	if st := h.r.Stats(); st.ReportFailures != 2 || st.ColumnsAcked != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestReporterPermanentRejection(t *testing.T) {
	refused := errors.New("refused: window_start_ms too far ahead")
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		if call == 0 {
			return nil, refused
		}
		return ackAll(req), nil
	}, func(c *ReporterConfig) { c.Permanent = func(err error) bool { return errors.Is(err, refused) } })
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the rejection", func() bool { return h.r.Stats().ColumnsRejected == 1 })
	if st := h.r.Stats(); st.Pending != 0 || st.ReportFailures != 0 {
		t.Fatalf("stats %+v: a refused column must be dropped, not retried", st)
	}
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the next report", func() bool { return h.sender.calls() == 2 })
	if ws := windows(h.sender.req(1)); !slices.Equal(ws, []uint64{t0 + 1000}) {
		t.Fatalf("windows %v: the refused column came back", ws)
	}
}

func TestReporterLateAcks(t *testing.T) {
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		// Late windows are listed among the acknowledged ones, or alone.
		return &api.ReportResponse{LateWindowStarts: windows(req)}, nil
	}, nil)
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the acknowledgement", func() bool { return h.r.Stats().Pending == 0 })
	if st := h.r.Stats(); st.ColumnsAcked != 1 || st.ColumnsLate != 1 {
		t.Fatalf("stats %+v, want 1 acked, 1 late", st)
	}
}

func TestReporterAdoptsConfigAtNextBoundary(t *testing.T) {
	cfg := &api.Config{StepMs: 1000, Buckets: 4, WriteWeight: new(uint32(3)), ReadWeight: new(uint32(2)), Threshold: 50000}
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		resp := ackAll(req)
		resp.Config = cfg
		return resp, nil
	}, nil)
	h.boundary(t) // closes [t0, t0+1s); the report's response stages cfg
	testutil.WaitFor(t, waitLimit, "the first report", func() bool { return h.sender.calls() == 1 && h.r.Stats().Pending == 0 })
	h.s.Observe(1, []byte("k"), true)
	h.boundary(t) // closes the column opened before cfg arrived
	// One report per column: two columns closed before the send loop runs
	// would go out together.
	testutil.WaitFor(t, waitLimit, "the second report", func() bool { return h.sender.calls() == 2 })
	h.s.Observe(1, []byte("k"), true)
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "three reports", func() bool { return h.sender.calls() == 3 })
	for i, want := range []uint32{16, 16, 4} {
		c := h.sender.req(i).Columns[0]
		if c.Buckets != want || (want == 4) != (c.WriteWeight == 3) {
			t.Fatalf("column %d: buckets %d write weight %d, want buckets %d", i, c.Buckets, c.WriteWeight, want)
		}
	}
	if r := h.sender.req(2).Columns[0].Rows[0]; len(r.Buckets) != 4 || r.TopKeys[0].Count != 3 {
		t.Fatalf("row under the new config: %v", r)
	}
}

func TestReporterRejectsBadClusterConfig(t *testing.T) {
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		resp := ackAll(req)
		resp.Config = &api.Config{StepMs: 1000, Buckets: 1000}
		return resp, nil
	}, nil)
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the rejection", func() bool { return h.r.Stats().ConfigRejected == 1 })
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the second report", func() bool { return h.sender.calls() == 2 })
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "three reports", func() bool { return h.sender.calls() == 3 })
	if c := h.sender.req(2).Columns[0]; c.Buckets != 16 {
		t.Fatalf("bucket count %d: a bad config was adopted", c.Buckets)
	}
	if st := h.r.Stats(); st.ConfigRejected != 1 {
		t.Fatalf("the same bad config was counted %d times", st.ConfigRejected)
	}
}

// A busy node's column keeps the evidence of its heaviest rows only, up to
// api.MaxReportEvidenceBytes, and counts the rows that went without; the
// size limit, not reached, trims nothing.
func TestReporterEvidenceBound(t *testing.T) {
	const routes = 200
	var splits []string
	for i := 1; i < routes; i++ {
		splits = append(splits, fmt.Sprintf("r%03d", i))
	}
	cat := mustCatalog(t, splits...)
	h := startReporterWith(t, cat, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		return ackAll(req), nil
	}, nil)
	// Every route fills its sample and sketch with 100-byte keys (about 4
	// KiB of evidence a row, 800 KiB in all); route i is observed 1 + i/20
	// times a key, so heavier routes have higher ids.
	for i := range routes {
		for k := range 64 {
			key := fmt.Appendf(nil, "r%03d-%095d", i, k)
			for range 1 + i/20 {
				h.s.Observe(cat.Lookup(key).ID, key, true)
			}
		}
	}
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the report", func() bool { return h.sender.calls() == 1 })
	col := h.sender.req(0).Columns[0]
	evidence, lightestKept, heaviestCapped, capped := 0, uint64(math.MaxUint64), uint64(0), 0
	for _, r := range col.Rows {
		if e := rowEvidence(r); e > 0 {
			evidence += e
			lightestKept = min(lightestKept, r.Writes)
		} else {
			capped++
			heaviestCapped = max(heaviestCapped, r.Writes)
		}
	}
	st := h.r.Stats()
	if len(col.Rows) != routes || capped == 0 || st.EvidenceCapped != uint64(capped) || st.TopKeysTrimmed+st.RowsTrimmed != 0 {
		t.Fatalf("%d rows, %d without evidence; stats %+v", len(col.Rows), capped, st)
	}
	if evidence > api.MaxReportEvidenceBytes || evidence < api.MaxReportEvidenceBytes/2 {
		t.Fatalf("%d bytes of evidence sent, want at most %d and most of it", evidence, api.MaxReportEvidenceBytes)
	}
	if heaviestCapped > lightestKept {
		t.Fatalf("a row of %d writes went without evidence, one of %d kept it", heaviestCapped, lightestKept)
	}
}

// A column too big for one report is trimmed; columns that fit together go
// together, the others in the next request; no request is over the limit.
func TestReporterSizeLimit(t *testing.T) {
	const limit = 2048
	cat := mustCatalog(t, "b", "c", "d", "e", "f", "g")
	h := startReporterWith(t, cat, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		if s := proto.Size(req); s > limit {
			return nil, fmt.Errorf("request of %d bytes", s)
		}
		return &api.ReportResponse{}, nil
	}, func(c *ReporterConfig) { c.MaxReportBytes = limit; c.ResendInterval = time.Hour })
	for i := range 400 {
		key := fmt.Appendf(nil, "%c-key-%03d", 'a'+i%7, i)
		h.s.Observe(cat.Lookup(key).ID, key, i%2 == 0)
	}
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the report", func() bool { return h.sender.calls() == 1 })
	col := h.sender.req(0).Columns[0]
	if st := h.r.Stats(); st.TopKeysTrimmed == 0 || proto.Size(h.sender.req(0)) > limit {
		t.Fatalf("stats %+v, request %d bytes", st, proto.Size(h.sender.req(0)))
	}
	stripped := 0
	for _, r := range col.Rows {
		if len(r.TopKeys) == 0 {
			stripped++
			if !r.TopKDegraded {
				t.Fatalf("route %d lost its top keys without being marked degraded", r.RouteId)
			}
		}
	}
	if len(col.Rows) == 0 || stripped == 0 {
		t.Fatalf("trimmed column %v", col)
	}
	// Small columns are batched up to the limit across requests.
	for range 30 {
		h.s.Observe(1, []byte("a"), true)
		h.boundary(t)
	}
	testutil.WaitFor(t, waitLimit, "the last column", func() bool {
		n := h.sender.calls()
		ws := windows(h.sender.req(n - 1))
		return ws[len(ws)-1] == t0+30_000
	})
	for i := range h.sender.calls() {
		if s := proto.Size(h.sender.req(i)); s > limit {
			t.Fatalf("request %d: %d bytes over %d", i, s, limit)
		}
	}
}

// fakeRoutes plays a scripted watch per call and records where each started.
type fakeRoutes struct {
	mu     sync.Mutex
	froms  []uint64
	script func(ctx context.Context, call int, fn func(*api.WatchRoutesResponse) error) error
}

func (f *fakeRoutes) Watch(ctx context.Context, from uint64, fn func(*api.WatchRoutesResponse) error) error {
	f.mu.Lock()
	f.froms = append(f.froms, from)
	call := len(f.froms) - 1
	f.mu.Unlock()
	return f.script(ctx, call, fn)
}

func (f *fakeRoutes) started() []uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.froms)
}

func page(version uint64, last bool, rs ...*catalog.RouteDescriptor) *api.WatchRoutesResponse {
	p := &api.SnapshotPage{Version: version, Last: last}
	for _, r := range rs {
		p.Routes = append(p.Routes, r.ToProto())
	}
	return &api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_SnapshotPage{SnapshotPage: p}}
}

func delta(d catalog.Delta) *api.WatchRoutesResponse {
	return &api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_Delta{Delta: d.ToProto()}}
}

func TestReporterFollowsCatalog(t *testing.T) {
	c1 := mustCatalog(t, "g", "p")
	rs := routesOf(c1)
	c2, kids, err := c1.Split(rs[1].ID, []byte("k"), 77)
	if err != nil {
		t.Fatal(err)
	}
	c3, _, err := c2.Split(rs[0].ID, []byte("c"), 78)
	if err != nil {
		t.Fatal(err)
	}
	c4, _, err := c3.Split(rs[2].ID, []byte("x"), 79)
	if err != nil {
		t.Fatal(err)
	}
	var step sync.Mutex // held by the test until it lets the watch go on
	step.Lock()
	src := &fakeRoutes{script: func(ctx context.Context, call int, fn func(*api.WatchRoutesResponse) error) error {
		switch call {
		case 0: // a two-page snapshot, a split, then a delta that skips version 3
			for _, ev := range []*api.WatchRoutesResponse{
				page(c1.Version(), false, rs[0], rs[1]),
				page(c1.Version(), true, rs[2]),
				delta(catalog.SplitDelta(c2.Version(), rs[1].ID, kids, 77)),
			} {
				if err := fn(ev); err != nil {
					return err
				}
			}
			step.Lock() // until the test checked version 2
			return fn(delta(catalog.Delta{Version: c4.Version(), Removed: []uint64{rs[2].ID}}))
		case 1: // resync from a full snapshot, then the stream breaks
			if err := fn(page(c4.Version(), true, routesOf(c4)...)); err != nil {
				return err
			}
			return errors.New("stream reset")
		default: // resumed after version 4: nothing new
			<-ctx.Done()
			return ctx.Err()
		}
	}}
	h := startReporterWith(t, nil, func(int, *api.ReportRequest) (*api.ReportResponse, error) { return &api.ReportResponse{}, nil },
		func(c *ReporterConfig) { c.Routes = src })
	version := func() uint64 { v, _ := h.s.RoutesVersion(); return v }
	testutil.WaitFor(t, waitLimit, "the split", func() bool { return version() == c2.Version() })
	h.s.Observe(kids[1].ID, []byte("m"), true)
	h.s.Observe(rs[1].ID, []byte("m"), true) // the split parent
	if st := h.s.Stats(); st.UnknownRoute != 1 {
		t.Fatalf("stats %+v: only the parent must be unknown", st)
	}
	step.Unlock()
	// The gap ends the watch; after a backoff it restarts from a snapshot.
	testutil.WaitFor(t, waitLimit, "the watch to back off", func() bool { return h.r.Stats().WatchFailures == 1 && h.clk.pendingTimers() == 2 })
	h.clk.Advance(testMaxBo)
	testutil.WaitFor(t, waitLimit, "the resync", func() bool {
		return version() == c4.Version() && h.r.Stats().WatchFailures == 2 && h.clk.pendingTimers() == 2
	})
	h.clk.Advance(testMaxBo)
	testutil.WaitFor(t, waitLimit, "the resumed watch", func() bool { return len(src.started()) == 3 })
	if got := src.started(); !slices.Equal(got, []uint64{0, 0, c4.Version()}) {
		t.Fatalf("watches started from %v, want [0 0 %d]", got, c4.Version())
	}
	c4.Ascend(func(r *catalog.RouteDescriptor) bool {
		h.s.Observe(r.ID, r.Start, false)
		return true
	})
	if st := h.s.Stats(); st.UnknownRoute != 1 {
		t.Fatalf("stats %+v: every route of version 4 must be known", st)
	}
}

func TestRouteFollowerRejectsInconsistentDeltas(t *testing.T) {
	c := mustCatalog(t, "m")
	rs := routesOf(c)
	extra := &catalog.RouteDescriptor{ID: 9, Start: []byte("x"), End: nil}
	for _, tc := range []struct {
		name string
		evs  []*api.WatchRoutesResponse
	}{
		{"delta before a snapshot", []*api.WatchRoutesResponse{delta(catalog.Delta{Version: 2})}},
		{"version skipped", []*api.WatchRoutesResponse{page(1, true, rs...), delta(catalog.Delta{Version: 3})}},
		{"removes a route that is not live", []*api.WatchRoutesResponse{page(1, true, rs...), delta(catalog.Delta{Version: 2, Removed: []uint64{42}})}},
		{"adds a live route", []*api.WatchRoutesResponse{page(1, true, rs...), delta(catalog.Delta{Version: 2, Added: []*catalog.RouteDescriptor{rs[0]}})}},
		{"adds a route twice", []*api.WatchRoutesResponse{page(1, true, rs...), delta(catalog.Delta{Version: 2, Added: []*catalog.RouteDescriptor{extra, extra}})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSampler(t, SamplerConfig{})
			f := newRouteFollower(s)
			var err error
			for _, ev := range tc.evs {
				if err = f.apply(ev); err != nil {
					break
				}
			}
			if !errors.Is(err, errCatalogGap) {
				t.Fatalf("error %v, want a gap", err)
			}
			f.restart(true)
			if f.from() != 0 {
				t.Fatalf("after a gap the watch must restart from a snapshot, not %d", f.from())
			}
		})
	}
	// A duplicate delta (a watch resumed at an older version) is skipped.
	s := newTestSampler(t, SamplerConfig{})
	f := newRouteFollower(s)
	for _, ev := range []*api.WatchRoutesResponse{page(1, true, rs...), delta(catalog.Delta{Version: 2, Added: []*catalog.RouteDescriptor{extra}}), delta(catalog.Delta{Version: 2, Added: []*catalog.RouteDescriptor{extra}})} {
		if err := f.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := s.RoutesVersion(); v != 2 || len(f.routes) != 3 {
		t.Fatalf("version %d with %d routes", v, len(f.routes))
	}
	// A rejected delta changes nothing.
	if err := f.apply(delta(catalog.Delta{Version: 3, Removed: []uint64{extra.ID, 42}})); !errors.Is(err, errCatalogGap) {
		t.Fatalf("error %v, want a gap", err)
	}
	if f.routes[extra.ID] == nil || f.version != 2 {
		t.Fatalf("a rejected delta removed route %d (version %d)", extra.ID, f.version)
	}
}

// A merge delta (two routes out, one in) is applied like any other: the
// sampler counts for the merged route and no longer for its parents.
func TestRouteFollowerAppliesMerges(t *testing.T) {
	c1 := mustCatalog(t, "g", "p")
	rs := routesOf(c1)
	c2, merged, err := c1.Merge(rs[0].ID, rs[1].ID, 77)
	if err != nil {
		t.Fatal(err)
	}
	s := newTestSampler(t, SamplerConfig{})
	f := newRouteFollower(s)
	for _, ev := range []*api.WatchRoutesResponse{page(c1.Version(), true, rs...), delta(catalog.MergeDelta(c2.Version(), rs[0].ID, rs[1].ID, merged, 77))} {
		if err := f.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := s.RoutesVersion(); v != c2.Version() || len(f.routes) != 2 || f.routes[merged.ID] == nil || f.routes[rs[0].ID] != nil || f.routes[rs[1].ID] != nil {
		t.Fatalf("version %d, routes %v", v, f.routes)
	}
	s.Observe(merged.ID, []byte("h"), true)
	s.Observe(rs[1].ID, []byte("h"), true) // a parent
	if st := s.Stats(); st.UnknownRoute != 1 {
		t.Fatalf("stats %+v: only the parent must be unknown", st)
	}
}

func TestTrimColumn(t *testing.T) {
	row := func(id, writes uint64, keys int) *api.ReportRow {
		r := &api.ReportRow{RouteId: id, Writes: writes, Buckets: []uint64{writes * 4}, SampleRate: 1}
		for k := range keys {
			r.TopKeys = append(r.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "key-%d-%d", id, k), Count: 4})
			r.Samples = append(r.Samples, &api.SampledKey{Key: fmt.Appendf(nil, "s-%d-%d", id, k), Writes: 1})
		}
		return r
	}
	col := func() *api.ReportColumn {
		return &api.ReportColumn{WindowStartMs: t0, StepMs: 1000, Buckets: 1, WriteWeight: 4, ReadWeight: 1,
			Rows: []*api.ReportRow{row(1, 50, 8), row(2, 10, 8), row(3, 900, 8), row(4, 10, 8), row(5, 300, 8)}}
	}
	full := proto.Size(col())
	evidence := 0
	for _, r := range col().Rows {
		evidence += rowEvidence(r)
	}
	keysOf2 := proto.Size(row(2, 10, 8)) - proto.Size(row(2, 10, 0))
	// Just the heaviest two rows, without keys.
	c35 := col()
	c35.Rows = []*api.ReportRow{row(3, 900, 0), row(5, 300, 0)}
	for _, r := range c35.Rows {
		r.TopKDegraded = true
	}
	bare := col() // every row without keys
	for i, r := range bare.Rows {
		bare.Rows[i] = row(r.RouteId, r.Writes, 0)
		bare.Rows[i].TopKDegraded = true
	}
	for _, tc := range []struct {
		name                     string
		budget, evidenceBudget   int
		wantCapped, wantStripped []uint64 // routes whose evidence goes, to each bound
		wantDropped              []uint64
	}{
		{"fits", full, evidence, nil, nil, nil},
		{"one row's keys", full - 10, evidence, nil, []uint64{2}, nil},
		{"lightest first, ties in route order", full - keysOf2 - 1, evidence, nil, []uint64{2, 4}, nil},
		{"all keys, then rows", proto.Size(c35), evidence, nil, []uint64{1, 2, 3, 4, 5}, []uint64{1, 2, 4}},
		{"evidence bound", full, evidence - 1, []uint64{2}, nil, nil},
		{"evidence bound keeps the heaviest", full, rowEvidence(row(3, 900, 8)) + rowEvidence(row(5, 300, 8)), []uint64{2, 4, 1}, nil, nil},
		{"no evidence at all", full, 0, []uint64{2, 4, 1, 5, 3}, nil, nil},
		{"evidence bound, then size", proto.Size(bare), evidence - 1, []uint64{2}, []uint64{4, 1, 5, 3}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := col()
			got := trimColumn(c, tc.budget, tc.evidenceBudget)
			if size := proto.Size(c); size > tc.budget || got.Size != size {
				t.Fatalf("%d bytes (trim says %d), budget %d", size, got.Size, tc.budget)
			}
			var gotStripped, kept []uint64
			left := 0
			for _, r := range c.Rows {
				kept = append(kept, r.RouteId)
				left += rowEvidence(r)
				if len(r.TopKeys) == 0 {
					if !r.TopKDegraded || len(r.Samples) > 0 {
						t.Fatalf("route %d lost its top keys without its samples or without being marked degraded", r.RouteId)
					}
					gotStripped = append(gotStripped, r.RouteId)
				}
			}
			if left > tc.evidenceBudget {
				t.Fatalf("%d bytes of evidence over %d", left, tc.evidenceBudget)
			}
			shed := append(slices.Clone(tc.wantCapped), tc.wantStripped...)
			var wantKept, wantShedKept []uint64
			for _, id := range []uint64{1, 2, 3, 4, 5} {
				if slices.Contains(tc.wantDropped, id) {
					continue
				}
				wantKept = append(wantKept, id)
				if slices.Contains(shed, id) {
					wantShedKept = append(wantShedKept, id)
				}
			}
			want := Trimmed{EvidenceCapped: len(tc.wantCapped), EvidenceStripped: len(tc.wantStripped), RowsDropped: len(tc.wantDropped), Size: got.Size}
			if !slices.Equal(kept, wantKept) || !slices.Equal(gotStripped, wantShedKept) || got != want {
				t.Fatalf("kept %v shed %v (%+v), want kept %v shed %v (%+v)", kept, gotStripped, got, wantKept, wantShedKept, want)
			}
		})
	}
}

// TestTrimColumnProperty: whatever the rows and bounds, a trimmed column
// meets both bounds when it can, and a row keeps its evidence only if
// every row that lost its own (or was dropped) is at most as heavy.
func TestTrimColumnProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 40).Draw(t, "rows")
		col := &api.ReportColumn{WindowStartMs: t0, StepMs: 1000, Buckets: 1, WriteWeight: 4, ReadWeight: 1}
		for i := range n {
			r := &api.ReportRow{RouteId: uint64(i + 1), Writes: rapid.Uint64Range(0, 20).Draw(t, "writes"),
				Reads: rapid.Uint64Range(0, 20).Draw(t, "reads"), SampleRate: 1, TopKDegraded: rapid.Bool().Draw(t, "degraded")}
			for k := range rapid.IntRange(0, 4).Draw(t, "keys") {
				r.TopKeys = append(r.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "k%d-%d", i, k), Count: 1})
			}
			for k := range rapid.IntRange(0, 4).Draw(t, "samples") {
				r.Samples = append(r.Samples, &api.SampledKey{Key: fmt.Appendf(nil, "s%d-%d", i, k), Reads: 1})
			}
			col.Rows = append(col.Rows, r)
		}
		full, evidence := proto.Size(col), 0
		for _, r := range col.Rows {
			evidence += rowEvidence(r)
		}
		budget := rapid.IntRange(0, full).Draw(t, "budget")
		evidenceBudget := rapid.IntRange(0, evidence).Draw(t, "evidenceBudget")
		before := proto.Clone(col).(*api.ReportColumn)
		if got := trimColumn(col, budget, evidenceBudget); got.Size != proto.Size(col) {
			t.Fatalf("trim says %d bytes, the column takes %d", got.Size, proto.Size(col))
		}

		load := func(r *api.ReportRow) uint64 { return 4*r.Writes + r.Reads }
		left, lightestKept, heaviestShed := 0, uint64(math.MaxUint64), uint64(0)
		kept := map[uint64]*api.ReportRow{}
		for _, r := range col.Rows {
			kept[r.RouteId] = r
			if e := rowEvidence(r); e > 0 {
				left += e
				lightestKept = min(lightestKept, load(r))
			}
		}
		for _, r := range before.Rows {
			k, ok := kept[r.RouteId]
			if rowEvidence(r) > 0 && (!ok || rowEvidence(k) == 0) {
				heaviestShed = max(heaviestShed, load(r))
			}
		}
		if left > evidenceBudget {
			t.Fatalf("evidence %d over %d", left, evidenceBudget)
		}
		if size := proto.Size(col); size > budget && len(col.Rows) > 0 {
			t.Fatalf("size %d over %d with %d rows left", size, budget, len(col.Rows))
		}
		if lightestKept < heaviestShed {
			t.Fatalf("a row of load %d kept its evidence, one of %d lost it", lightestKept, heaviestShed)
		}
		if !slices.IsSortedFunc(col.Rows, func(a, b *api.ReportRow) int { return cmp.Compare(a.RouteId, b.RouteId) }) {
			t.Fatal("rows out of route order")
		}
	})
}

func TestNewReporterRejects(t *testing.T) {
	s := newTestSampler(t, SamplerConfig{})
	snd := &fakeSender{}
	for _, tc := range []struct {
		cfg  ReporterConfig
		want string
	}{
		{ReporterConfig{Sampler: s, Sender: snd}, "ReporterID"},
		{ReporterConfig{ReporterID: "n", Sender: snd}, "Sampler"},
		{ReporterConfig{ReporterID: "n", Sampler: s}, "Sender"},
		{ReporterConfig{ReporterID: "n", Sampler: s, Sender: snd, MaxPending: -1}, "MaxPending"},
		{ReporterConfig{ReporterID: "n", Sampler: s, Sender: snd, MaxReportBytes: api.MaxReportBytes + 1}, "MaxReportBytes"},
		{ReporterConfig{ReporterID: "n", Sampler: s, Sender: snd, MaxReportBytes: 40}, "no room"},
		{ReporterConfig{ReporterID: "n", Sampler: s, Sender: snd, MinBackoff: -1}, "negative"},
	} {
		if _, err := NewReporter(tc.cfg); !errors.Is(err, ErrInvalidReporterConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("NewReporter(%+v) = %v, want ErrInvalidReporterConfig naming %s", tc.cfg, err, tc.want)
		}
	}
}

func TestReporterMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		return ackAll(req), nil
	}, func(c *ReporterConfig) {
		c.Metrics = prometheus.WrapRegistererWith(prometheus.Labels{"reporter": "node-1"}, reg)
	})
	h.s.Observe(99, []byte("k"), true)
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "the acknowledgement", func() bool { return h.r.Stats().ColumnsAcked == 1 })
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "hotsplit_keyviz_") {
			t.Fatalf("metric %s without the hotsplit_keyviz_ prefix", mf.GetName())
		}
		for _, m := range mf.Metric {
			name := mf.GetName()
			for _, l := range m.Label {
				switch l.GetName() {
				case "reason", "part":
					name += "{" + l.GetValue() + "}"
				case "reporter":
				default:
					t.Fatalf("%s: label %s outside the fixed set", name, l.GetName())
				}
			}
			got[name] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for name, want := range map[string]float64{
		"hotsplit_keyviz_columns_closed_total":                      1,
		"hotsplit_keyviz_columns_acked_total":                       1,
		"hotsplit_keyviz_observations_dropped_total{unknown_route}": 1,
		"hotsplit_keyviz_routes_striped_total":                      0,
		"hotsplit_keyviz_columns_dropped_total{pending_full}":       0,
		"hotsplit_keyviz_pending_columns":                           0,
		"hotsplit_keyviz_catalog_version":                           1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Fatalf("%s = %v (present %v), want %v; all: %v", name, v, ok, want, got)
		}
	}
	// A second reporter on the same registry needs its own label value.
	_, err = NewReporter(ReporterConfig{ReporterID: "node-2", Sampler: h.s, Sender: h.sender,
		Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"reporter": "node-1"}, reg)})
	if err == nil {
		t.Fatal("registering the same metrics twice succeeded")
	}
	if _, err := NewReporter(ReporterConfig{ReporterID: "node-2", Sampler: h.s, Sender: h.sender,
		Metrics: prometheus.WrapRegistererWith(prometheus.Labels{"reporter": "node-2"}, reg)}); err != nil {
		t.Fatal(err)
	}
}

// A report refused for good still teaches the reporter the cluster's
// config (the cluster adds it to the refusal's status): a reporter on
// another step, started after a step change, adopts it from that first
// answer at the next boundary instead of being refused forever.
func TestReporterAdoptsConfigFromARefusal(t *testing.T) {
	cfg := &api.Config{StepMs: 2000, Buckets: 16, WriteWeight: new(uint32(4)), ReadWeight: new(uint32(1)), Threshold: 50000}
	h := startReporter(t, func(call int, req *api.ReportRequest) (*api.ReportResponse, error) {
		if req.Columns[0].StepMs != cfg.StepMs {
			st, err := status.New(codes.InvalidArgument, "columns[0].step_ms: 1000 differs from the replicated step of 2000").WithDetails(cfg)
			if err != nil {
				t.Error(err)
			}
			return nil, fmt.Errorf("report via n1: %w", st.Err()) // wrapped, as client.Error wraps it
		}
		resp := ackAll(req)
		resp.Config = cfg
		return resp, nil
	}, func(c *ReporterConfig) {
		c.Permanent = func(err error) bool { return status.Code(err) == codes.InvalidArgument }
	})
	h.boundary(t) // the first column, on the old step: refused, config staged
	testutil.WaitFor(t, waitLimit, "the refusal", func() bool { return h.r.Stats().ColumnsRejected == 1 })
	h.boundary(t) // the column opened before the refusal: refused too
	testutil.WaitFor(t, waitLimit, "the second refusal", func() bool { return h.r.Stats().ColumnsRejected == 2 })
	if _, step, _ := h.s.Window(); step != 2000 {
		t.Fatalf("open column on step %d, want the refusal's 2000", step)
	}
	h.s.Observe(1, []byte("k"), true)
	h.boundary(t)
	testutil.WaitFor(t, waitLimit, "an accepted report", func() bool { return h.r.Stats().ColumnsAcked == 1 })
	if c := h.sender.req(h.sender.calls() - 1).Columns[0]; c.StepMs != 2000 {
		t.Fatalf("column on step %d after the refusal", c.StepMs)
	}
}

// rowEvidence is r's evidence bytes, as TrimColumn counts them.
func rowEvidence(r *api.ReportRow) int {
	return proto.Size(&api.ReportRow{TopKeys: r.TopKeys, Samples: r.Samples})
}
