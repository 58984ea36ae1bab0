// Command hotsplitd runs one hotsplit control-plane node, or with --dev a
// whole three-node demo cluster in one process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/hotsplit/hotsplit/version"
)

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0) // --help asked for the usage, which went to stderr
	}
	if err != nil {
		os.Exit(2)
	}
	switch {
	case opts.version:
		fmt.Println("hotsplitd", version.String())
		return
	case opts.inspect != "":
		if err := inspect(os.Stdout, opts.inspect); err != nil {
			fmt.Fprintln(os.Stderr, "hotsplitd:", err)
			os.Exit(1)
		}
		return
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
		// file and the cause (docs/design.md#limits-and-bad-input), in the node's log format.
		opts.node.Logger.Error("hotsplitd: "+err.Error(), "reason", "exit")
		os.Exit(1)
	}
}
