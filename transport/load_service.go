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
	if err := checkText("reporter_id", req.GetReporterId(), maxReporterLen); err != nil {
		return nil, err
	}
	if req.GetReporterId() == "" {
		return nil, invalid("reporter_id: must be set")
	}
	if resp, handled, err := forwardRead(ctx, l.s, api.Consistency_CONSISTENCY_LINEARIZABLE, func(ctx context.Context, cc *grpc.ClientConn) (*api.ReportResponse, error) {
		return api.NewLoadClient(cc).Report(ctx, req)
	}); handled {
		return resp, err
	}
	resp, err := l.s.cfg.Loads.Report(ctx, req)
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
