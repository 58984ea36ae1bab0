package client

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

type watchStream = grpc.ServerStreamingServer[api.WatchRoutesResponse]

func delta(v uint64) *api.WatchRoutesResponse {
	return &api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_Delta{Delta: &api.CatalogDelta{Version: v}}}
}

func page(v uint64, routes int, last bool) *api.WatchRoutesResponse {
	p := &api.SnapshotPage{Version: v, Last: last}
	for i := range routes {
		p.Routes = append(p.Routes, &api.RouteDescriptor{RouteId: uint64(i + 1)})
	}
	return &api.WatchRoutesResponse{Event: &api.WatchRoutesResponse_SnapshotPage{SnapshotPage: p}}
}

func send(s watchStream, evs ...*api.WatchRoutesResponse) error {
	for _, ev := range evs {
		if err := s.Send(ev); err != nil {
			return err
		}
	}
	return nil
}

// seen is what a Watch callback received, as compact labels: "d7" for the
// delta to version 7, "s5" for a snapshot page at version 5 ("s5!" the last).
type seen []string

func label(ev *api.WatchRoutesResponse) string {
	if d := ev.GetDelta(); d != nil {
		return fmt.Sprintf("d%d", d.GetVersion())
	}
	p := ev.GetSnapshotPage()
	if p.GetLast() {
		return fmt.Sprintf("s%d!", p.GetVersion())
	}
	return fmt.Sprintf("s%d", p.GetVersion())
}

var errStop = errors.New("stop")

// collect runs Watch until fn has seen stopAt, returning what it saw.
func collect(t *testing.T, c *Client, from uint64, stopAt string) (seen, error) {
	t.Helper()
	var got seen
	err := c.Watch(context.Background(), from, func(ev *api.WatchRoutesResponse) error {
		got = append(got, label(ev))
		if label(ev) == stopAt {
			return errStop
		}
		return nil
	})
	return got, err
}

func TestWatchReconnectToLaggingNodeNeverGoesBackwards(t *testing.T) {
	// a is current: a snapshot at 5 in two pages, deltas 6..8, then it
	// fails. b lags and misbehaves: whatever it is asked for, it replays an
	// older snapshot (6) and old deltas (7, 8) before new ones (9, 10).
	var fromB []uint64
	a := startFake(t, &fakeNode{watch: func(_ int, req *api.WatchRoutesRequest, s watchStream) error {
		if req.GetFromVersion() != 0 {
			return status.Errorf(codes.Internal, "a: unexpected from_version %d", req.GetFromVersion())
		}
		if err := send(s, page(5, 2, false), page(5, 1, true), delta(6), delta(7), delta(8)); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "node shutting down")
	}})
	b := startFake(t, &fakeNode{watch: func(_ int, req *api.WatchRoutesRequest, s watchStream) error {
		fromB = append(fromB, req.GetFromVersion())
		if err := send(s, page(6, 3, true), delta(7), delta(8), delta(9), delta(10)); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}})
	c := testClient(t, Config{Endpoints: []string{a.addr, b.addr}})
	got, err := collect(t, c, 0, "d10")
	if !errors.Is(err, errStop) {
		t.Fatalf("Watch = %v, want the callback's errStop", err)
	}
	want := "[s5 s5! d6 d7 d8 d9 d10]"
	if fmt.Sprint(got) != want {
		t.Fatalf("delivered %v, want %s", got, want)
	}
	if fmt.Sprint(fromB) != "[8]" {
		t.Fatalf("reconnect asked b from versions %v, want [8]", fromB)
	}
}

func TestWatchGapMovesToAnotherNode(t *testing.T) {
	a := startFake(t, &fakeNode{watch: func(_ int, _ *api.WatchRoutesRequest, s watchStream) error {
		if err := send(s, page(3, 1, true), delta(5)); err != nil { // 4 is missing
			return err
		}
		<-s.Context().Done()
		return nil
	}})
	b := startFake(t, &fakeNode{watch: func(_ int, req *api.WatchRoutesRequest, s watchStream) error {
		if req.GetFromVersion() != 3 {
			return status.Errorf(codes.Internal, "b: from_version %d, want 3", req.GetFromVersion())
		}
		if err := send(s, delta(4), delta(5)); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}})
	c := testClient(t, Config{Endpoints: []string{a.addr, b.addr}})
	got, err := collect(t, c, 0, "d5")
	if !errors.Is(err, errStop) || fmt.Sprint(got) != "[s3! d4 d5]" {
		t.Fatalf("Watch = %v, delivered %v; want errStop after [s3! d4 d5]", err, got)
	}
}

