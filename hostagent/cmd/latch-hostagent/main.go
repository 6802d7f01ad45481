// Command latch-hostagent is Latch's host agent: it runs commands at most
// once per execution ID under a durable marker, and serves the marker API
// migration scripts use. See the package hostagent documentation and
// docs/how-to/install-host-agent.md for the data layout, the unit file and the exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/latchhq/latch/hostagent/shim"
)

func main() {
	// The re-executed shim and gate run first: the gate must not catch
	// signals while it waits.
	if code, ok := shim.Reexec(os.Args[1:], os.Stderr); ok {
		os.Exit(code)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
