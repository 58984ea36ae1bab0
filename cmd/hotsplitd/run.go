package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hotsplit/hotsplit/node"
)

// runNode runs one node until ctx ends (SIGINT/SIGTERM), then stops it
// gracefully: a leader hands leadership over first. A node that learns it
// was removed from the cluster has said so in one line; it stops quietly
// and exits 0.
func runNode(ctx context.Context, o *options) error {
	n, err := node.Start(o.node)
	if err != nil {
		return err
	}
	removed := false
	select {
	case <-ctx.Done():
	case <-n.Halted():
	case <-n.Removed():
		removed = true
	}
	if !removed {
		o.node.Logger.Info("stopping")
	}
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.Close(cctx); err != nil && !removed {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}
