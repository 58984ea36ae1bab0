package columns

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"syscall"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/detector"
	"github.com/hotsplit/hotsplit/internal/loadgen"
)

const (
	benchRoutes    = 10_000
	benchReporters = 50
	benchTopKeys   = 8
)

// benchSplits are the initial split keys of a catalog of n routes.
func benchSplits(n int) [][]byte {
	out := make([][]byte, 0, n-1)
	for i := 1; i < n; i++ {
		out = append(out, fmt.Appendf(nil, "k%06d", i))
	}
	return out
}

// benchColumn is one reporter's column with a row for every route: 16
// buckets and a full 8-entry sketch each. One route in 100 is hot across
// 50 reporters; the others score about a tenth of the threshold.
func benchColumn(w uint64, reporter int) *api.ReportColumn {
	c := reportCol(w)
	c.Rows = make([]*api.ReportRow, 0, benchRoutes)
	for id := uint64(1); id <= benchRoutes; id++ {
		r := &api.ReportRow{RouteId: id, Reads: 1 + id%3, ReadBytes: 300, WriteBytes: 100, SampleRate: 16, Buckets: make([]uint64, 16)}
		if id%100 == 0 {
			r.Writes = 50
		}
		r.Buckets[id%16] = r.Reads + 4*r.Writes
		for k := range benchTopKeys {
			r.TopKeys = append(r.TopKeys, &api.TopKeyCount{Key: fmt.Appendf(nil, "k%06d-%d-%d", id, reporter%4, k), Count: uint64(10 - k), Error: 1})
		}
		c.Rows = append(c.Rows, r)
	}
	return c
}

// BenchmarkValidateReport validates one reporter's 10k-row column.
func BenchmarkValidateReport(b *testing.B) {
	c, err := catalog.New(benchSplits(benchRoutes), 7)
	if err != nil {
		b.Fatal(err)
	}
	req := &api.ReportRequest{ReporterId: "r0", Columns: []*api.ReportColumn{benchColumn(100_000, 0)}}
	cfg := testConfig()
	w := wireOf(b, req)
	b.SetBytes(int64(w.size))
	b.ReportAllocs()
	for b.Loop() {
		if _, rej := validateReport(w, c, cfg, 101_000, new(rowScratch)); rej != nil {
			b.Fatal(rej.msg)
		}
	}
}

// BenchmarkMergeReport merges one reporter's 10k-row column into a window
// that already holds another reporter's.
func BenchmarkMergeReport(b *testing.B) {
	c, err := catalog.New(benchSplits(benchRoutes), 7)
	if err != nil {
		b.Fatal(err)
	}
	first, next := benchColumn(100_000, 0), benchColumn(100_000, 1)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		s := newColumnSum(100_000, testStep)
		s.add("r0", first, c)
		b.StartTimer()
		s.add("r1", next, c)
	}
}

// BenchmarkAssembleEntry builds the ObserveColumn of a window holding 50
// reporters' 10k-row columns.
func BenchmarkAssembleEntry(b *testing.B) {
	c, err := catalog.New(benchSplits(benchRoutes), 7)
	if err != nil {
		b.Fatal(err)
	}
	s := newColumnSum(100_000, testStep)
	for r := range benchReporters {
		s.add(fmt.Sprint("r", r), benchColumn(100_000, r), c)
	}
	b.ReportAllocs()
	var e *api.ObserveColumn
	for b.Loop() {
		e, _ = s.entry(c, detector.DefaultConfig(), DefaultBelowThresholdRows, 1, nil)
	}
	b.ReportMetric(float64(proto.Size(e)), "entry-bytes")
	b.ReportMetric(float64(len(e.GetRows())), "entry-rows")
}

// BenchmarkAggregatorColumn50x10k is one window end to end, in process:
// 50 reporters each send a 10k-row column through Report (validate and
// merge), the column commits through a real FSM, and every report is
// answered. ns/op is the leader's work per column; the 1 s step budget is
// far above it. The gRPC hop is not included (see the node benchmarks).
func BenchmarkAggregatorColumn50x10k(b *testing.B) {
	h := newAggHarnessSplits(b, 0, benchSplits(benchRoutes))
	cols := make([]*api.ReportColumn, benchReporters)
	for r := range cols {
		cols[r] = benchColumn(0, r)
	}
	h.begin()
	defer h.end()
	w := uint64(1_000_000)
	var entryBytes int
	b.ReportAllocs()
	for b.Loop() {
		h.clock.set(w + testStep/2)
		for _, c := range cols {
			c.WindowStartMs = w
		}
		results := make([]<-chan reportResult, benchReporters)
		for r := range benchReporters {
			results[r] = h.report(fmt.Sprint("r", r), cols[r])
		}
		reporters := make([]string, benchReporters)
		for r := range reporters {
			reporters[r] = fmt.Sprint("r", r)
		}
		h.admitted(w, reporters...)
		h.clock.set(w + testStep)
		h.step()
		for _, ch := range results {
			if res := h.result(ch); res.err != nil || len(res.resp.GetAckedWindowStarts()) != 1 {
				b.Fatalf("report: %v %v", res.resp, res.err)
			}
		}
		applied := h.prop.columns()
		entryBytes = proto.Size(applied[len(applied)-1])
		w += testStep
	}
	b.ReportMetric(float64(entryBytes), "entry-bytes")
}

