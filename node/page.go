package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/fsm"
	"github.com/hotsplit/hotsplit/heatmap"
	"github.com/hotsplit/hotsplit/node/webauth"
	"github.com/hotsplit/hotsplit/transport"
	"github.com/hotsplit/hotsplit/webui"
)

// The key visualizer on the HTTP port: webui's page and API over this
// node's own applied state (every node draws the same picture from the
// same index), behind webauth's door — a reader's certificate or token, or
// a browser session (GET /login). Under --insecure it is open, like
// everything else.

// pageSource is webui.Source over this node's FSM: stale local reads
// through the transport's read path (newPageSource).
type pageSource struct {
	read    func() (*fsm.State, *api.ReadInfo)
	nowMs   func() uint64
	explain func(ctx context.Context, routeID uint64) (*api.ExplainResponse, error)
}

func newPageSource(srv *transport.Server) pageSource {
	return pageSource{read: srv.LocalRead, nowMs: srv.NowMs, explain: srv.Explain}
}

func (p pageSource) Snapshot(context.Context) (*webui.Snapshot, error) {
	st, info := p.read()
	if !st.Bootstrapped() {
		return nil, fmt.Errorf("%w: cluster not bootstrapped yet", webui.ErrUnavailable)
	}
	s := &webui.Snapshot{Read: info, NowMs: p.nowMs(), Catalog: st.Catalog(), Config: st.Config(), Switch: st.Switch(),
		Decisions: st.Decisions()}
	if st.Has(fsm.HeatHistory) {
		if s.History = st.HeatHistory(); s.History == nil {
			s.History = heatmap.New()
		}
	} else {
		s.HistoryOff = fmt.Sprintf("the cluster runs version %d: the heat history starts at cluster version %d (%s)",
			st.ClusterVersion(), fsm.HeatHistory.Version(), fsm.HeatHistory)
	}
	for _, t := range st.Detector().Tracked() {
		s.Tracked = append(s.Tracked, fsm.TrackedProto(t))
	}
	return s, nil
}

func (p pageSource) Explain(ctx context.Context, routeID uint64) (*api.ExplainResponse, error) {
	resp, err := p.explain(ctx, routeID)
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

// registerPage puts the page, its assets, the API and the login on mux.
func (n *Node) registerPage(mux *http.ServeMux) {
	h := webui.New(newPageSource(n.srv))
	for _, e := range h.Endpoints() {
		class := webauth.EndpointPage
		if strings.HasPrefix(e.Pattern, "GET /api/") {
			class = webauth.EndpointAPI
		}
		mux.Handle(e.Pattern, n.web.Guard(class, transport.RoleReader, true, e.Handler))
	}
	mux.Handle("GET /login", n.web.Login())
}

// pageBaseURL is the scheme and address of this node's page: the host of
// --httpAddr (the listener's when it is a wildcard or absent, the
// advertised gRPC host when that is a wildcard too) and the port the
// listener has.
func (n *Node) pageBaseURL() string {
	host, port, _ := net.SplitHostPort(n.HTTPAddr())
	if h, _, err := net.SplitHostPort(n.cfg.HTTPAddr); err == nil && n.cfg.HTTPListener == nil && !wildcard(h) {
		host = h
	}
	if wildcard(host) {
		host, _, _ = net.SplitHostPort(n.advertisedGRPC())
	}
	scheme := "https://"
	if n.cfg.Insecure {
		scheme = "http://"
	}
	return scheme + net.JoinHostPort(host, port)
}

func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || ip != nil && ip.IsUnspecified()
}

// MintUILogin returns a one-time login URL to this node's page, valid for
// ttl (the --dev demo prints one at start; operators use hotsplitctl ui).
func (n *Node) MintUILogin(ctx context.Context, ttl time.Duration) (*api.MintUILoginResponse, error) {
	if n.httpLn == nil {
		return nil, errors.New("ui login: this node has no HTTP address")
	}
	return n.web.MintFor(ctx, &transport.Principal{Name: n.cfg.ID, Via: "local"}, ttl)
}
