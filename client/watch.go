package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// maxSnapshotRoutes bounds the routes Watch buffers while a snapshot's pages
// arrive (it delivers a snapshot only once its last page is in).
const maxSnapshotRoutes = 1 << 22

// WatchRoutes opens the raw WatchRoutes stream at the first endpoint that
// accepts a connection, hinted leader first. The stream lives until ctx ends
// or the server closes it; nothing is retried or deduplicated once it is
// open. Most callers want Watch.
func (c *Client) WatchRoutes(ctx context.Context, req *api.WatchRoutesRequest) (grpc.ServerStreamingClient[api.WatchRoutesResponse], error) {
	if pe := c.sec.checkOwnCert(time.Now()); pe != nil {
		return nil, &Error{RPC: "WatchRoutes", Err: pe}
	}
	addr := c.firstAddr()
	var last error
	for attempt := 1; attempt <= len(c.endpoints)+1; attempt++ {
		ec, err := c.conn(addr)
		if err != nil {
			return nil, fmt.Errorf("WatchRoutes: %w", err)
		}
		if err := c.ready(ctx, ec); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, fmt.Errorf("WatchRoutes: %w", err)
			}
			last = &Error{RPC: "WatchRoutes", Endpoint: addr, Attempts: attempt, Err: unreachable(addr, err)}
			if pe, ok := errors.AsType[*PermanentError](err); ok && pe.Problem.EveryEndpoint() {
				return nil, last
			}
			c.forgetLeader(addr)
			addr = c.nextAddr(addr)
			continue
		}
		s, err := api.NewCatalogClient(ec.cc).WatchRoutes(ctx, req)
		if err != nil {
			return nil, &Error{RPC: "WatchRoutes", Endpoint: addr, Attempts: attempt, Err: err}
		}
		return s, nil
	}
	return nil, last
}

