package client

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// pagedCatalog serves a catalog one route per page; version() decides the
// version each page reports.
type pagedCatalog struct {
	mu      sync.Mutex
	routes  map[uint64][]*api.RouteDescriptor // by version
	version func(call int, page int) uint64
	calls   int
	firsts  int // first-page requests: one per (re)start
}

func (p *pagedCatalog) list(_ int, req *api.ListRoutesRequest) (*api.ListRoutesResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	idx := 0
	if len(req.GetPageToken()) > 0 {
		idx, _ = strconv.Atoi(string(req.GetPageToken()))
	} else {
		p.firsts++
	}
	v := p.version(p.calls, idx)
	rs := p.routes[v]
	resp := &api.ListRoutesResponse{
		Routes:     rs[idx : idx+1],
		Read:       &api.ReadInfo{CatalogVersion: v, ServedBy: "n1"},
		RouteCount: uint64(len(rs)),
	}
	if idx+1 < len(rs) {
		resp.NextPageToken = []byte(strconv.Itoa(idx + 1))
	}
	return resp, nil
}

func catalogAt(keys ...string) []*api.RouteDescriptor {
	var rs []*api.RouteDescriptor
	start := ""
	for i, k := range append(keys, "") {
		rs = append(rs, &api.RouteDescriptor{RouteId: uint64(i + 1), Start: []byte(start), End: []byte(k)})
		start = k
	}
	return rs
}

func TestListAllRoutesRestartsOnVersionChange(t *testing.T) {
	pc := &pagedCatalog{
		routes: map[uint64][]*api.RouteDescriptor{
			1: catalogAt("g", "p"),
			2: catalogAt("g", "m", "p"),
		},
		// The first listing sees version 1 on page 0 and version 2 from
		// page 1 on (a split committed in between).
		version: func(call, page int) uint64 {
			if call == 1 {
				return 1
			}
			return 2
		},
	}
	f := startFake(t, &fakeNode{list: pc.list})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	resp, err := c.ListAllRoutes(context.Background(), api.Consistency_CONSISTENCY_LINEARIZABLE)
	if err != nil {
		t.Fatal(err)
	}
	if pc.firsts != 2 {
		t.Fatalf("listing started %d times, want 2 (one restart)", pc.firsts)
	}
	if v := resp.GetRead().GetCatalogVersion(); v != 2 {
		t.Fatalf("result at version %d, want 2", v)
	}
	var ends []string
	for _, r := range resp.GetRoutes() {
		ends = append(ends, string(r.GetEnd()))
	}
	if fmt.Sprint(ends) != "[g m p ]" || resp.GetRouteCount() != 4 || len(resp.GetNextPageToken()) != 0 {
		t.Fatalf("routes ends %q count %d token %q, want the 4 routes of version 2", ends, resp.GetRouteCount(), resp.GetNextPageToken())
	}
}

func TestListAllRoutesGivesUpWhenAlwaysChanging(t *testing.T) {
	pc := &pagedCatalog{
		routes: map[uint64][]*api.RouteDescriptor{},
		version: func(call, page int) uint64 {
			return uint64(call) // every page at a new version
		},
	}
	for v := uint64(1); v <= 2*maxListRestarts+2; v++ {
		pc.routes[v] = catalogAt("a", "b")
	}
	f := startFake(t, &fakeNode{list: pc.list})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	_, err := c.ListAllRoutes(context.Background(), api.Consistency_CONSISTENCY_STALE)
	if !errors.Is(err, ErrCatalogChanging) {
		t.Fatalf("err = %v, want ErrCatalogChanging", err)
	}
	if pc.firsts != maxListRestarts || pc.calls != 2*maxListRestarts {
		t.Fatalf("%d listings, %d calls; want %d listings of 2 pages", pc.firsts, pc.calls, maxListRestarts)
	}
}

func TestListAllRoutesRejectsInconsistentPages(t *testing.T) {
	f := startFake(t, &fakeNode{list: func(int, *api.ListRoutesRequest) (*api.ListRoutesResponse, error) {
		return &api.ListRoutesResponse{Routes: catalogAt("m"), RouteCount: 3, Read: &api.ReadInfo{CatalogVersion: 4}}, nil
	}})
	c := testClient(t, Config{Endpoints: []string{f.addr}})
	_, err := c.ListAllRoutes(context.Background(), api.Consistency_CONSISTENCY_LINEARIZABLE)
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("err = %v, want ErrProtocol (2 routes, route_count 3)", err)
	}
	f2 := startFake(t, &fakeNode{list: func(int, *api.ListRoutesRequest) (*api.ListRoutesResponse, error) {
		return &api.ListRoutesResponse{NextPageToken: []byte("again"), Read: &api.ReadInfo{CatalogVersion: 4}}, nil
	}})
	c2 := testClient(t, Config{Endpoints: []string{f2.addr}})
	if _, err := c2.ListAllRoutes(context.Background(), api.Consistency_CONSISTENCY_LINEARIZABLE); !errors.Is(err, ErrProtocol) {
		t.Fatalf("empty page with a next token: err = %v, want ErrProtocol", err)
	}
}
