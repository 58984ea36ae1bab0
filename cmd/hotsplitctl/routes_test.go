package main

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/testutil"
)

// splitHLC is 1723456789012.3: 2024-08-12 09:59:49.012 UTC, logical 3.
var splitHLC = hlc.Make(1723456789012, 3)

var longKey = bytes.Repeat([]byte("z"), 100)

func fixtureRoutes() []*api.RouteDescriptor {
	active := api.RouteState_ROUTE_STATE_ACTIVE
	return []*api.RouteDescriptor{
		{RouteId: 1, End: []byte("g"), GroupId: 1, State: active},
		{RouteId: 5, Start: []byte("g"), End: []byte("user:42\x00"), GroupId: 1, State: active, ParentRouteId: 3, SplitAtHlc: splitHLC},
		{RouteId: 6, Start: []byte("user:42\x00"), End: longKey, GroupId: 2, State: api.RouteState_ROUTE_STATE_WRITE_FENCED, ParentRouteId: 3, SplitAtHlc: splitHLC,
			OperatorStart: true},
		{RouteId: 4, Start: longKey, GroupId: 2, State: active},
	}
}

// servePages splits the fixture over two pages at catalog version 9.
func servePages(f *fakeCluster) {
	rs := fixtureRoutes()
	read := &api.ReadInfo{AppliedIndex: 120, CatalogVersion: 9, ServedBy: "n1"}
	f.pages = []*api.ListRoutesResponse{
		{Routes: rs[:2], NextPageToken: []byte{1}, Read: read, RouteCount: 4},
		{Routes: rs[2:], Read: read, RouteCount: 4},
	}
}

func TestRoutesListTable(t *testing.T) {
	f := startCluster(t)
	servePages(f)
	r := ctl(t, f, "routes", "list")
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	want := lines(
		`ROUTE  START                                                             END                                                               GROUP  STATE         FROM  MADE AT                                     PINNED`,
		`1      ""                                                                "g"                                                               1      active        -     -                                           -`,
		`5      "g"                                                               "user:42\x00"                                                     1      active        3     1723456789012.3 (2024-08-12 09:59:49.012Z)  -`,
		`6      "user:42\x00"                                                     "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz..."(100 bytes)  2      write_fenced  3     1723456789012.3 (2024-08-12 09:59:49.012Z)  yes`,
		`4      "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz..."(100 bytes)  +inf                                                              2      active        -     -                                           -`,
		"pinned: an operator placed the route's start (a bootstrap split key or a manual split); automatic merges keep it, `hotsplitctl merge` removes it",
		`catalog version 9, 4 routes (linearizable read by n1, applied index 120)`,
	)
	if r.stdout != want {
		t.Fatalf("routes list:\n%s\nwant:\n%s", r.stdout, want)
	}
	if got := f.last("ListRoutes").(*api.ListRoutesRequest); got.GetConsistency() != api.Consistency_CONSISTENCY_LINEARIZABLE {
		t.Errorf("consistency %v, want linearizable by default", got.GetConsistency())
	}
}

func TestRoutesListJSON(t *testing.T) {
	f := startCluster(t)
	servePages(f)
	r := ctl(t, f, "routes", "list", "-o", "json", "--consistency", "stale")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	var got api.ListRoutesResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("output is not a ListRoutesResponse: %v\n%s", err, r.stdout)
	}
	want := &api.ListRoutesResponse{Routes: fixtureRoutes(), RouteCount: 4,
		Read: &api.ReadInfo{AppliedIndex: 120, CatalogVersion: 9, ServedBy: "n1"}}
	if !proto.Equal(&got, want) {
		t.Fatalf("json decodes to %v, want all four routes in one response %v", &got, want)
	}
	// Multiline, proto field names, every field present (the first
	// route's empty start too), keys in base64.
	if n := strings.Count(r.stdout, "\n"); n < 30 {
		t.Errorf("json output has %d lines, want the multiline form", n)
	}
	compact := compactJSON(t, r.stdout)
	for _, s := range []string{`{"routes":[{"route_id":"1","start":"","end":"Zw==",`, `"split_at_hlc":"112948464124690435"`,
		`"next_page_token":""`, `"start":"dXNlcjo0MgA="`, `"route_count":"4"`} {
		if !strings.Contains(compact, s) {
			t.Errorf("json output lacks %s:\n%s", s, compact)
		}
	}
	if got := f.last("ListRoutes").(*api.ListRoutesRequest); got.GetConsistency() != api.Consistency_CONSISTENCY_STALE {
		t.Errorf("consistency %v, want stale", got.GetConsistency())
	}
}

