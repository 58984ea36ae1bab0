package cluster

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// sleeper is a Node whose process is `sleep 30`: enough to exercise the
// process control without a hotsplitd binary.
func sleeper(t *testing.T, id string) *Node {
	t.Helper()
	dir := t.TempDir()
	n := &Node{ID: id, bin: "sleep", args: []string{"30"}, LogPath: filepath.Join(dir, id+".log"), http: &http.Client{Timeout: 2 * time.Second}}
	t.Cleanup(func() { n.Stop(5 * time.Second) })
	return n
}

func TestProcessControl(t *testing.T) {
	n := sleeper(t, "n1")
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err == nil {
		t.Fatal("a second Start of a running node succeeded")
	}
	if !n.Running() || n.Pid() == 0 {
		t.Fatal("not running after Start")
	}
	if err := n.Pause(); err != nil || !n.Paused() {
		t.Fatalf("Pause: %v, paused %v", err, n.Paused())
	}
	if err := n.Resume(); err != nil || n.Paused() {
		t.Fatalf("Resume: %v, paused %v", err, n.Paused())
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Fatal("running after Kill")
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := n.Stop(5 * time.Second); err != nil { // a paused node is resumed, then stopped
		t.Fatal(err)
	}
	exits := n.Exits()
	if len(exits) != 2 || exits[0].Status != -int(syscall.SIGKILL) || exits[1].Status != -int(syscall.SIGTERM) {
		t.Fatalf("exits %+v", exits)
	}
}

func TestPartitionCutsBothSides(t *testing.T) {
	var mu sync.Mutex
	cuts := map[string][]string{}
	c := &Cluster{}
	for _, id := range []string{"n1", "n2", "n3"} {
		n := sleeper(t, id)
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				Cut []string `json:"cut"`
			}
			json.NewDecoder(r.Body).Decode(&body)
			mu.Lock()
			cuts[id] = body.Cut
			mu.Unlock()
		}))
		t.Cleanup(srv.Close)
		n.HTTPAddr = srv.Listener.Addr().String()
		n.http = srv.Client() // the seam is https
		n.RaftAddr, n.GRPCAddr = id+"-raft", id+"-grpc"
		if err := n.Start(); err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, n)
	}
	ctx := context.Background()
	if err := c.Partition(ctx, c.Nodes[:1], c.Nodes[1:]); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"n1": {"n2-raft", "n2-grpc", "n3-raft", "n3-grpc"}, "n2": {"n1-raft", "n1-grpc"}, "n3": {"n1-raft", "n1-grpc"}}
	for id, w := range want {
		if !slices.Equal(cuts[id], w) {
			t.Errorf("%s cut %v, want %v", id, cuts[id], w)
		}
	}
	if err := c.Heal(ctx); err != nil {
		t.Fatal(err)
	}
	for id, got := range cuts {
		if len(got) != 0 {
			t.Errorf("%s still cuts %v after Heal", id, got)
		}
	}
}

func TestFreePortsAreDistinctLoopbackAddresses(t *testing.T) {
	ports, err := freePorts(9)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, p := range ports {
		if seen[p] || p[:10] != "127.0.0.1:" {
			t.Fatalf("ports %v", ports)
		}
		seen[p] = true
	}
}
