package node

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hotsplit/hotsplit/node/storage"
)

// A restore reads the node's own clock source (Config.Clock, the one its
// HLC issues from), not the machine's: with a clock a century ahead, the
// recovery mark carries that clock's time and the seeded HLC starts above
// it by the clock offset and the fence window.
func TestRestoreReadsTheNodeClock(t *testing.T) {
	base := time.Now().AddDate(100, 0, 0).UnixMilli()
	t0 := time.Now()
	clock := func() int64 { return base + time.Since(t0).Milliseconds() }
	dir := filepath.Join(t.TempDir(), "r1")
	cfg := Config{ID: "r1", DataDir: dir, Insecure: true, RaftListener: listen(t), GRPCListener: listen(t), Logger: quietLogger(), Clock: clock,
		Recovery: Recovery{RestoreSnapshot: filepath.Join("..", "backupfile", "testdata", "format1.hsnap")}}
	fastTiming(&cfg)
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close(ctxT(t, 10*time.Second))
	end := clock()
	m, err := storage.ReadRecoveryMark(dir)
	if err != nil || m == nil {
		t.Fatalf("recovery mark %v, %v", m, err)
	}
	if at := m.At.UnixMilli(); at < base || at > end {
		t.Errorf("recovery mark at %v, want the node clock's %v..%v", m.At.UTC(), time.UnixMilli(base).UTC(), time.UnixMilli(end).UTC())
	}
	floor := uint64(base + (DefaultMaxClockOffset + cfg.CeilingWindow).Milliseconds())
	if got := n.FSM().State().CeilingMs(); got < floor {
		t.Errorf("seeded ceiling %d ms, want at least the node clock %d + offset + window = %d", got, base, floor)
	}
}