func TestRoutesGet(t *testing.T) {
	f := startCluster(t)
	f.set("GetRoute", &api.GetRouteResponse{Route: fixtureRoutes()[2], Read: &api.ReadInfo{AppliedIndex: 7, CatalogVersion: 9, ServedBy: "n2", Consistency: api.Consistency_CONSISTENCY_STALE}})
	tests := []struct {
		args    []string
		wantKey []byte
		wantID  uint64
	}{
		{[]string{`user:42\x00`}, []byte("user:42\x00"), 0},
		{[]string{`a\\b\"c\n\101\u00e9`}, []byte("a\\b\"c\nA\u00e9"), 0},
		{[]string{"--hex", "0x757365723a343200"}, []byte("user:42\x00"), 0},
		{[]string{"--hex", "00FF"}, []byte{0, 0xff}, 0},
		{[]string{"--id", "r6"}, nil, 6},
		{[]string{"--id", "6"}, nil, 6},
	}
	for _, tc := range tests {
		r := ctl(t, f, append([]string{"routes", "get", "--consistency", "stale"}, tc.args...)...)
		if r.code != 0 {
			t.Fatalf("routes get %q: exit %d, stderr %q", tc.args, r.code, r.stderr)
		}
		req := f.last("GetRoute").(*api.GetRouteRequest)
		if !bytes.Equal(req.GetKey(), tc.wantKey) || req.GetRouteId() != tc.wantID || req.GetConsistency() != api.Consistency_CONSISTENCY_STALE {
			t.Errorf("routes get %q sent key %q id %d consistency %v, want key %q id %d stale", tc.args, req.GetKey(), req.GetRouteId(), req.GetConsistency(), tc.wantKey, tc.wantID)
		}
	}
	r := ctl(t, f, "routes", "get", "user:42")
	want := lines(
		`ROUTE  START          END                                                               GROUP  STATE         FROM  MADE AT                                     PINNED`,
		`6      "user:42\x00"  "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz..."(100 bytes)  2      write_fenced  3     1723456789012.3 (2024-08-12 09:59:49.012Z)  yes`,
		pinnedNote,
		`catalog version 9 (stale read by n2, applied index 7)`,
	)
	if r.stdout != want {
		t.Fatalf("routes get:\n%s\nwant:\n%s", r.stdout, want)
	}
	r = ctl(t, f, "routes", "get", "user:42", "-o", "json")
	var got api.GetRouteResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || got.GetRoute().GetRouteId() != 6 {
		t.Fatalf("json %q: %v", r.stdout, err)
	}
}

