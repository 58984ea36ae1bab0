package main

import (
	"context"
	"fmt"
	"time"

	"github.com/hotsplit/hotsplit/node"
)

// runNode runs one node until ctx ends (SIGINT/SIGTERM), then stops it
// gracefully: a leader hands leadership over first.
func runNode(ctx context.Context, o *options) error {
	n, err := node.Start(o.node)
	if err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-n.Halted():
	}
	o.node.Logger.Info("stopping")
	cctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := n.Close(cctx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}
