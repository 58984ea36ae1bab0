// Command hotsplitctl is the operator CLI of a hotsplit cluster: it lists
// and watches the route catalog, splits routes by hand, drives and explains
// automatic splitting, and manages cluster membership. It talks to the
// cluster only through package client and holds no business rules: every
// decision it shows was made and recorded by the cluster.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], osEnv(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