func TestRoutesWatch(t *testing.T) {
	f := startCluster(t)
	snap := &api.SnapshotPage{Version: 8, Routes: fixtureRoutes()[:2], Last: true}
	dl := &api.CatalogDelta{Version: 9, RemovedRouteIds: []uint64{5}, CommitHlc: splitHLC, Added: []*api.RouteDescriptor{
		{RouteId: 9, Start: []byte("g"), End: []byte("m"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE},
		{RouteId: 10, Start: []byte("m"), End: []byte("user:42\x00"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE},
	}}
	merged := &api.CatalogDelta{Version: 10, RemovedRouteIds: []uint64{1, 9}, CommitHlc: splitHLC + 1, Added: []*api.RouteDescriptor{
		{RouteId: 11, End: []byte("m"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE, MergedFromLeft: 1, MergedFromRight: 9, MergedAtHlc: splitHLC + 1},
	}}
	f.watch = []*api.WatchRoutesResponse{
		{Event: &api.WatchRoutesResponse_SnapshotPage{SnapshotPage: snap}},
		{Event: &api.WatchRoutesResponse_Delta{Delta: dl}},
		{Event: &api.WatchRoutesResponse_Delta{Delta: merged}},
	}
	want := lines(
		`v8 snapshot: r1 ["", "g") group 1 active`,
		`v8 snapshot: r5 ["g", "user:42\x00") group 1 active`,
		`v9 split r5 at "m" -> r9 ["g", "m") r10 ["m", "user:42\x00") at 1723456789012.3 (2024-08-12 09:59:49.012Z)`,
		`v10 merge r1 r9 -> r11 ["", "m") at 1723456789012.4 (2024-08-12 09:59:49.012Z)`,
	)
	r := watchUntil(t, f, 4, "routes", "watch")
	if r.code != 0 || r.stdout != want {
		t.Fatalf("routes watch: exit %d stderr %q\n%s\nwant:\n%s", r.code, r.stderr, r.stdout, want)
	}
	if from := f.last("WatchRoutes").(*api.WatchRoutesRequest).GetFromVersion(); from != 0 {
		t.Errorf("from_version %d, want 0", from)
	}

	r = watchUntil(t, f, 3, "routes", "watch", "-o", "json", "--from-version", "7")
	out := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if r.code != 0 || len(out) != 3 {
		t.Fatalf("json watch: exit %d, %d lines:\n%s", r.code, len(out), r.stdout)
	}
	for i, line := range out {
		var ev api.WatchRoutesResponse
		if err := protojson.Unmarshal([]byte(line), &ev); err != nil || !proto.Equal(&ev, f.watch[i]) {
			t.Errorf("line %d %q: %v, want event %v", i, line, err, f.watch[i])
		}
	}
	if from := f.last("WatchRoutes").(*api.WatchRoutesRequest).GetFromVersion(); from != 7 {
		t.Errorf("from_version %d, want 7", from)
	}
}

// watchUntil runs a watch until it printed n lines, then interrupts it.
func watchUntil(t *testing.T, f *fakeCluster, n int, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"--endpoints", f.addr}, args...), testEnv, &out, &errOut)
	}()
	testutil.WaitFor(t, 5*time.Second, "watch output", func() bool { return strings.Count(out.String(), "\n") >= n })
	cancel()
	code := <-done
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

func TestReadErrors(t *testing.T) {
	f := startCluster(t)
	f.fail("GetRoute", status.Error(codes.InvalidArgument, "key: 5000 bytes, at most 4097"))
	r := ctl(t, f, "routes", "get", "k")
	if r.code != exitRefused || r.stdout != "" {
		t.Fatalf("exit %d stdout %q, want %d", r.code, r.stdout, exitRefused)
	}
	want := `hotsplitctl: routes get route of "k": InvalidArgument from ` + f.addr + ": key: 5000 bytes, at most 4097\n"
	if r.stderr != want {
		t.Fatalf("stderr %q, want %q", r.stderr, want)
	}
	f.fail("GetRoute", status.Error(codes.Unavailable, "no leader\nyet"))
	r = ctl(t, f, "routes", "get", "k", "--timeout", "1s")
	if r.code != exitUnavailable || strings.Count(r.stderr, "\n") != 1 || !regexp.MustCompile(`Unavailable from `+regexp.QuoteMeta(f.addr)+`: no leader yet \(\d+ attempts\)`).MatchString(r.stderr) {
		t.Fatalf("exit %d stderr %q, want %d and one line naming the attempts", r.code, r.stderr, exitUnavailable)
	}
}

// compactJSON removes the whitespace protojson varies on purpose.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
	return b.String()
}
