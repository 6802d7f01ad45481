// Command latch runs Latch's control plane (serve), the whole stack on an
// embedded default (dev), and the operator's admin and audit commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchhq/latch/controlplane/cli"
	"github.com/latchhq/latch/hostagent/shim"
)

func main() {
	// `latch dev` embeds a host agent, which re-executes this binary as its
	// per-execution shim and gate: those run first, before signal handling.
	if code, ok := shim.Reexec(os.Args[1:], os.Stderr); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, &cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}
