// Command hotsplitd runs one hotsplit control-plane node, or with --dev a
// whole three-node demo cluster in one process.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP re-reads the TLS files (they are also polled).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if opts.dev {
		err = runDev(ctx, opts, hup, os.Stdout)
	} else {
		err = runNode(ctx, opts, hup)
	}
	if err != nil {
		// The last line before a failed exit is one ERROR line naming the
		// file and the cause (SPEC §12), in the node's log format.
		opts.node.Logger.Error("hotsplitd: "+err.Error(), "reason", "exit")
		os.Exit(1)
	}
}
