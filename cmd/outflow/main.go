// Command outflow operates the Outflow dispatcher: dead letters, stats,
// enqueue, one-off sweeps and the local stack. Run `outflow --help`.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/outflowhq/outflow/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Execute(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
