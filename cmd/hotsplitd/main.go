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
	if opts.dev {
		err = runDev(ctx, opts, os.Stdout)
	} else {
		err = runNode(ctx, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "hotsplitd:", err)
		os.Exit(1)
	}
}
