package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"
)

// reloadOnHUP re-reads the configuration on every SIGHUP: a new log level
// is applied; any other changed key is logged as needing a restart (the
// TLS files are re-read when they change, the catalog follows the control
// plane). A configuration with problems changes nothing.
func reloadOnHUP(ctx context.Context, running *flag.FlagSet, args []string, log hclog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	build := func() *flag.FlagSet { fs, _, _ := newFlags(io.Discard); return fs }
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
				reread, reload, restart, err := binary.Reread(running, build, args, os.Getenv)
				if err != nil {
					log.Error("configuration not reloaded: it has problems; nothing changed", "error", err)
					continue
				}
				for _, k := range reload {
					if k == "log_level" {
						log.SetLevel(hclog.LevelFromString(reread.Lookup("log-level").Value.String()))
					}
				}
				log.Info("configuration reloaded", "applied", strings.Join(reload, ","), "need_restart", strings.Join(restart, ","))
				running = reread
			}
		}
	}()
	return func() { signal.Stop(hup); close(done) }
}

// configCmd is `latch-mcp config validate FILE`: exit 2 on any problem.
func configCmd(args []string, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "validate" {
		fmt.Fprintln(stderr, "usage: latch-mcp config validate FILE")
		return 2
	}
	if _, err := parseFlags([]string{"--config", args[1]}, stderr); err != nil {
		fmt.Fprintf(stderr, "latch-mcp config validate: %s:\n%v\n", args[1], err)
		return 2
	}
	fmt.Fprintf(stderr, "%s: valid latch-mcp configuration\n", args[1])
	return 0
}