func TestWatchNeverDeliversHalfASnapshot(t *testing.T) {
	a := startFake(t, &fakeNode{watch: func(_ int, _ *api.WatchRoutesRequest, s watchStream) error {
		if err := send(s, page(5, 2, false)); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "cut")
	}})
	b := startFake(t, &fakeNode{watch: func(_ int, req *api.WatchRoutesRequest, s watchStream) error {
		if err := send(s, page(5, 2, false), page(5, 2, false), page(5, 1, true), delta(6)); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}})
	c := testClient(t, Config{Endpoints: []string{a.addr, b.addr}})
	got, err := collect(t, c, 0, "d6")
	if !errors.Is(err, errStop) || fmt.Sprint(got) != "[s5 s5 s5! d6]" {
		t.Fatalf("Watch = %v, delivered %v; want [s5 s5 s5! d6] (b's pages only)", err, got)
	}
}

func TestWatchFromVersionSkipsOlder(t *testing.T) {
	f := startFake(t, &fakeNode{watch: func(_ int, req *api.WatchRoutesRequest, s watchStream) error {
		if err := send(s, delta(req.GetFromVersion()), delta(req.GetFromVersion()+1)); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	got, err := collect(t, c, 41, "d42")
	if !errors.Is(err, errStop) || fmt.Sprint(got) != "[d42]" {
		t.Fatalf("Watch = %v, delivered %v; want [d42]", err, got)
	}
}

func TestWatchGivesUpAfterBoundedFailures(t *testing.T) {
	dead := deadAddr(t)
	c := testClient(t, Config{Endpoints: []string{dead}, MaxRetries: 2})
	err := c.Watch(context.Background(), 0, func(*api.WatchRoutesResponse) error { return nil })
	var ce *Error
	if !errors.As(err, &ce) || ce.Attempts != 3 || status.Code(err) != codes.Unavailable {
		t.Fatalf("Watch on a dead endpoint = %v, want *Error after 3 attempts", err)
	}
}

func TestWatchUnimplementedIsPermanent(t *testing.T) {
	f := startFake(t, &fakeNode{}) // no hook: Unimplemented
	c := testClient(t, Config{Endpoints: []string{f.addr}, MaxRetries: 5})
	err := c.Watch(context.Background(), 0, func(*api.WatchRoutesResponse) error { return nil })
	if status.Code(err) != codes.Unimplemented || f.called("WatchRoutes") != 1 {
		t.Fatalf("Watch = %v after %d calls, want Unimplemented after 1", err, f.called("WatchRoutes"))
	}
}

func TestWatchEndsWithContext(t *testing.T) {
	f := startFake(t, &fakeNode{watch: func(_ int, _ *api.WatchRoutesRequest, s watchStream) error {
		if err := send(s, page(1, 1, true)); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	ctx, cancel := context.WithCancel(context.Background())
	err := c.Watch(ctx, 0, func(*api.WatchRoutesResponse) error { cancel(); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch = %v, want context.Canceled", err)
	}
}

// TestWatchStateProperty feeds watchState streams from a model cluster in
// which every node replays an arbitrary older prefix of the history before
// continuing, restarts snapshots at any version, and streams break anywhere.
// Whatever arrives, the delivered deltas are consecutive, every delivered
// snapshot is complete and newer than anything delivered, and nothing is
// delivered twice.
func TestWatchStateProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		head := rapid.Uint64Range(1, 40).Draw(t, "head")
		w := &watchState{}
		var delivered uint64
		var based bool
		for stream := range rapid.IntRange(1, 6).Draw(t, "streams") {
			w.snap, w.snapRoutes = nil, 0 // what watchOnce does per stream
			var evs []*api.WatchRoutesResponse
			// The node's view starts somewhere at or below head, possibly
			// behind what the client already has.
			start := rapid.Uint64Range(1, head).Draw(t, fmt.Sprintf("start%d", stream))
			if !based || rapid.Bool().Draw(t, fmt.Sprintf("snap%d", stream)) {
				pages := rapid.IntRange(1, 3).Draw(t, fmt.Sprintf("pages%d", stream))
				for p := range pages {
					evs = append(evs, page(start, 1, p == pages-1))
				}
			} else {
				start = min(start, delivered)
			}
			for v := start + 1; v <= head; v++ {
				evs = append(evs, delta(v))
			}
			cut := rapid.IntRange(0, len(evs)).Draw(t, fmt.Sprintf("cut%d", stream))
			var pending []*api.WatchRoutesResponse
			for _, ev := range evs[:cut] {
				out, err := w.accept(ev)
				if err != nil {
					t.Fatalf("accept(%s) after %d: %v", label(ev), delivered, err)
				}
				pending = append(pending, out...)
			}
			for i, ev := range pending {
				if d := ev.GetDelta(); d != nil {
					if !based || d.GetVersion() != delivered+1 {
						t.Fatalf("delivered delta %d after version %d (based=%v)", d.GetVersion(), delivered, based)
					}
					delivered = d.GetVersion()
					continue
				}
				p := ev.GetSnapshotPage()
				if based && p.GetVersion() <= delivered {
					t.Fatalf("delivered snapshot %d at or below %d", p.GetVersion(), delivered)
				}
				if p.GetLast() {
					delivered, based = p.GetVersion(), true
				} else if i+1 >= len(pending) || pending[i+1].GetSnapshotPage().GetVersion() != p.GetVersion() {
					t.Fatalf("snapshot %d delivered without its last page", p.GetVersion())
				}
			}
			if w.delivered != delivered && based {
				t.Fatalf("watchState.delivered = %d, model %d", w.delivered, delivered)
			}
			// Grow the history a little between streams.
			head += rapid.Uint64Range(0, 3).Draw(t, fmt.Sprintf("grow%d", stream))
		}
	})
}

func TestWatchRoutesRawSkipsDeadEndpoint(t *testing.T) {
	f := startFake(t, &fakeNode{watch: func(_ int, req *api.WatchRoutesRequest, s watchStream) error {
		return send(s, delta(req.GetFromVersion()+1))
	}})
	c := testClient(t, Config{Endpoints: []string{deadAddr(t), f.addr}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.WatchRoutes(ctx, &api.WatchRoutesRequest{FromVersion: 4})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := s.Recv()
	if err != nil || label(ev) != "d5" {
		t.Fatalf("Recv = %v, %v; want d5", ev, err)
	}
}

// A watcher that knows the cluster id of its catalog sends it; a node of
// another id (restored or recovered since) answers with a full snapshot of
// a lower version, which Watch delivers, and a later Watch on the same
// client from a version sends the new id.
func TestWatchResyncsToANewClusterID(t *testing.T) {
	snap := func(v uint64, id string) *api.WatchRoutesResponse {
		ev := page(v, 1, true)
		ev.GetSnapshotPage().ClusterId = id
		return ev
	}
	var sent []string
	f := startFake(t, &fakeNode{watch: func(n int, req *api.WatchRoutesRequest, s watchStream) error {
		sent = append(sent, req.GetClusterId())
		switch n {
		case 1: // the old cluster
			return send(s, snap(7, "old"), delta(8))
		default: // restored from a backup at version 5
			return send(s, snap(5, "new"), delta(6))
		}
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	got, err := collect(t, c, 0, "d8")
	if !errors.Is(err, errStop) || fmt.Sprint(got) != "[s7! d8]" {
		t.Fatalf("old cluster: %v %v", got, err)
	}
	got, err = collect(t, c, 8, "d6")
	if !errors.Is(err, errStop) || fmt.Sprint(got) != "[s5! d6]" {
		t.Fatalf("from version 8 at the restored cluster: %v %v, want its snapshot at 5 then 6", got, err)
	}
	if fmt.Sprint(sent) != "[ old]" {
		t.Fatalf("cluster ids sent %q, want none then the one learnt", sent)
	}
}
