// Package pagesource is the key visualizer's data on a node: webui.Source
// over the node's own applied state — stale local reads through the
// transport's read path (every node draws the same picture from the same
// applied index) and explain through the transport's read path too.
//
// It only reads: it proposes nothing and holds no state of its own; what a
// caller may see is decided before it is reached (node/webauth).
package pagesource

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/clusterversion"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/heatmap"
	"github.com/hotsplit/hotsplit/transport"
	"github.com/hotsplit/hotsplit/webui"
)

// Source is webui.Source over a node's applied state.
// Its fields are the reads it makes (New fills them from a transport
// server; tests from an FSM of their own).
type Source struct {
	// Read is a stale local read: the applied state and its ReadInfo.
	Read func() (*fsm.State, *api.ReadInfo)
	// NowMs is the node's clock (for cooldowns left).
	NowMs func() uint64
	// ExplainRoute answers Explain as the gRPC read path does.
	ExplainRoute func(ctx context.Context, routeID uint64) (*api.ExplainResponse, error)
}

// New returns the Source reading srv's local state.
func New(srv *transport.Server) Source {
	return Source{Read: srv.LocalRead, NowMs: srv.NowMs, ExplainRoute: srv.Explain}
}

func (p Source) Snapshot(context.Context) (*webui.Snapshot, error) {
	st, info := p.Read()
	if !st.Bootstrapped() {
		return nil, fmt.Errorf("%w: cluster not bootstrapped yet", webui.ErrUnavailable)
	}
	s := &webui.Snapshot{Read: info, NowMs: p.NowMs(), Catalog: st.Catalog(), Config: st.Config(), Switch: st.Switch(),
		Decisions: st.Decisions()}
	if st.Has(clusterversion.HeatHistory) {
		if s.History = st.HeatHistory(); s.History == nil {
			s.History = heatmap.New()
		}
	} else {
		s.HistoryOff = fmt.Sprintf("the cluster runs version %d: the heat history starts at cluster version %d (%s)",
			st.ClusterVersion(), clusterversion.HeatHistory.Version(), clusterversion.HeatHistory)
	}
	for _, t := range st.Detector().Tracked() {
		s.Tracked = append(s.Tracked, fsm.TrackedProto(t))
	}
	return s, nil
}

func (p Source) Explain(ctx context.Context, routeID uint64) (*api.ExplainResponse, error) {
	resp, err := p.ExplainRoute(ctx, routeID)
	switch status.Code(err) {
	case codes.OK:
		return resp, nil
	case codes.NotFound:
		return nil, fmt.Errorf("%w: %s", webui.ErrNotFound, status.Convert(err).Message())
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return nil, fmt.Errorf("%w: %s", webui.ErrUnavailable, status.Convert(err).Message())
	}
	return nil, errors.New(status.Convert(err).Message())
}
