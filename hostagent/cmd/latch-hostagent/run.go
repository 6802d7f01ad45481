package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/hostagent/agent"
	"github.com/latchhq/latch/internal/buildinfo"
	"github.com/latchhq/latch/internal/config"
)

const (
	defaultSocket = "/run/latch-hostagent.sock"
	envSocket     = "LATCH_HOSTAGENT_SOCKET"
)

var usage = fmt.Sprintf(`usage: latch-hostagent <command> [flags]

Commands:
  serve [--config FILE] --data DIR --socket PATH [--allow-uid UID,...] [--output-cap BYTES] [--log-level LEVEL]
        run the agent: the HostAgent gRPC service on a unix socket (mode 0660),
        open to this uid, root and --allow-uid; settings from FILE and
        LATCH_HOSTAGENT_* too (docs/reference/config.md); SIGHUP re-reads them
  config validate FILE                    check a config file (exit 2 on any problem)
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
	case "config":
		return configCmd(args[1:], stdout, stderr)
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

// binary is latch-hostagent serve's config file and environment
// (internal/config): LATCH_HOSTAGENT_* variables, keys from serveFlags.
var binary = config.Binary{
	Name:       "latch-hostagent",
	EnvPrefix:  "LATCH_HOSTAGENT_",
	Reloadable: []string{"log_level"},
}

// serveOptions are latch-hostagent serve's settings.
type serveOptions struct {
	data, socket, level, format, opsListen string
	allow                                  uidList
	outputCap                              int64
}

// serveFlags is serve's flag set (its keys are the config file's).
func serveFlags(stderr io.Writer) (*flag.FlagSet, *serveOptions) {
	o := &serveOptions{}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config.Register(fs)
	fs.StringVar(&o.data, "data", "", "data directory (lock, marker store, execution directories); required")
	fs.StringVar(&o.socket, "socket", defaultSocket, "unix socket to serve on")
	fs.Var(&o.allow, "allow-uid", "extra uid allowed to connect (repeatable, comma-separated)")
	fs.Int64Var(&o.outputCap, "output-cap", agent.DefaultOutputCap, "bytes of output kept per execution")
	fs.StringVar(&o.level, "log-level", "info", "log level: trace, debug, info, warn, error")
	fs.StringVar(&o.format, "log-format", "text", "text or json (one JSON object per line)")
	fs.StringVar(&o.opsListen, "ops-listen", "", "serve /metrics, /healthz and /readyz on this loopback address (e.g. 127.0.0.1:7414); off when empty")
	config.Alias(fs, "metrics-listen", "ops-listen")
	return fs, o
}

// parseServe reads serve's flags, environment and config file and checks
// them; the error is written for the operator (exit code 2).
func parseServe(args []string, stderr io.Writer) (*flag.FlagSet, *serveOptions, error) {
	fs, o := serveFlags(stderr)
	if _, err := binary.Parse(fs, args, os.Getenv); err != nil {
		return nil, nil, err
	}
	if o.format != "text" && o.format != "json" {
		return nil, nil, fmt.Errorf("--log-format (log_format) %q is not text or json", o.format)
	}
	if fs.NArg() > 0 {
		return nil, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if o.data == "" {
		return nil, nil, errors.New("--data (data) is required: the agent's data directory, e.g. /var/lib/latch-hostagent")
	}
	if hclog.LevelFromString(o.level) == hclog.NoLevel {
		return nil, nil, fmt.Errorf("unknown --log-level (log_level) %q: want trace, debug, info, warn or error", o.level)
	}
	return fs, o, nil
}

func serve(ctx context.Context, args []string, stderr io.Writer) int {
	fs, o, err := parseServe(args, stderr)
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "latch-hostagent serve: %v\n", err)
		}
		return hostagent.ExitUsage
	}
	log := hclog.New(&hclog.LoggerOptions{Name: "latch-hostagent", Level: hclog.LevelFromString(o.level), Output: stderr, JSONFormat: o.format == "json"})
	metrics, ops, err := metricsListener(log, o.opsListen)
	if err != nil {
		fmt.Fprintf(stderr, "latch-hostagent serve: %v\n", err)
		return hostagent.ExitUsage
	}
	policy := agent.DefaultPolicy(o.allow...)
	a, err := agent.New(agent.Config{
		DataDir:    o.data,
		SocketPath: o.socket,
		Policy:     &policy,
		OutputCap:  o.outputCap,
		Logger:     log,
		Metrics:    metrics,
	})
	if err != nil {
		fmt.Fprintf(stderr, "latch-hostagent serve: %v\n", err)
		return hostagent.ExitUsage
	}
	stopHUP := reloadOnHUP(ctx, fs, args, log)
	defer stopHUP()
	if err := serveWithMetrics(ctx, a.Serve, ops); err != nil {
		log.Error("agent failed", "error", err)
		return hostagent.ExitRuntime
	}
	return hostagent.ExitOK
}

// reloadOnHUP re-reads the configuration on every SIGHUP: a new log level
// is applied; any other changed key is logged as needing a restart. A
// configuration with problems changes nothing.
func reloadOnHUP(ctx context.Context, running *flag.FlagSet, args []string, log hclog.Logger) func() {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case <-hup:
				reread, reload, restart, err := binary.Reread(running, func() *flag.FlagSet { fs, _ := serveFlags(io.Discard); return fs }, args, os.Getenv)
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

// configCmd is `latch-hostagent config validate FILE`.
func configCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "validate" {
		fmt.Fprintln(stderr, "usage: latch-hostagent config validate FILE")
		return hostagent.ExitUsage
	}
	if _, _, err := parseServe([]string{"--config", args[1]}, stderr); err != nil {
		fmt.Fprintf(stderr, "latch-hostagent config validate: %s:\n%v\n", args[1], err)
		return hostagent.ExitUsage
	}
	fmt.Fprintf(stdout, "%s: valid latch-hostagent configuration\n", args[1])
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
