package transport

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// A report is kept as the bytes that arrived, with only its reporter id
// decoded, once; reports that do not decode and other requests take the
// standard path and leave nothing behind.
func TestCodecKeepsReportBytes(t *testing.T) {
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
	w := c.reportWire(&got)
	if w == nil || w.len() != len(b) || string(w.bytes()) != string(b) || got.GetReporterId() != "n1" || len(got.GetColumns()) != 0 {
		t.Fatalf("kept %v for %q with %d columns; want the %d bytes that arrived and the reporter id only", w, got.GetReporterId(), len(got.GetColumns()), len(b))
	}
	w.free()
	w.free() // a second free does nothing
	if c.reportWire(&got) != nil {
		t.Fatal("kept twice")
	}
	var bad api.ReportRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x01, 0xff})}, &bad); err != nil {
		t.Fatal(err)
	}
	if c.reportWire(&bad) != nil || c.decodeFailure(&bad) == "" {
		t.Fatal("a report that did not decode was kept, or not refused")
	}
	var other api.LeaderRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(nil)}, &other); err != nil {
		t.Fatal(err)
	}
	n := 0
	c.reports.Range(func(any, any) bool { n++; return true })
	if n != 0 {
		t.Fatalf("%d reports left in the table", n)
	}
}

// budgetSink is a LoadSink whose merge succeeds at once and whose wait
// reports how much of the budget is in use while the report waits.
type budgetSink struct {
	b      *reportBudget
	inWait int64
}

func (s *budgetSink) Take(context.Context, []byte) (func(context.Context) (*api.ReportResponse, error), error) {
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
	if _, err := takeReport(ctx, sink, []byte{0x0a, 0x02, 'n', '1'}, nil); err != nil {
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

// malformedSink refuses every report as a leader does bytes that do not
// decode.
type malformedSink struct{}

func (malformedSink) Take(context.Context, []byte) (func(context.Context) (*api.ReportResponse, error), error) {
	return nil, fmt.Errorf("load report does not decode: %w", api.ErrMalformedReport)
}

// Rows that do not decode are found by the leader, not the codec (which
// reads only the top level); the caller gets the refusal the codec gives
// any request that does not decode, and the charge is given back.
func TestMalformedReportRefusedAsUndecodable(t *testing.T) {
	// A column whose only row is a truncated field.
	b := []byte{0x0a, 0x02, 'n', '1', 0x12, 0x03, 0x32, 0x01, 0x08}
	c := newRequestCodec()
	var req api.ReportRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, &req); err != nil {
		t.Fatal(err)
	}
	w := c.reportWire(&req)
	if w == nil {
		t.Fatal("the top level decodes: the codec must keep the report")
	}
	budget := &reportBudget{limit: 1 << 20}
	charge := &reportCharge{b: budget, n: minReportCharge}
	budget.acquire(charge.n)
	ctx := context.WithValue(context.Background(), reportChargeKey{}, charge)
	_, err := takeReport(ctx, malformedSink{}, w.bytes(), w)
	var probe api.ReportRequest
	want := describeDecodeError(b, probe.ProtoReflect().Descriptor(), proto.Unmarshal(b, &probe))
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != want || !errors.Is(err, api.ErrMalformedReport) {
		t.Fatalf("refusal %v %q (wraps the cause: %v), want InvalidArgument %q", st.Code(), st.Message(), errors.Is(err, api.ErrMalformedReport), want)
	}
	if budget.used.Load() != 0 {
		t.Fatal("the charge of a refused report was kept")
	}
}
