//go:build jepsen

package jepsen

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/client"
	"github.com/hotsplit/hotsplit/jepsen/history"
	"github.com/hotsplit/hotsplit/jepsen/model"
)

// Mix weighs the calls a worker makes. Splits go to the manual key space
// ("k000000".."k999999") and merges join two routes whose shared boundary
// is a manual key; a share of them deliberately carries a stale
// expected_version, which the FSM must refuse.
type Mix struct {
	Read, GetRoute, Split, Merge, Timestamp, ReadSwitch, Toggle int
	// StaleMerge weighs the stale-merge sequence: read, split a route
	// outside an adjacent pair, then merge the pair with the version read
	// before the split (see staleMerge).
	StaleMerge int
	// StaleCAS is the percentage of splits and merges sent with
	// expected_version one below the version the worker last saw.
	StaleCAS int
	// MergeNoCAS is the percentage of merges sent without
	// expected_version: on a stale view they meet the catalog's own
	// refusals (a route gone, routes no longer adjacent) instead.
	MergeNoCAS int
	// TogglePairs: a toggle is a disable followed at once by an enable
	// (keeps automatic splitting mostly on); otherwise a random value.
	TogglePairs bool
}

// DefaultMix is the manual scenarios' mix.
var DefaultMix = Mix{Read: 38, GetRoute: 7, Split: 22, Merge: 7, StaleMerge: 1, Timestamp: 12, ReadSwitch: 8, Toggle: 5, StaleCAS: 10, MergeNoCAS: 20}

// manual split keys: "k" and six digits, below the simulator's "user:" keys.
const (
	manualKeys   = 1_000_000
	manualPrefix = "k"
)

func manualKey(i int) []byte { return fmt.Appendf(nil, "%s%06d", manualPrefix, i) }

// keysInside returns the manual key indexes lo..hi (inclusive) strictly
// inside r, ok false if there are none.
func keysInside(r *api.RouteDescriptor) (lo, hi int, ok bool) {
	// first index whose key is > start
	lo = searchInts(manualKeys, func(i int) bool { return bytes.Compare(manualKey(i), r.GetStart()) > 0 })
	hi = manualKeys - 1
	if len(r.GetEnd()) > 0 {
		hi = searchInts(manualKeys, func(i int) bool { return bytes.Compare(manualKey(i), r.GetEnd()) >= 0 }) - 1
	}
	return lo, hi, lo <= hi
}

// searchInts is sort.Search without the import: the first i in [0, n)
// with f(i), or n.
func searchInts(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if !f(mid) {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// workload runs concurrent workers until the op budget or ctx runs out.
// Calls are paced: call i (counted over all workers) starts no earlier than
// start + i*interval, so the budget spreads over the fault window instead
// of finishing before the first fault.
type workload struct {
	rec      *history.Recorder
	budget   int64
	start    time.Time
	interval time.Duration
	done     atomic.Int64
	maxRoute int // no more manual splits once a worker saw this many routes
}

// ClientSpec describes one worker's client: its endpoints in preference
// order (the client tries a hinted leader first, then this order), its
// per-call timeout and its mix.
type ClientSpec struct {
	Endpoints []string
	// TLS makes the client's TLS config: a certificate of the cluster CA
	// for the given name, and the CA.
	TLS     func(name string) (*tls.Config, error)
	Timeout time.Duration
	Mix     Mix
	// Pinned: never reorder the endpoints (negative controls aim readers
	// at one node).
	Pinned bool
}

// worker is one client with its own view of the catalog.
type worker struct {
	id      int
	w       *workload
	spec    ClientSpec
	cl      *client.Client
	rng     *rand.Rand
	version uint64
	routes  []*api.RouteDescriptor
	toggles int
}

func (k *worker) connect() error {
	name := fmt.Sprintf("jepsen-c%d", k.id)
	creds, err := k.spec.TLS(name)
	if err != nil {
		return err
	}
	cl, err := client.New(client.Config{Endpoints: k.spec.Endpoints, Actor: name, TLS: creds,
		RequestTimeout: k.spec.Timeout, DialTimeout: time.Second, MaxRetries: 3, Backoff: 50 * time.Millisecond})
	if err != nil {
		return err
	}
	if k.cl != nil {
		k.cl.Close()
	}
	k.cl = cl
	return nil
}

// run starts one goroutine per client and waits for them. ctx ending stops
// the workers from starting new calls; calls in flight run to their own
// timeout, so that their outcome is recorded rather than cut off.
func (w *workload) run(ctx context.Context, specs []ClientSpec, seed uint64) error {
	var wg sync.WaitGroup
	workers := make([]*worker, len(specs))
	for i, spec := range specs {
		workers[i] = &worker{id: i, w: w, spec: spec, rng: rand.New(rand.NewPCG(seed, uint64(i)+1))}
		if err := workers[i].connect(); err != nil {
			return fmt.Errorf("client %d: %w", i, err)
		}
	}
	for _, wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer wk.cl.Close()
			wk.loop(ctx)
		}()
	}
	wg.Wait()
	return nil
}

