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

// BenchmarkApplyManualSplit: one manual SplitRange entry (strict decode,
// fence, split, history, children's cooldowns, decision, publish) on a
// 1M-route catalog. Every iteration applies to the same base state (the
// catalog benchmarks do the same), so the figure does not drift with the
// detector state earlier iterations leave behind; the sub-benchmarks set
// how many routes the detector already tracks (each manual split adds two
// cooldown entries).
func BenchmarkApplyManualSplit(b *testing.B) {
	for _, prior := range []int{0, 1000} {
		b.Run(fmt.Sprintf("tracked=%d", 2*prior), func(b *testing.B) {
			f := benchFSM(b)
			for i := range prior {
				key := append(append([]byte(nil), benchSplit[benchRoutes-3-i]...), '3')
				c := split(uint64(benchRoutes-1-i), string(key))
				c.Hlc = hlc.Make(startMs+1+uint64(i), 0)
				data, _ := EncodeCommand(c)
				if r := applyBytes(f, uint64(i+2), data); r.Code != api.ResultCode_RESULT_CODE_OK {
					b.Fatalf("prior split %d: %v %s", i, r.Code, r.Message)
				}
			}
			base := f.State()
			const distinct = 1024 // entries cycled through; all apply to base
			entries := make([][]byte, distinct)
			for i := range entries {
				key := append(append([]byte(nil), benchSplit[i]...), '3')
				c := split(uint64(i+2), string(key))
				c.Hlc = hlc.Make(startMs+uint64(prior)+1, 0)
				entries[i], _ = EncodeCommand(c)
			}
			log := &raft.Log{Index: base.index + 1, Type: raft.LogCommand}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				f.cur.Store(&published{s: base, next: make(chan struct{})}) // one small alloc of the reset
				log.Data = entries[i%distinct]
				if r := f.Apply(log).(*Result); r.Code != api.ResultCode_RESULT_CODE_OK {
					b.Fatalf("split %d: %v %s", i, r.Code, r.Message)
				}
			}
		})
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