// BenchmarkIngestReport is the leader's work on one reporter's report of
// 10k rows, from the bytes that arrived: validation (limits, digest) and
// the merge, in the version 1 and version 2 row shapes of the load
// benchmarks (internal/loadgen). Reports fill columns of 100 reporters one
// after another, so a multiple of 100 iterations (-benchtime 100x) costs
// what whole columns do: a merge's cost depends on what its column holds
// already (a row's sample keeps fewer of each later reporter's keys).
// ns/row is per reporter row.
func BenchmarkIngestReport(b *testing.B) {
	var splits [][]byte
	for i := 1; i < benchRoutes; i++ {
		splits = append(splits, fmt.Appendf(nil, "r%05d", i))
	}
	cat, err := catalog.New(splits, 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig()
	cfg.Buckets = loadgen.Buckets
	for _, shape := range []loadgen.Shape{loadgen.V1, loadgen.V2} {
		b.Run(shape.String(), func(b *testing.B) {
			rows, err := loadgen.Build(shape, cat)
			if err != nil {
				b.Fatal(err)
			}
			const w = 100_000
			reports := make([][]byte, loadgen.Variants)
			for v := range reports {
				head, err := loadgen.Head(fmt.Sprint("r", v), w, testStep, rows.Encoded[v])
				if err != nil {
					b.Fatal(err)
				}
				reports[v] = append(head, rows.Encoded[v]...)
			}
			s := newColumnSum(w, testStep)
			var sc rowScratch // as an ingest slot's, reused
			ingest := func(reporter string, report []byte) {
				rep, err := readReport(report)
				if err != nil {
					b.Fatal(err)
				}
				cols, rej := validateReport(rep, cat, cfg, w+testStep, &sc)
				if rej != nil {
					b.Fatal(rej.msg)
				}
				s.merge(reporter, cols[0])
			}
			for r := range 8 { // warm the scratch and the pools
				ingest(fmt.Sprint("warm", r), reports[r%loadgen.Variants])
			}
			b.SetBytes(int64(len(reports[0])))
			b.ReportAllocs()
			i := 0
			cpu0 := processCPU()
			for b.Loop() {
				if i%columnReporters == 0 {
					s = newColumnSum(w, testStep)
				}
				ingest(fmt.Sprint("r", i%columnReporters), reports[i%loadgen.Variants])
				i++
			}
			// CPU time, not wall time: the machine these run on is shared.
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N*rows.Count), "cpu-ns/row")
		})
	}
}

// columnReporters is how many reporters' reports BenchmarkIngestReport
// merges into one column.
const columnReporters = 100

// processCPU is the process's user + system CPU time so far, in ns.
func processCPU() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime)
}

// BenchmarkColumnSumMemory is the live heap one open column holds after
// N reporters' 10k-row reports of each shape are merged into it, and what
// its entry is: the memory bound of docs/design.md. sum-MiB must not grow
// with reporters once each row's sample is full.
func BenchmarkColumnSumMemory(b *testing.B) {
	var splits [][]byte
	for i := 1; i < benchRoutes; i++ {
		splits = append(splits, fmt.Appendf(nil, "r%05d", i))
	}
	cat, err := catalog.New(splits, 1)
	if err != nil {
		b.Fatal(err)
	}
	cfg := testConfig()
	cfg.Buckets = loadgen.Buckets
	for _, shape := range []loadgen.Shape{loadgen.V1, loadgen.V2} {
		rows, err := loadgen.Build(shape, cat)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range []int{10, 50, 100} {
			b.Run(fmt.Sprintf("%v/reporters=%d", shape, n), func(b *testing.B) {
				const w = 100_000
				var sum *columnSum
				for b.Loop() {
					runtime.GC()
					before := liveHeap()
					sum = newColumnSum(w, testStep)
					for r := range n {
						v := r % loadgen.Variants
						head, err := loadgen.Head(fmt.Sprint("r", r), w, testStep, rows.Encoded[v])
						if err != nil {
							b.Fatal(err)
						}
						rep, err := readReport(append(head, rows.Encoded[v]...))
						if err != nil {
							b.Fatal(err)
						}
						cols, rej := validateReport(rep, cat, cfg, w+testStep, new(rowScratch))
						if rej != nil {
							b.Fatal(rej.msg)
						}
						sum.claim(rep.reporter, cols[0].digest)
						sum.merge(rep.reporter, cols[0])
					}
					runtime.GC()
					b.ReportMetric(float64(liveHeap()-before)/(1<<20), "sum-MiB")
				}
				e, _ := sum.entry(cat, detector.DefaultConfig(), DefaultBelowThresholdRows, clusterversion.Supported, nil)
				b.ReportMetric(float64(proto.Size(e)), "entry-bytes")
				b.ReportMetric(float64(len(e.GetRows())), "evidence-rows")
				runtime.KeepAlive(sum)
			})
		}
	}
}

func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}
