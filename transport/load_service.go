package transport

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

type loadServer struct {
	api.UnimplementedLoadServer
	s *Server
}

// Report hands load reports to the leader's column aggregator; followers
// forward them (docs/design.md#the-load-pipeline) as the bytes they arrived as, declaring their size
// so the leader charges its budget for what the report is. On the leader
// the report is merged straight from those bytes; then the bytes and what
// admission charged for them are let go while the report waits for its
// columns to commit.
func (l *loadServer) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	wire := reportWireOf(ctx)
	defer wire.free() // on every path; after a merge it has been freed already
	if l.s.cfg.Loads == nil {
		return nil, status.Error(codes.Unimplemented, "load reports are not accepted by this build")
	}
	if err := checkText("reporter_id", req.GetReporterId(), maxReporterLen); err != nil {
		return nil, err
	}
	if req.GetReporterId() == "" {
		return nil, invalid("reporter_id: must be set")
	}
	b := []byte(nil)
	if wire != nil {
		b = wire.bytes()
	} else {
		var err error
		if b, err = proto.Marshal(req); err != nil {
			return nil, status.Errorf(codes.Internal, "load report: %v", err)
		}
	}
	if resp, handled, err := forwardRead(ctx, l.s, api.Consistency_CONSISTENCY_LINEARIZABLE, func(ctx context.Context, cc *grpc.ClientConn) (*api.ReportResponse, error) {
		ctx = metadata.AppendToOutgoingContext(ctx, api.ReportBytesHeader, strconv.Itoa(len(b)))
		var resp api.ReportResponse
		if err := cc.Invoke(ctx, api.Load_Report_FullMethodName, rawRequest(b), &resp, grpc.ForceCodecV2(rawRequestCodec{})); err != nil {
			return nil, err
		}
		return &resp, nil
	}); handled {
		return resp, err
	}
	resp, err := takeReport(ctx, l.s.cfg.Loads, b, wire)
	if errors.Is(err, api.ErrMalformedReport) {
		l.s.cfg.Metrics.refuse(refusedBadRequest)
		return nil, err
	}
	if err != nil {
		return nil, withReplicatedConfig(err, l.s.cfg.FSM.State().Config())
	}
	return resp, nil
}

// withReplicatedConfig adds the replicated config to the status of a
// refused report (InvalidArgument: a step, alignment or buckets the
// cluster does not use). A reporter learns the config from Report answers;
// without it in the refusal, one that started on another step (a data node
// started after a step change) would have every column refused and never
// hear of the step it must use.
func withReplicatedConfig(err error, cfg *api.Config) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument || cfg == nil {
		return err
	}
	if withCfg, derr := st.WithDetails(cfg); derr == nil {
		return withCfg.Err()
	}
	return err
}

// takeReport has sink merge the encoded report b, gives back its buffer
// (wire, if it came in one) and what admission charged for it, and only
// then waits for the answer: a report waiting for its columns holds
// neither its bytes nor budget. Bytes that do not decode are refused as the
// codec refuses any request that does not decode (decodeRefusal); the
// error still wraps api.ErrMalformedReport.
func takeReport(ctx context.Context, sink LoadSink, b []byte, wire *reportWire) (*api.ReportResponse, error) {
	wait, err := sink.Take(ctx, b)
	if errors.Is(err, api.ErrMalformedReport) {
		err = &malformedReport{refusal: decodeRefusal(b), cause: err}
	}
	wire.free()
	releaseReportCharge(ctx)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}

// malformedReport is a report refused because it does not decode: its
// status and message are the codec's refusal; it unwraps to the
// aggregator's error too (api.ErrMalformedReport).
type malformedReport struct {
	refusal error // a status error
	cause   error
}

func (e *malformedReport) Error() string              { return e.refusal.Error() }
func (e *malformedReport) GRPCStatus() *status.Status { return status.Convert(e.refusal) }
func (e *malformedReport) Unwrap() []error            { return []error{e.refusal, e.cause} }

// rawRequest is a request already in wire form.
type rawRequest []byte

// rawRequestCodec sends a rawRequest as it is and decodes responses with
// protobuf: a follower forwards a report without decoding or encoding it.
type rawRequestCodec struct{}

func (rawRequestCodec) Marshal(v any) (mem.BufferSlice, error) {
	b, ok := v.(rawRequest)
	if !ok {
		return nil, fmt.Errorf("raw request codec: cannot send %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (rawRequestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("raw request codec: cannot decode into %T", v)
	}
	return proto.Unmarshal(data.Materialize(), m)
}

func (rawRequestCodec) Name() string { return encoding.GetCodecV2("proto").Name() }
