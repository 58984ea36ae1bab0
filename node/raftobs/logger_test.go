package raftobs

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// Raft's levels become slog's, so --logLevel warn shows raft's warnings
// and errors and hides its info lines.
func TestRaftLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn})))
	l.Info("entering follower state")
	l.Warn("heartbeat timeout reached")
	l.Error("failed to appendEntries to", "peer", raft.Server{ID: "n2", Address: "127.0.0.1:1"}, "error", errors.New("connection refused"), "backoff time", 10*time.Millisecond)
	l.Error("peer has newer term, stopping replication", "peer", raft.Server{ID: "n3", Address: "127.0.0.1:2"})
	l.Warn("failed to contact", "server-id", raft.ServerID("n4"), "time", 103*time.Millisecond)
	out := buf.String()
	if strings.Contains(out, "entering follower state") {
		t.Errorf("an info line passed a warn logger:\n%s", out)
	}
	for _, want := range []string{
		`level=WARN msg="raft: heartbeat timeout reached"`,
		`level=ERROR msg="raft: failed to appendEntries to" peer=n2 error="connection refused" backoff_time=10ms`,
		`level=WARN msg="raft: peer has newer term, stopping replication" peer=n3`, // a deposed leader: routine
		`level=WARN msg="raft: failed to contact" server_id=n4 raft_time=103ms`,    // not a second time=
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if !l.IsWarn() || l.IsInfo() || l.GetLevel() != hclog.Warn {
		t.Errorf("IsWarn %v IsInfo %v GetLevel %v", l.IsWarn(), l.IsInfo(), l.GetLevel())
	}
}

// A warning about one peer repeats at every heartbeat while the peer is
// down: one line per interval and peer, then one saying how many were
// suppressed.
func TestRaftLoggerRateLimitsPerPeer(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	now := time.Unix(1_800_000_000, 0)
	l.now = func() time.Time { return now }
	for range 120 {
		l.Error("failed to heartbeat to", "peer", "127.0.0.1:7010")
		l.Error("failed to heartbeat to", "peer", "127.0.0.1:7020")
		l.Info("pipelining replication", "peer", "n2") // info lines are not limited
		now = now.Add(100 * time.Millisecond)          // 12 s in all
	}
	out := buf.String()
	if n := strings.Count(out, `peer=127.0.0.1:7010`); n != 2 {
		t.Errorf("%d lines about one peer in 12 s, want 2 (one per %v):\n%s", n, raftLogInterval, out)
	}
	if n := strings.Count(out, `peer=127.0.0.1:7020`); n != 2 {
		t.Errorf("%d lines about the other peer, want 2", n)
	}
	if !strings.Contains(out, "suppressed=99") {
		t.Errorf("the second line does not say 99 were suppressed:\n%s", out)
	}
	if n := strings.Count(out, "pipelining replication"); n != 120 {
		t.Errorf("%d info lines, want all 120", n)
	}
}

// hclog's deferred formats are expanded: raft's "initial configuration"
// line names its servers instead of printing an unexpanded verb.
func TestRaftLoggerExpandsFormats(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(slog.New(slog.NewTextHandler(&buf, nil)))
	l.Info("initial configuration", "index", 1, "servers", hclog.Fmt("%+v", []raft.Server{
		{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7000"}, {Suffrage: raft.Nonvoter, ID: "n2", Address: "127.0.0.1:7010"}}))
	l.Info("formats", "n", hclog.Fmt("%d entries", 3), "none", hclog.Format{})
	out := buf.String()
	for _, want := range []string{`servers="n1=127.0.0.1:7000(voter) n2=127.0.0.1:7010(nonvoter)"`, `n="3 entries"`, `none=""`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "%") {
		t.Errorf("an unexpanded verb:\n%s", out)
	}
}
