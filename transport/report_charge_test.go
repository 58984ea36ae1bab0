package transport

import (
	"context"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// The codec records the size a report arrived with, once; other requests
// and reports that did not decode leave nothing behind.
func TestCodecRecordsReportSize(t *testing.T) {
	c := newRequestCodec()
	req := &api.ReportRequest{ReporterId: "n1", Columns: []*api.ReportColumn{{WindowStartMs: 1000, StepMs: 1000}}}
	b, err := proto.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	// The same content with a repeated scalar: more bytes than proto.Size.
	b = append(b, 0x0a, 0x02, 'n', '1')
	var got api.ReportRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &got); err != nil {
		t.Fatal(err)
	}
	if n := c.reportSize(&got); n != len(b) || n == proto.Size(&got) {
		t.Fatalf("recorded %d, want the %d bytes that arrived (proto.Size %d)", n, len(b), proto.Size(&got))
	}
	if n := c.reportSize(&got); n != -1 {
		t.Fatalf("recorded twice: %d", n)
	}
	var bad api.ReportRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x01, 0xff})}, &bad); err != nil {
		t.Fatal(err)
	}
	if n := c.reportSize(&bad); n != -1 {
		t.Fatalf("a report that did not decode recorded %d", n)
	}
	c.decodeFailure(&bad)
	var other api.LeaderRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(nil)}, &other); err != nil {
		t.Fatal(err)
	}
	n := 0
	c.sizes.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d sizes left in the table", n)
	}
}

// budgetSink is a LoadSink whose merge succeeds at once and whose wait
// reports how much of the budget is in use while the report waits.
type budgetSink struct {
	b      *reportBudget
	inWait int64
}

func (s *budgetSink) Take(context.Context, *api.ReportRequest, int) (func(context.Context) (*api.ReportResponse, error), error) {
	return func(context.Context) (*api.ReportResponse, error) {
		s.inWait = s.b.used.Load()
		return &api.ReportResponse{}, nil
	}, nil
}

// A report gives its charge back once merged, before it waits for its
// columns; the end of the call does not give it back a second time.
func TestReportChargeReleasedOnceMerged(t *testing.T) {
	s := &Server{budget: &reportBudget{limit: 1 << 20}}
	md := metadata.Pairs(api.ReportBytesHeader, "300000")
	ctx, cancel := context.WithCancel(context.Background())
	charge := &reportCharge{b: s.budget, n: chargeOf(md, api.MaxMessageBytes)}
	if !s.budget.acquire(charge.n) {
		t.Fatal("the budget refused a first report")
	}
	context.AfterFunc(ctx, charge.release)
	ctx = context.WithValue(ctx, reportChargeKey{}, charge)
	if err := checkReportSize(ctx, 300_001); err == nil {
		t.Fatal("a report larger than it declared was admitted")
	}
	sink := &budgetSink{b: s.budget}
	if _, err := takeReport(ctx, sink, &api.ReportRequest{ReporterId: "n1"}, 300_000); err != nil {
		t.Fatal(err)
	}
	if sink.inWait != 0 {
		t.Fatalf("%d bytes of budget held while the report waited", sink.inWait)
	}
	cancel()
	charge.release() // as the end of the call does: nothing more to give back
	if used := s.budget.used.Load(); used != 0 {
		t.Fatalf("budget at %d after the call ended", used)
	}
}
