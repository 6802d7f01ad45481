// Command latch runs Latch's control plane (serve), the whole stack on an
// embedded default (dev), and the operator's admin and audit commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchhq/latch/controlplane/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}
