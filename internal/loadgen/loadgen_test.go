package loadgen

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
)

// Head followed by the rows decodes to one full report within the size
// limit, of the shape asked for.
func TestReportsDecodeWithinTheLimit(t *testing.T) {
	// The benchmarks' 10,000 routes at the real limit, or (-short) 1,500
	// routes within 600 KB: the evidence bound binds in both.
	routes, limit := 10_000, api.MaxReportBytes
	if testing.Short() {
		routes, limit = 1_500, 600<<10
	}
	var splits [][]byte
	for i := 1; i < routes; i++ {
		splits = append(splits, fmt.Appendf(nil, "r%05d", i))
	}
	cat, err := catalog.New(splits, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, shape := range []Shape{V1, V2} {
		rows, err := BuildWithin(shape, cat, limit)
		if err != nil {
			t.Fatal(err)
		}
		id := string(make([]byte, MaxReporterID))
		head, err := Head(id, 1<<41, 1000, rows.Encoded[3])
		if err != nil {
			t.Fatal(err)
		}
		p := Parts{head, rows.Encoded[3]}
		var req api.ReportRequest
		if err := proto.Unmarshal(append(append([]byte(nil), head...), rows.Encoded[3]...), &req); err != nil {
			t.Fatal(err)
		}
		c := req.GetColumns()
		if len(c) != 1 || len(c[0].GetRows()) != routes || c[0].GetWindowStartMs() != 1<<41 || req.GetReporterId() != id {
			t.Fatalf("%v: decoded %d columns", shape, len(c))
		}
		if p.Len() > limit {
			t.Fatalf("%v: %d bytes, over the limit", shape, p.Len())
		}
		withSamples, evidence := 0, 0
		for _, r := range c[0].GetRows() {
			if len(r.GetSamples()) == 32 && len(r.GetTopKeys()) == 8 {
				withSamples++
			}
			evidence += proto.Size(&api.ReportRow{TopKeys: r.GetTopKeys(), Samples: r.GetSamples()})
		}
		t.Logf("%v: %d bytes, %d rows with evidence (%d with 32 samples and 8 top keys), %d bytes of it", shape, p.Len(), rows.WithEvidence, withSamples, evidence)
		if evidence > api.MaxReportEvidenceBytes {
			t.Fatalf("%v: %d bytes of evidence, over %d", shape, evidence, api.MaxReportEvidenceBytes)
		}
		// v2 carries evidence up to its bound (within one row's), every
		// hot route (one in 100) among the rows that keep it.
		if shape == V2 && (withSamples < routes/100 || withSamples == routes || evidence < api.MaxReportEvidenceBytes-2<<10) {
			t.Fatalf("v2: %d of %d rows sampled, %d bytes of evidence: want the evidence bound filled by sampled rows", withSamples, routes, evidence)
		}
		for i, r := range c[0].GetRows() {
			if i%100 == 0 && len(r.GetSamples()) == 0 && shape == V2 {
				t.Fatalf("v2: hot route %d lost its evidence", r.GetRouteId())
			}
		}
	}
}