// Watch calls fn with every catalog change after fromVersion, in version
// order, until ctx ends (it then returns ctx.Err()) or fn returns an error
// (returned wrapped). fromVersion 0 starts with a full snapshot.
//
// It reconnects through the endpoints with capped, jittered backoff and
// resumes from the last version it delivered, so a reconnect never repeats
// or skips a change, and never goes backwards, even at a lagging node:
// events at or below the last delivered version are dropped. The one
// exception is a new cluster id (the cluster was restored from a backup or
// recovered with --forceNewCluster): the server then sends a full snapshot,
// carrying the new id, and Watch delivers it even at a lower version; fn
// sees SnapshotPage.cluster_id change and must replace its catalog. A snapshot (one
// or more SnapshotPage events of one version) is delivered only once all its
// pages have arrived, page by page in one go, so fn never sees half a
// snapshot; a snapshot older than what was delivered is dropped whole.
// Deltas must follow the delivered version without a gap; a server that
// skips versions is treated as broken and the watch moves to another
// endpoint.
//
// Watch gives up with an *Error after MaxRetries+1 consecutive failed
// connections; a connection counts as good (resetting that count) once it
// delivered an event or stayed up longer than MaxBackoff. fn runs on the
// calling goroutine; Watch holds no lock while it runs.
func (c *Client) Watch(ctx context.Context, fromVersion uint64, fn func(*api.WatchRoutesResponse) error) error {
	if pe := c.sec.checkOwnCert(time.Now()); pe != nil {
		return &Error{RPC: "WatchRoutes", Err: pe}
	}
	w := &watchState{delivered: fromVersion, based: fromVersion > 0}
	if w.based {
		c.mu.Lock()
		w.clusterID = c.watchCluster
		c.mu.Unlock()
	}
	addr := c.firstAddr()
	failures := 0
	for {
		start := time.Now()
		good, err := c.watchOnce(ctx, addr, w, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var cb callbackError
		if errors.As(err, &cb) {
			return fmt.Errorf("client: watch callback at catalog version %d: %w", w.delivered, cb.err)
		}
		if good || time.Since(start) > MaxBackoff {
			failures = 0
		}
		failures++
		fail := &Error{RPC: "WatchRoutes", Endpoint: addr, Attempts: failures, Hint: LeaderHint(err), Err: err}
		if permanentWatchError(err) || failures > c.watchRetries() {
			return fail
		}
		c.log.Debug("watch reconnecting", "endpoint", addr, "attempt", failures, "catalog_version", w.delivered, "err", err)
		next := ""
		if h := fail.Hint; h != nil {
			next = c.learnLeader(h, addr)
		}
		if next == "" {
			c.forgetLeader(addr)
			next = c.nextAddr(addr)
		}
		addr = next
		if err := c.sleep(ctx, failures, true); err != nil {
			return err
		}
	}
}

// watchRetries is how many consecutive failed connections Watch tolerates.
func (c *Client) watchRetries() int {
	switch {
	case c.maxRetries < 0:
		return 0
	case c.maxRetries == 0:
		return DefaultWatchRetries
	}
	return c.maxRetries
}

// callbackError marks an error returned by Watch's fn.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// permanentWatchError is an answer that another attempt will not change.
// A permanent failure of one endpoint (a wrong port in the list) is not:
// the next endpoint may serve.
func permanentWatchError(err error) bool {
	if errors.Is(err, errUnknownEvent) || errors.Is(err, ErrClosed) {
		return true
	}
	if pe, ok := errors.AsType[*PermanentError](err); ok {
		return pe.Problem.EveryEndpoint()
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Unimplemented, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

var errUnknownEvent = fmt.Errorf("%w: watch event of a kind this client does not know (upgrade the client)", ErrProtocol)

// watchOnce runs one stream from addr until it fails. good reports whether
// the stream delivered or validly skipped at least one event.
func (c *Client) watchOnce(ctx context.Context, addr string, w *watchState, fn func(*api.WatchRoutesResponse) error) (good bool, err error) {
	ec, err := c.conn(addr)
	if err != nil {
		return false, err
	}
	if err := c.ready(ctx, ec); err != nil {
		if errors.Is(err, ErrClosed) {
			return false, err
		}
		return false, unreachable(addr, err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sctx, obs := observe(sctx)
	stream, err := api.NewCatalogClient(ec.cc).WatchRoutes(sctx, &api.WatchRoutesRequest{FromVersion: w.delivered, ClusterId: w.clusterID})
	if pe := obs.notGRPC(addr, err); pe != nil {
		return false, pe
	}
	if err != nil {
		return false, err
	}
	w.snap, w.snapRoutes = nil, 0 // a snapshot cut short by the last stream starts over
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			return good, status.Error(codes.Unavailable, "watch stream ended by the server")
		}
		if pe := obs.notGRPC(addr, err); pe != nil {
			return good, pe
		}
		if err != nil {
			return good, err
		}
		ready, err := w.accept(ev)
		if err != nil {
			return good, err
		}
		good = true
		if len(ready) > 0 && ready[0].GetSnapshotPage() != nil && w.clusterID != "" {
			c.mu.Lock()
			c.watchCluster = w.clusterID
			c.mu.Unlock()
		}
		for _, r := range ready {
			if err := fn(r); err != nil {
				return good, callbackError{err}
			}
		}
	}
}

// watchState is what Watch remembers across reconnects. It is owned by the
// Watch goroutine.
type watchState struct {
	delivered uint64 // highest version delivered, or fromVersion
	based     bool   // a base exists: fromVersion > 0 or a snapshot was delivered
	// clusterID is the cluster the delivered catalog came from, learnt from
	// snapshot pages ("" until one arrives).
	clusterID string

	snap       []*api.WatchRoutesResponse // pages of the snapshot being received
	snapRoutes int
}

// accept takes one event off the stream and returns the events to deliver
// now, in order: none (duplicate, stale, or a snapshot page still being
// collected), a delta, or a whole snapshot.
func (w *watchState) accept(ev *api.WatchRoutesResponse) ([]*api.WatchRoutesResponse, error) {
	switch {
	case ev.GetDelta() != nil:
		v := ev.GetDelta().GetVersion()
		if len(w.snap) > 0 {
			return nil, fmt.Errorf("%w: delta (version %d) before the last page of the snapshot at version %d",
				ErrProtocol, v, w.snap[0].GetSnapshotPage().GetVersion())
		}
		if w.based && v <= w.delivered {
			return nil, nil
		}
		if !w.based {
			return nil, fmt.Errorf("%w: delta (version %d) before any snapshot on a watch from version 0", ErrProtocol, v)
		}
		if v != w.delivered+1 {
			return nil, fmt.Errorf("%w: watch skipped versions %d..%d", ErrProtocol, w.delivered+1, v-1)
		}
		w.delivered = v
		return []*api.WatchRoutesResponse{ev}, nil
	case ev.GetSnapshotPage() != nil:
		p := ev.GetSnapshotPage()
		if len(w.snap) > 0 && w.snap[0].GetSnapshotPage().GetVersion() != p.GetVersion() {
			return nil, fmt.Errorf("%w: snapshot page at version %d inside the snapshot at version %d",
				ErrProtocol, p.GetVersion(), w.snap[0].GetSnapshotPage().GetVersion())
		}
		w.snapRoutes += len(p.GetRoutes())
		if w.snapRoutes > maxSnapshotRoutes {
			return nil, fmt.Errorf("%w: snapshot at version %d holds more than %d routes", ErrProtocol, p.GetVersion(), maxSnapshotRoutes)
		}
		w.snap = append(w.snap, ev)
		if !p.GetLast() {
			return nil, nil
		}
		pages := w.snap
		w.snap, w.snapRoutes = nil, 0
		// A snapshot of another cluster id (restored or recovered since)
		// replaces the catalog whatever its version: the new cluster's
		// versions say nothing about the old one's.
		epoch := p.GetClusterId() != "" && w.clusterID != "" && p.GetClusterId() != w.clusterID
		if w.based && p.GetVersion() <= w.delivered && !epoch {
			return nil, nil // a lagging node's older catalog: never go back
		}
		w.delivered, w.based = p.GetVersion(), true
		if p.GetClusterId() != "" {
			w.clusterID = p.GetClusterId()
		}
		return pages, nil
	}
	return nil, errUnknownEvent
}
