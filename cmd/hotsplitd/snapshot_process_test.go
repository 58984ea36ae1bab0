package main

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
)

// TestIntegrationProcessRefusesBrokenSnapshot: a CRC-valid snapshot whose
// catalog has a gap, and no older one: hotsplitd exits non-zero and says why
// in its last line.
func TestIntegrationProcessRefusesBrokenSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: runs hotsplitd")
	}
	hotsplitd, hotsplitctl := binaries(t)
	dir := filepath.Join(t.TempDir(), "n1")
	store, err := raft.NewFileSnapshotStore(dir, 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, trans := raft.NewInmemTransport("")
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:1"}}}
	sink, err := store.Create(raft.SnapshotVersionMax, 10, 2, conf, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	broken := &api.StateSnapshot{
		ClusterId: "c1", ClusterVersion: 1, Config: fsm.DefaultConfig(), NextOpId: 1, NextDecisionSeq: 1, NextRequestSeq: 1,
		Switch: &api.AutoSplitSwitch{Source: api.SwitchSource_SWITCH_SOURCE_BOOTSTRAP_FLAG},
		Catalog: &api.CatalogSnapshot{Version: 2, NextRouteId: 4, Routes: []*api.RouteDescriptor{
			{RouteId: 2, End: []byte("b"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE},
			{RouteId: 3, Start: []byte("c"), GroupId: 1, State: api.RouteState_ROUTE_STATE_ACTIVE}, // gap [b, c)
		}},
	}
	if err := fsm.WriteSnapshot(sink, 10, broken); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}

	certs := makeCerts(t, hotsplitctl, filepath.Join(t.TempDir(), "certs"), "n1")
	cmd := exec.Command(hotsplitd, append([]string{"--id", "n1", "--dataDir", dir, "--raftAddr", freePort(t), "--grpcAddr", freePort(t), "--httpAddr", ""}, certs.nodeArgs("n1")...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("hotsplitd kept running on a broken snapshot")
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("exit: %v, want a non-zero status", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "level=ERROR") || !strings.Contains(last, "invariant") || !strings.Contains(last, "gap") {
		t.Fatalf("last line does not say why: %q", last)
	}
	t.Logf("exit %d: %s", exit.ExitCode(), last)
}
