package node

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/node/pagesource"
	"github.com/hotsplit/hotsplit/node/webauth"
	"github.com/hotsplit/hotsplit/transport"
	"github.com/hotsplit/hotsplit/webui"
)

// The key visualizer on the HTTP port: webui's page and API over this
// node's own applied state (every node draws the same picture from the
// same index), behind webauth's door — a reader's certificate or token, or
// a browser session (GET /login). Under --insecure it is open, like
// everything else.

// registerPage puts the page, its assets, the API and the login on mux.
func (n *Node) registerPage(mux *http.ServeMux) {
	h := webui.New(pagesource.New(n.srv))
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
