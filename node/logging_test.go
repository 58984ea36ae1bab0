package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/hotsplit/hotsplit/hlc"
)

// Raft's levels become slog's, so --logLevel warn shows raft's warnings
// and errors and hides its info lines.
func TestRaftLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	l := newRaftLogger(NewLogger(&buf, slog.LevelWarn, false))
	l.Info("entering follower state")
	l.Warn("heartbeat timeout reached")
	l.Error("failed to appendEntries to", "peer", raft.Server{ID: "n2", Address: "127.0.0.1:1"}, "error", errors.New("connection refused"), "backoff time", 10*time.Millisecond)
	l.Error("peer has newer term, stopping replication", "peer", raft.Server{ID: "n3", Address: "127.0.0.1:2"})
	out := buf.String()
	if strings.Contains(out, "entering follower state") {
		t.Errorf("an info line passed a warn logger:\n%s", out)
	}
	for _, want := range []string{
		`level=WARN msg="raft: heartbeat timeout reached"`,
		`level=ERROR msg="raft: failed to appendEntries to" peer=n2 error="connection refused" backoff_time=10ms`,
		`level=WARN msg="raft: peer has newer term, stopping replication" peer=n3`, // a deposed leader: routine
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
	l := newRaftLogger(NewLogger(&buf, slog.LevelInfo, false))
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

// Keys ending in _hlc print as physical.logical, wherever they come from.
func TestLoggerFormatsHLCs(t *testing.T) {
	var buf bytes.Buffer
	log := NewLogger(&buf, slog.LevelInfo, false)
	ts := hlc.Make(1_800_000_000_123, 7)
	log.Info("x", "commit_hlc", ts, "at_hlc", int64(ts), "catalog_version", uint64(ts))
	out := buf.String()
	if !strings.Contains(out, "commit_hlc=1800000000123.7 at_hlc=1800000000123.7 ") {
		t.Fatalf("got %s", out)
	}
	if strings.Contains(out, "catalog_version=1800000000123.7") {
		t.Fatalf("a non-HLC key was rewritten: %s", out)
	}
}

// Once sealed, no logger derived from a node's (its attrs, groups, raft's
// adapter) writes another line; the halt line goes through the base
// handler and is the last one.
func TestSealedLogWritesNothingMore(t *testing.T) {
	var buf syncBuffer
	base := NewLogger(&buf, slog.LevelInfo, false)
	gate := &logGate{}
	log := slog.New(lastWord{base.Handler(), gate}).With("node_id", "n1")
	grouped := log.WithGroup("g")
	raftLog := newRaftLogger(log)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // a goroutine that logs all along, as raft does
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			raftLog.Info("heartbeat", "i", i)
		}
	}()
	log.Info("before")
	grouped.Info("before", "k", 1)
	gate.seal()
	base.Error("stopping: the reason", "node_id", "n1", "reason", "halt")
	log.Info("after")
	grouped.Info("after", "k", 2)
	raftLog.Warn("after")
	close(stop)
	<-done
	lines := strings.Split(strings.TrimRight(buf.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "level=ERROR") || !strings.Contains(last, "the reason") {
		t.Fatalf("last line %q is not the halt line", last)
	}
	for _, want := range []string{`msg=before node_id=n1`, `msg=before node_id=n1 g.k=1`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("output lacks %q before the seal:\n%s", want, buf.String()[:min(len(buf.String()), 2000)])
		}
	}
	if strings.Contains(buf.String(), "msg=after") {
		t.Errorf("a line was written after the seal")
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
