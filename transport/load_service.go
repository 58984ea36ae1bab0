package transport

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

type loadServer struct {
	api.UnimplementedLoadServer
	s *Server
}

// Report hands load reports to the leader's column aggregator; followers
// forward them (SPEC §8).
func (l *loadServer) Report(ctx context.Context, req *api.ReportRequest) (*api.ReportResponse, error) {
	if l.s.cfg.Loads == nil {
		return nil, status.Error(codes.Unimplemented, "load reports are not accepted by this build")
	}
	if err := checkText("reporter_id", req.GetReporterId(), maxNodeIDLen); err != nil {
		return nil, err
	}
	if req.GetReporterId() == "" {
		return nil, invalid("reporter_id: must be set")
	}
	if hint, err := l.s.route(ctx); err != nil {
		return nil, err
	} else if hint != nil {
		// A report is idempotent per (reporter, column): forwarding failures
		// are definite from the reporter's point of view — it resends.
		return forward(ctx, l.s, hint, false, "", func(ctx context.Context, cc *grpc.ClientConn) (*api.ReportResponse, error) {
			return api.NewLoadClient(cc).Report(ctx, req)
		})
	}
	return l.s.cfg.Loads.Report(ctx, req)
}
