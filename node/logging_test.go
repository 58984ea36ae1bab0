package node

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hotsplit/hotsplit/hlc"
	"github.com/hotsplit/hotsplit/internal/testutil"
	"github.com/hotsplit/hotsplit/node/raftobs"
)

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
	var buf testutil.LogBuffer
	base := NewLogger(&buf, slog.LevelInfo, false)
	gate := &logGate{}
	log := slog.New(lastWord{base.Handler(), gate}).With("node_id", "n1")
	grouped := log.WithGroup("g")
	raftLog := raftobs.NewLogger(log)
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
