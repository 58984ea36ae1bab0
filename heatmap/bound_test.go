package heatmap

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/hlc"
)

// memoryBound is the bound docs/design.md promises for the history.
const memoryBound = 64 << 20

// retained measures the heap that build's result keeps alive.
func retained(build func() *History) (*History, int64) {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	h := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return h, int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestMemoryBoundWorstCase fills every level with columns of MaxBands
// bands whose boundaries all differ from the column before (so no layout
// is shared and merging keeps nearly every boundary), with boundaries of
// MaxBoundaryLen bytes and MaxMarks marks of the longest kept keys: the
// most memory the structure can hold short of a catalog that changes
// thousands of boundaries per column. Size and the measured heap both stay
// under the bound.
func TestMemoryBoundWorstCase(t *testing.T) {
	pool := make([]string, 2*MaxBands)
	for i := range pool {
		pool[i] = fmt.Sprintf("%0*d", MaxBoundaryLen, i*2)
	}
	h, heap := retained(func() *History {
		h := New()
		for c := range 15*LevelColumns + 8 { // full again after 8 evictions
			bounds := make([]string, 0, MaxBands-1)
			for i := range MaxBands - 1 {
				// One boundary moves every column: no two columns share a
				// layout, and each merge keeps all but one boundary.
				b := pool[2*i]
				if i == c%(MaxBands-1) {
					b = fmt.Sprintf("%0*d", MaxBoundaryLen, 4*i+1)
				}
				bounds = append(bounds, b)
			}
			lay := &layout{bounds: bounds}
			vals := make([]uint64, metrics*lay.bands())
			for j := range vals {
				vals[j] = uint64(j)
			}
			h.push(&column{startMs: uint64(c) * 1000, endMs: uint64(c+1) * 1000, coveredMs: 1000, lay: lay, vals: vals})
		}
		long := make([]byte, MaxBoundaryLen+1000)
		for i := range MaxMarks {
			var err error
			if h, err = h.AddMark(Mark{AtHLC: hlc.Make(3_000_000+uint64(i), 0), Kind: splitKind,
				Keys: [][]byte{long, append(long, 0)}}); err != nil {
				t.Fatal(err)
			}
		}
		return h
	})
	if h.Columns() != MaxColumns {
		t.Fatalf("%d columns, want the full %d", h.Columns(), MaxColumns)
	}
	size := h.Size()
	t.Logf("worst case: Size %.1f MiB, heap %.1f MiB", mib(size), mib(heap))
	if size > memoryBound || heap > memoryBound {
		t.Fatalf("Size %d, heap %d: above %d", size, heap, memoryBound)
	}
	// Size errs high, never low (it rounds every allocation up).
	if heap > size+size/20 {
		t.Fatalf("Size %d undercounts the heap %d", size, heap)
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

// TestMemoryBound10kRoutes builds the two histories the bound is stated
// for — 10,000 loaded routes for 24 h at the 60 s step and for 1 h at the
// 1 s step of --dev — through AddColumn, and records their size, snapshot
// size and restore time (docs/design.md quotes them). Too slow for -short
// under the race detector; TestMemoryBoundWorstCase covers the structure
// there.
func TestMemoryBound10kRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 5,000 columns of 10,000 routes")
	}
	for _, tc := range []struct {
		name           string
		stepMs, spanMs uint64
	}{
		{"24h@60s", 60_000, 24 * 3_600_000},
		{"1h@1s", 1000, 3_600_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var addTime time.Duration
			h, heap := retained(func() *History {
				w := newWorkload(t, 10_000, 3)
				start := time.Now()
				h := w.build(t, New(), 1_700_000_000_000, tc.stepMs, tc.spanMs)
				addTime = time.Since(start)
				return h
			})
			size := h.Size()
			start := time.Now()
			p := h.ToProto()
			b, err := proto.MarshalOptions{Deterministic: true}.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			encode := time.Since(start)
			start = time.Now()
			var back api.HeatmapHistory
			if err := api.UnmarshalStrict(b, &back); err != nil {
				t.Fatal(err)
			}
			restored, err := FromProto(&back)
			if err != nil {
				t.Fatal(err)
			}
			restore := time.Since(start)
			if !proto.Equal(restored.ToProto(), p) {
				t.Fatal("the restored history differs")
			}
			t.Logf("%s: %d columns (%d layouts), Size %.1f MiB, heap %.1f MiB, snapshot %.1f MiB, encode %v, restore %v, %v per AddColumn with its workload",
				tc.name, h.Columns(), layouts(h), mib(size), mib(heap), mib(int64(len(b))), encode.Round(time.Millisecond), restore.Round(time.Millisecond),
				(addTime / time.Duration(tc.spanMs/tc.stepMs)).Round(time.Microsecond))
			if size > memoryBound || heap > memoryBound {
				t.Fatalf("Size %d, heap %d: above %d", size, heap, memoryBound)
			}
		})
	}
}

func layouts(h *History) int {
	seen := map[*layout]bool{}
	h.ascend(func(c *column, _ int) { seen[c.lay] = true })
	return len(seen)
}
