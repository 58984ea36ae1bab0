package transport

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

type loadServer struct {
	api.UnimplementedLoadServer
	s *Server
}

// Report hands load reports to the leader's column aggregator; followers
// forward them (SPEC §8), declaring the size they arrived with so the
// leader charges its budget for what the report is. On the leader the
// report is merged first; then the request and what admission charged for
// it are let go while the report waits for its columns to commit.
func (l *loadServer) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	if l.s.cfg.Loads == nil {
		return nil, status.Error(codes.Unimplemented, "load reports are not accepted by this build")
	}
	if err := checkText("reporter_id", req.GetReporterId(), maxReporterLen); err != nil {
		return nil, err
	}
	if req.GetReporterId() == "" {
		return nil, invalid("reporter_id: must be set")
	}
	size := reportBytes(ctx)
	if resp, handled, err := forwardRead(ctx, l.s, api.Consistency_CONSISTENCY_LINEARIZABLE, func(ctx context.Context, cc *grpc.ClientConn) (*api.ReportResponse, error) {
		if size >= 0 {
			ctx = metadata.AppendToOutgoingContext(ctx, api.ReportBytesHeader, strconv.Itoa(size))
		}
		return api.NewLoadClient(cc).Report(ctx, req)
	}); handled {
		return resp, err
	}
	return takeReport(ctx, l.s.cfg.Loads, req, size)
}

// takeReport has sink merge req, gives back what admission charged for it,
// and only then waits for the answer: a report waiting for its columns
// holds neither its request nor budget.
func takeReport(ctx context.Context, sink LoadSink, req *api.ReportRequest, size int) (*api.ReportResponse, error) {
	wait, err := sink.Take(ctx, req, size)
	releaseReportCharge(ctx)
	if err != nil {
		return nil, err
	}
	return wait(ctx)
}