func (k *worker) loop(stop context.Context) {
	m := k.spec.Mix
	toggle := func(ctx context.Context) {
		if m.TogglePairs {
			k.toggle(ctx, false)
			k.toggle(ctx, true)
		} else {
			k.toggle(ctx, k.rng.IntN(2) == 0)
		}
	}
	actions := []struct {
		weight int
		do     func(context.Context)
	}{{m.Read, k.read}, {m.GetRoute, k.getRoute}, {m.Split, k.split}, {m.Merge, k.merge}, {m.StaleMerge, k.staleMerge},
		{m.Timestamp, k.timestamp}, {m.ReadSwitch, k.readSwitch}, {m.Toggle, toggle}}
	total := 0
	for _, a := range actions {
		total += a.weight
	}
	ctx := context.WithoutCancel(stop)
	for stop.Err() == nil {
		slot := k.w.done.Add(1)
		if slot > k.w.budget || !sleepUntil(stop, k.w.start.Add(time.Duration(slot-1)*k.w.interval)) {
			return
		}
		x := k.rng.IntN(total)
		for _, a := range actions {
			if x < a.weight {
				a.do(ctx)
				break
			}
			x -= a.weight
		}
	}
}

// outcome classifies a call's error: nil is OK; a mutation that was
// definitely not applied (or a read that failed) is Fail; anything else
// about a mutation is Unknown, never guessed.
func outcome(err error, mutation bool) (history.Status, string) {
	if err == nil {
		return history.OK, ""
	}
	code := status.Code(err).String()
	if !mutation || (errors.Is(err, client.ErrNotApplied) && !errors.Is(err, client.ErrUnknownOutcome)) {
		return history.Fail, code
	}
	return history.Unknown, code
}

func (k *worker) finish(op history.Op, err error, mutation bool) {
	op.Return = k.w.rec.Now()
	op.Status, op.Code = outcome(err, mutation)
	if err != nil {
		op.Err = err.Error()
		var ce *client.Error
		if errors.As(err, &ce) {
			op.Endpoint = ce.Endpoint
		}
	}
	k.w.rec.Add(op)
	if op.Code == "DeadlineExceeded" && op.Endpoint != "" && !k.spec.Pinned {
		k.demote(op.Endpoint)
	}
}

// demote moves an endpoint that let a call time out (a paused or cut-off
// node looks like that) to the end of the preference order and starts a
// fresh client, which also forgets a leader hint pointing at it: a real
// client would stop waiting on a node that does not answer.
func (k *worker) demote(addr string) {
	eps := make([]string, 0, len(k.spec.Endpoints))
	for _, e := range k.spec.Endpoints {
		if e != addr {
			eps = append(eps, e)
		}
	}
	if len(eps) == len(k.spec.Endpoints) {
		return
	}
	k.spec.Endpoints = append(eps, addr)
	if err := k.connect(); err != nil {
		panic(fmt.Sprintf("jepsen: reconnect client %d: %v", k.id, err)) // endpoints were valid a moment ago
	}
}

func (k *worker) read(ctx context.Context) {
	op := history.Op{Client: k.id, Kind: history.ListRoutes, Call: k.w.rec.Now()}
	resp, err := k.cl.ListRoutes(ctx, &api.ListRoutesRequest{Consistency: api.Consistency_CONSISTENCY_LINEARIZABLE, PageSize: 10000})
	if err == nil && len(resp.GetNextPageToken()) > 0 {
		err = fmt.Errorf("catalog of %d routes does not fit one page", resp.GetRouteCount())
	}
	if err == nil {
		op.Version = resp.GetRead().GetCatalogVersion()
		op.RoutesHash = model.HashAPIRoutes(resp.GetRoutes()).Hex()
		op.RouteCount = len(resp.GetRoutes())
		op.ServedBy = resp.GetRead().GetServedBy()
		if op.Version >= k.version {
			k.version, k.routes = op.Version, resp.GetRoutes()
		}
	}
	k.finish(op, err, false)
}

// getRoute reads one route linearizably: by a random manual key (or the
// empty key), or by the id of a route of the worker's last read, which may
// be gone by now. NotFound for an id is an answer: the route was not live
// when the read was served.
func (k *worker) getRoute(ctx context.Context) {
	op := history.Op{Client: k.id, Kind: history.GetRoute, Call: k.w.rec.Now()}
	req := &api.GetRouteRequest{Consistency: api.Consistency_CONSISTENCY_LINEARIZABLE}
	if len(k.routes) == 0 || k.rng.IntN(2) == 0 {
		op.ByKey = true
		if k.rng.IntN(20) > 0 {
			op.Key = manualKey(k.rng.IntN(manualKeys))
		} else {
			op.Key = []byte{}
		}
		req.Key = op.Key
	} else {
		op.RouteID = k.routes[k.rng.IntN(len(k.routes))].GetRouteId()
		req.RouteId = op.RouteID
	}
	resp, err := k.cl.GetRoute(ctx, req)
	switch {
	case err == nil:
		op.Version, op.ServedBy = resp.GetRead().GetCatalogVersion(), resp.GetRead().GetServedBy()
		op.RouteID = resp.GetRoute().GetRouteId()
		op.RoutesHash = model.HashAPIRoutes([]*api.RouteDescriptor{resp.GetRoute()}).Hex()
	case !op.ByKey && status.Code(err) == codes.NotFound:
		op.Gone, err = true, nil
	}
	k.finish(op, err, false)
}

