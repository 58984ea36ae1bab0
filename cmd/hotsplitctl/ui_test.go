package main

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

func TestUIPrintsTheLoginURL(t *testing.T) {
	f := startCluster(t)
	const url = "https://127.0.0.1:7002/login?code=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	f.set("MintUILogin", &api.MintUILoginResponse{Url: url, ExpiresMs: 1_700_000_060_000, NodeId: "n2"})
	r := ctl(t, f, "ui")
	if r.code != 0 || r.stdout != url+"\n" || !strings.Contains(r.stderr, "node n2's page") {
		t.Fatalf("ui: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	r = ctl(t, f, "ui", "-o", "json")
	var got api.MintUILoginResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || got.GetUrl() != url {
		t.Fatalf("json %q: %v", r.stdout, err)
	}
	// An insecure node's answer has no expiry: the URL alone.
	f.set("MintUILogin", &api.MintUILoginResponse{Url: "http://127.0.0.1:7002/", NodeId: "n1"})
	if r := ctl(t, f, "ui"); r.code != 0 || r.stdout != "http://127.0.0.1:7002/\n" || r.stderr != "" {
		t.Fatalf("insecure ui: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	f.fail("MintUILogin", status.Error(codes.PermissionDenied, `identity "dn1" (roles reporter) may not call /hotsplit.v1.Cluster/MintUILogin: it needs role reader`))
	if r := ctl(t, f, "ui"); r.code != 1 || !strings.Contains(r.stderr, "needs role reader") {
		t.Fatalf("refused ui: exit %d stderr %q", r.code, r.stderr)
	}
}
