package transport

import (
	"context"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
)

// UILogin mints one-time browser logins to the key visualizer's page of
// this node (the node's session store). Mint is called concurrently.
type UILogin interface {
	// Mint returns a login URL for a session of the reader role on this
	// node, minted by the identity by (for the log).
	Mint(ctx context.Context, by *Principal) (*api.MintUILoginResponse, error)
}

// MintUILogin answers on the node it reached and is never forwarded: the
// session it leads to lives in that node's memory only.
func (c *clusterServer) MintUILogin(ctx context.Context, _ *api.MintUILoginRequest) (*api.MintUILoginResponse, error) {
	if c.s.cfg.UILogin == nil {
		return nil, statusUnimplemented("ui login: this node serves no page (it has no --httpAddr, or runs --insecure, where the page needs no login)")
	}
	p, _ := PrincipalFrom(ctx)
	return c.s.cfg.UILogin.Mint(ctx, p)
}
