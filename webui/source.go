package webui

import (
	"context"
	"errors"

	api "github.com/hotsplit/hotsplit/api/hotsplitv1"
	"github.com/hotsplit/hotsplit/catalog"
	"github.com/hotsplit/hotsplit/heatmap"
)

// Source is the node's replicated state as the page reads it. Both methods
// are called concurrently, from request goroutines; they answer from this
// node's own applied state (every node draws the same picture from the
// same index) and must honour ctx.
type Source interface {
	// Snapshot returns one consistent view of the state at this node's
	// applied index.
	Snapshot(ctx context.Context) (*Snapshot, error)
	// Explain answers like AutoSplit.Explain with stale consistency.
	Explain(ctx context.Context, routeID uint64) (*api.ExplainResponse, error)
}

// Snapshot is one applied index of the replicated state. Everything in it
// is shared and must not be modified.
type Snapshot struct {
	// Read says where and at which index the state was read.
	Read *api.ReadInfo
	// NowMs is this node's HLC physical time (cooldowns left are measured
	// against it).
	NowMs uint64
	// History is the heat history; nil below cluster version 3 (the page
	// then draws no columns and says why: HistoryOff).
	History *heatmap.History
	// HistoryOff says why there is no History.
	HistoryOff string
	// Catalog is the live catalog; nil before bootstrap.
	Catalog *catalog.Catalog
	Config  *api.Config
	Switch  *api.AutoSplitSwitch
	// Tracked is the detector's state of the routes it tracks, sorted by
	// route id.
	Tracked []*api.TrackedRoute
	// Decisions is the ring of recent decisions, oldest first.
	Decisions []*api.Decision
}

// Errors a Source returns (wrapped) to choose the HTTP status.
var (
	// ErrUnavailable: the node cannot answer now (not bootstrapped,
	// stopping): 503.
	ErrUnavailable = errors.New("webui: unavailable")
	// ErrNotFound: no such route was ever created: 404.
	ErrNotFound = errors.New("webui: not found")
)