func (k *worker) split(ctx context.Context) {
	if k.routes == nil || len(k.routes) >= k.w.maxRoute {
		k.read(ctx)
		return
	}
	var candidates []*api.RouteDescriptor
	for _, r := range k.routes {
		if _, _, ok := keysInside(r); ok {
			candidates = append(candidates, r)
		}
	}
	if len(candidates) == 0 {
		k.read(ctx)
		return
	}
	r := candidates[k.rng.IntN(len(candidates))]
	expected := k.version
	if k.rng.IntN(100) < k.spec.Mix.StaleCAS && expected > model.InitialVersion {
		expected--
	}
	k.splitRoute(ctx, r, expected)
}

// splitRoute splits r at a random manual key strictly inside it, with CAS
// on expected.
func (k *worker) splitRoute(ctx context.Context, r *api.RouteDescriptor, expected uint64) {
	lo, hi, _ := keysInside(r)
	key := manualKey(lo + k.rng.IntN(hi-lo+1))
	rid := client.NewRequestID()
	op := history.Op{Client: k.id, Kind: history.Split, Call: k.w.rec.Now(), RequestID: rid, RouteID: r.GetRouteId(), SplitKey: key, ExpectedVersion: &expected}
	resp, err := k.cl.SplitRange(ctx, &api.SplitRangeRequest{RouteId: r.GetRouteId(), SplitKey: key, ExpectedVersion: &expected, RequestId: rid})
	switch {
	case err == nil:
		op.Version, op.LeftID, op.RightID, op.CommitHLC = resp.GetCatalogVersion(), resp.GetLeft().GetRouteId(), resp.GetRight().GetRouteId(), resp.GetCommitHlc()
		k.learnSplit(r.GetRouteId(), resp)
	case status.Code(err) == codes.FailedPrecondition:
		k.routes = nil // stale: read before the next split
	}
	k.finish(op, err, true)
}

// learnSplit updates the worker's catalog with its own split, if the
// worker's view was the version the split replaced.
func (k *worker) learnSplit(parent uint64, resp *api.SplitRangeResponse) {
	if resp.GetCatalogVersion() != k.version+1 {
		k.routes = nil
		return
	}
	routes := make([]*api.RouteDescriptor, 0, len(k.routes)+1)
	for _, r := range k.routes {
		if r.GetRouteId() == parent {
			routes = append(routes, resp.GetLeft(), resp.GetRight())
		} else {
			routes = append(routes, r)
		}
	}
	k.version, k.routes = resp.GetCatalogVersion(), routes
}

func (k *worker) timestamp(ctx context.Context) {
	n := uint32(1 + k.rng.IntN(50))
	op := history.Op{Client: k.id, Kind: history.GetTimestamp, Call: k.w.rec.Now(), Count: n}
	resp, err := k.cl.GetTimestamp(ctx, &api.GetTimestampRequest{Count: n})
	if err == nil {
		if resp.GetCount() != n {
			err = fmt.Errorf("asked for %d timestamps, got %d", n, resp.GetCount())
		}
		op.First = resp.GetFirst()
	}
	k.finish(op, err, false)
}

func (k *worker) readSwitch(ctx context.Context) {
	op := history.Op{Client: k.id, Kind: history.ReadSwitch, Call: k.w.rec.Now()}
	resp, err := k.cl.Status(ctx, &api.StatusRequest{Consistency: api.Consistency_CONSISTENCY_LINEARIZABLE, Limit: 1})
	if err == nil {
		op.SwitchEnabled, op.SwitchReason = resp.GetSwitch().GetEnabled(), resp.GetSwitch().GetReason()
		op.ServedBy = resp.GetRead().GetServedBy()
	}
	k.finish(op, err, false)
}

func (k *worker) toggle(ctx context.Context, enabled bool) {
	k.toggles++
	reason := fmt.Sprintf("jepsen c%d #%d", k.id, k.toggles)
	rid := client.NewRequestID()
	op := history.Op{Client: k.id, Kind: history.SetEnabled, Call: k.w.rec.Now(), RequestID: rid, Enabled: enabled, Reason: reason}
	resp, err := k.cl.SetEnabled(ctx, &api.SetEnabledRequest{Enabled: enabled, Reason: reason, RequestId: rid})
	if err == nil {
		op.SwitchEnabled, op.SwitchReason = resp.GetSwitch().GetEnabled(), resp.GetSwitch().GetReason()
	}
	k.finish(op, err, true)
}
