// Package cli implements the `latch` command: serve, dev, and the admin and
// audit commands. Admin commands reach a running control plane through the
// gRPC socket in its data dir (or --addr / LATCH_ADDR); only `audit` reads
// files directly, and only offline.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitRuntime = 1
	ExitUsage   = 2
)

// Env is what a command may touch: its streams and environment.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

type command struct {
	summary string
	run     func(ctx context.Context, env *Env, args []string) error
}

// commandTable is every latch command, in one place: registration does not
// depend on the order in which Go runs the init functions of this package's
// files. A function, not a package variable, so that no command's code can
// form an initialization cycle with the table.
func commandTable() map[string]command {
	return map[string]command{
		"serve":      {"run the control plane: latch serve --data DIR --catalog FILE", runServe},
		"config":     {"check latch serve's config file: config validate FILE (keys, types, secrets only by reference; exit 2 on any problem)", runConfig},
		"dev":        {"run the whole stack on an embedded default: latch dev [--data DIR] [--listen ADDR] [--catalog FILE]", runDev},
		"exec":       {"inspect and resolve executions: list | show ID | explain ID | receipt ID | resolve ID", runExec},
		"receipt":    {"check a receipt offline, without trusting Latch: verify FILE --key PUB", runReceipt},
		"approvals":  {"decide executions awaiting approval: list | show ID | approve ID | deny ID --reason R", runApprovals},
		"audit":      {"the journal offline: verify DATA_DIR | verify --export FILE | export DATA_DIR | prove DATA_DIR ACT_ID", runAudit},
		"demo":       {"drive a running `latch dev` through the dropped-connection story", runDemo},
		"session":    {"agent sessions: list | authorize ID | revoke ID --reason R", runSession},
		"vault":      {"the credential vault: status | unlock [--init] | lock | put NAME --kind K | list", runVault},
		"token":      {"bearer tokens for agents, in the control plane's store: create ACTOR [--ttl D] (printed once) | list [--all] | revoke ID|ACTOR", runToken},
		"operator":   {"operators' console tokens, in the control plane's store: token create NAME [--ttl D] (printed once) | token list [--all] | token revoke ID|NAME", runOperator},
		"catalog":    {"the tool catalog: validate FILE... (offline, every problem as file:line), import openapi SPEC (offline: catalog tools from an OpenAPI 3.0/3.1 description, each marked for review), and of the running control plane: reload (validated first; a bad catalog changes nothing), status (the catalog in force: version, when loaded, tools, held tools and why), upstream-tools NAME (what an upstream MCP server offers, with contract stubs), upstream-tools accept TOOL (accept a held change of an upstream tool, showing the diff)", runCatalog},
		"version":    {"print the version, VCS revision and Go version: latch version [--json]", runVersion},
		"completion": {"print a shell completion script: latch completion bash|zsh|fish", runCompletion},
		"bench":      {"what a call costs on this machine: direct vs durable vs MCP path against the demo target: latch bench [--concurrency N] [--count N] [--data DIR]", runBench},
		"events":     {"the event outbox of the running control plane: list [--pending|--dead] (each sink's delivery state) | replay [ID...] (dead letters, or the events named, again under the same IDs) | test SINK (send a signed test event now)", runEvents},
		"store":      {"the PostgreSQL store: migrate --store URL | status --store URL", runStore},
		"observe":    {"what enforcement would have done with the calls of tools in observe mode: report [--since 24h] (per tool: calls, would-attach duplicates and how many reached the target twice, new request ids and sessions, concurrent duplicates, the time between each pair, and whether the tool is ready to enforce)", runObserve},
	}
}

// usageError marks bad arguments (exit 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// Main runs the latch command line and returns the exit code.
func Main(ctx context.Context, env *Env, args []string) int {
	if env.Getenv == nil {
		env.Getenv = os.Getenv
	}
	commands := commandTable()
	if len(args) == 0 {
		printUsage(env.Stderr, commands)
		return ExitUsage
	}
	if isHelp(args[0]) {
		if len(args) > 1 && !isHelp(args[1]) {
			// latch help CMD [SUB] is latch CMD [SUB] -h.
			return Main(ctx, env, append(args[1:], "-h"))
		}
		printUsage(env.Stdout, commands)
		return ExitOK
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "latch: unknown command %q\n\n", args[0])
		printUsage(env.Stderr, commands)
		return ExitUsage
	}
	err := c.run(ctx, env, args[1:])
	var ue *usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &ue):
		fmt.Fprintf(env.Stderr, "latch %s: %v\n", args[0], err)
		return ExitUsage
	case errors.Is(err, errSilent):
		return ExitRuntime
	default:
		fmt.Fprintf(env.Stderr, "latch %s: %v\n", args[0], err)
		return ExitRuntime
	}
}

// errSilent: the command already said what was wrong.
var errSilent = errors.New("failed")

func printUsage(w io.Writer, commands map[string]command) {
	fmt.Fprintln(w, "latch: an execution gateway that turns agent retries into one action.\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-11s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nRun `latch COMMAND -h` for a command's flags.")
}

// parse parses flags that may come before or after positional arguments and
// returns the positionals; everything after a "--" is positional (latch dev
// --observe-upstream -- COMMAND ARGS).
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				// Parse already called fs.Usage (newFlagSet's prints to
				// the command's stdout).
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		args = rest
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
