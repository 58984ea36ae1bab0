package fsm

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

const benchRoutes = 1_000_000

var (
	benchOnce  sync.Once
	benchBoot  []byte   // Bootstrap entry with benchRoutes routes
	benchSplit [][]byte // benchSplit[i] = the start of route i+2
)

// benchBootstrap is a Bootstrap entry of benchRoutes routes with keys
// "k000000007", "k000000014", …, built once per process.
func benchBootstrap(b *testing.B) []byte {
	benchOnce.Do(func() {
		benchSplit = make([][]byte, benchRoutes-1)
		for i := range benchSplit {
			benchSplit[i] = fmt.Appendf(nil, "k%09d", (i+1)*7)
		}
		var err error
		benchBoot, err = EncodeCommand(&api.Command{Hlc: hlc.Make(startMs, 0), Body: &api.Command_Bootstrap{Bootstrap: &api.Bootstrap{
			ClusterId: "bench", InitialSplits: benchSplit}}})
		if err != nil {
			panic(err)
		}
	})
	return benchBoot
}

func benchFSM(b *testing.B) *FSM {
	f := newQuiet(Options{})
	if r := applyBytes(f, 1, benchBootstrap(b)); r.Code != api.ResultCode_RESULT_CODE_OK {
		b.Fatalf("bootstrap: %v %s", r.Code, r.Message)
	}
	if f.State().Catalog().Len() != benchRoutes {
		b.Fatalf("%d routes", f.State().Catalog().Len())
	}
	return f
}

// BenchmarkApplyManualSplit: one manual SplitRange entry (decode, fence,
// CAS-free split, history, detector cooldowns, decision, publish) on a
// 1M-route catalog. Route i+2 = [k(i), k(i+1)) is split at k(i)+"3".
func BenchmarkApplyManualSplit(b *testing.B) {
	f := benchFSM(b)
	if b.N > benchRoutes-2 {
		b.Fatalf("b.N %d above the %d routes; lower -benchtime", b.N, benchRoutes-2)
	}
	entries := make([][]byte, b.N)
	for i := range entries {
		key := append(append([]byte(nil), benchSplit[i]...), '3')
		c := split(uint64(i+2), string(key))
		c.Hlc = hlc.Make(startMs+1+uint64(i), 0)
		entries[i], _ = EncodeCommand(c)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r := f.Apply(&raft.Log{Index: uint64(i + 2), Type: raft.LogCommand, Data: entries[i]}).(*Result)
		if r.Code != api.ResultCode_RESULT_CODE_OK {
			b.Fatalf("split %d: %v %s", i, r.Code, r.Message)
		}
	}
}

type discardSink struct{ n int64 }

func (s *discardSink) Write(p []byte) (int, error) { s.n += int64(len(p)); return len(p), nil }
func (s *discardSink) Close() error                { return nil }
func (s *discardSink) Cancel() error               { return nil }
func (s *discardSink) ID() string                  { return "discard" }

// BenchmarkSnapshotPersist: Snapshot (O(1)) + Persist of a 1M-route state;
// SetBytes makes MB/s the snapshot write rate.
func BenchmarkSnapshotPersist(b *testing.B) {
	f := benchFSM(b)
	sink := &discardSink{}
	snap, _ := f.Snapshot()
	if err := snap.Persist(sink); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(sink.n)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		snap, err := f.Snapshot()
		if err != nil {
			b.Fatal(err)
		}
		if err := snap.Persist(&discardSink{}); err != nil {
			b.Fatal(err)
		}
		snap.Release()
	}
}

// BenchmarkRestore: Restore of the same 1M-route snapshot (strict decode
// and every invariant check).
func BenchmarkRestore(b *testing.B) {
	f := benchFSM(b)
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, f.State()); err != nil {
		b.Fatal(err)
	}
	data := buf.Bytes()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := f.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
			b.Fatal(err)
		}
	}
}
