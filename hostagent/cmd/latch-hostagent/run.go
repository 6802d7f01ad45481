package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/agent"
	"github.com/latchhq/latch/internal/buildinfo"
)

const (
	defaultSocket = "/run/latch-hostagent.sock"
	envSocket     = "LATCH_HOSTAGENT_SOCKET"
)

var usage = fmt.Sprintf(`usage: latch-hostagent <command> [flags]

Commands:
  serve --data DIR --socket PATH [--allow-uid UID,...] [--output-cap BYTES] [--log-level LEVEL]
        run the agent: the HostAgent gRPC service on a unix socket (mode 0660),
        open to this uid, root and --allow-uid
  marker begin    [ID] [--op NAME]        begin a script marker
  marker complete [ID] [--result JSON]    mark it completed
  marker fail     [ID] --reason TEXT      mark it failed
  marker status   [ID]                    print the marker (JSON line)
  marker list     [--limit N]             print all markers (JSON lines)
  version                                 print the build (version, revision, Go, platform)

Marker commands talk to the running agent over --socket (default %s, or
$%s); they never open the store. ID defaults to $LATCH_EXECUTION_ID, which
the agent exports to every command it runs.

Exit codes:
  %-3d ok (begun, completed, failed as asked, printed)
  %-3d runtime error
  %-3d bad arguments
  %-3d agent not reachable (socket missing, refused, or this uid not allowed)
  %-3d already completed
  %-3d in progress (begun and not finished)
  %-3d failed before
  %-3d no such marker
`, defaultSocket, envSocket,
	hostagent.ExitOK, hostagent.ExitRuntime, hostagent.ExitUsage, hostagent.ExitUnreachable,
	hostagent.ExitAlreadyCompleted, hostagent.ExitInProgress, hostagent.ExitFailedBefore, hostagent.ExitNoMarker)

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return hostagent.ExitUsage
	}
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stderr)
	case "marker":
		return marker(ctx, args[1:], stdout, stderr)
	case "version", "--version":
		buildinfo.Read().Print(stdout, "latch-hostagent")
		return hostagent.ExitOK
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return hostagent.ExitOK
	default:
		fmt.Fprintf(stderr, "latch-hostagent: unknown command %q\n\n%s", args[0], usage)
		return hostagent.ExitUsage
	}
}

// uidList is a repeatable, comma-separated --allow-uid flag.
type uidList []uint32

func (u *uidList) String() string {
	var s []string
	for _, v := range *u {
		s = append(s, strconv.FormatUint(uint64(v), 10))
	}
	return strings.Join(s, ",")
}

func (u *uidList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(part), 10, 32)
		if err != nil {
			return fmt.Errorf("uid %q is not a number", part)
		}
		*u = append(*u, uint32(n))
	}
	return nil
}

func serve(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data directory (lock, marker store, execution directories)")
	socket := fs.String("socket", socketDefault(), "unix socket to serve on")
	var allow uidList
	fs.Var(&allow, "allow-uid", "extra uid allowed to connect (repeatable, comma-separated)")
	outputCap := fs.Int64("output-cap", agent.DefaultOutputCap, "bytes of output kept per execution")
	level := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	format := fs.String("log-format", "text", "text or json (one JSON object per line)")
	metricsListen := fs.String("metrics-listen", "", "serve /metrics, /healthz and /readyz on this loopback address (e.g. 127.0.0.1:7414); off when empty")
	if err := fs.Parse(args); err != nil {
		return hostagent.ExitUsage
	}
	if *format != "text" && *format != "json" {
		fmt.Fprintf(stderr, "latch-hostagent serve: --log-format %q is not text or json\n", *format)
		return hostagent.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "latch-hostagent serve: unexpected argument %q\n", fs.Arg(0))
		return hostagent.ExitUsage
	}
	if *data == "" {
		fmt.Fprintln(stderr, "latch-hostagent serve: --data is required")
		return hostagent.ExitUsage
	}
	lvl := hclog.LevelFromString(*level)
	if lvl == hclog.NoLevel {
		fmt.Fprintf(stderr, "latch-hostagent serve: unknown --log-level %q\n", *level)
		return hostagent.ExitUsage
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "latch-hostagent", Level: lvl, Output: stderr, JSONFormat: *format == "json"})
	metrics, ops, err := metricsListener(log, *metricsListen)
	if err != nil {
		fmt.Fprintf(stderr, "latch-hostagent serve: %v\n", err)
		return hostagent.ExitUsage
	}
	policy := agent.DefaultPolicy(allow...)
	a, err := agent.New(agent.Config{
		DataDir:    *data,
		SocketPath: *socket,
		Policy:     &policy,
		OutputCap:  *outputCap,
		Logger:     log,
		Metrics:    metrics,
	})
	if err != nil {
		fmt.Fprintf(stderr, "latch-hostagent serve: %v\n", err)
		return hostagent.ExitUsage
	}
	if err := serveWithMetrics(ctx, a.Serve, ops); err != nil {
		log.Error("agent failed", "error", err)
		return hostagent.ExitRuntime
	}
	return hostagent.ExitOK
}

func socketDefault() string {
	if v := os.Getenv(envSocket); v != "" {
		return v
	}
	return defaultSocket
}

// runShim is the hidden per-execution supervisor (see package shim).
// parseInterspersed parses flags that may come before or after positional
// arguments ("begin ID --op x" and "begin --op x ID").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for range len(args) + 1 {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	return nil, errors.New("too many arguments")
}
