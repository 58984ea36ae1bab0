package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/hotsplit/hotsplit/node"
)

// runNode runs one node until ctx ends (SIGINT/SIGTERM), then stops it
// gracefully: a leader hands leadership over first. A node that learns it
// was removed from the cluster has said so in one line; it stops quietly
// and exits 0. SIGHUP re-reads the TLS files.
func runNode(ctx context.Context, o *options, hup <-chan os.Signal) error {
	n, err := node.Start(o.node)
	if err != nil {
		return err
	}
	removed := false
	for waiting := true; waiting; {
		select {
		case <-ctx.Done():
			waiting = false
		case <-n.Removed():
			removed, waiting = true, false
		case <-hup:
			reloadTLS(o.node.Logger, n)
		}
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

// reloadTLS re-reads a node's TLS files on SIGHUP; a failure keeps the
// previous set (the node logs why).
func reloadTLS(log *slog.Logger, n *node.Node) {
	if err := n.ReloadTLS(); err == nil {
		log.Info("SIGHUP: TLS files re-read", "node_id", n.ID())
	}
}
