package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// isHelp reports whether a is a request for help.
func isHelp(a string) bool {
	return a == "-h" || a == "-help" || a == "--help" || a == "help"
}

// newFlagSet is a command's flag set whose -h/--help prints
// "Usage: latch SYNOPSIS" and the flags to stdout (parse returns
// flag.ErrHelp, which Main turns into exit 0).
func newFlagSet(env *Env, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() { printFlagUsage(env.Stdout, fs, synopsis) }
	return fs
}

func printFlagUsage(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(w, "Usage: latch %s\n", synopsis)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

// alternatives splits a subcommand usage ("list | show ID | revoke ID|ACTOR")
// into its alternatives ("list", "show ID", "revoke ID|ACTOR").
func alternatives(usage string) []string {
	parts := strings.Split(usage, " | ")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

// subcommandNames are the first words of the alternatives.
func subcommandNames(usage string) []string {
	var names []string
	for _, a := range alternatives(usage) {
		name, _, _ := strings.Cut(a, " ")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// subcommandSynopsis is "CMD SUB ARGS [flags]" for sub, from usage.
func subcommandSynopsis(cmd, sub, usage string) string {
	for _, a := range alternatives(usage) {
		if name, _, _ := strings.Cut(a, " "); name == sub {
			return cmd + " " + a + " [flags]"
		}
	}
	return cmd + " " + sub + " [flags]"
}

// splitSubcommand takes a command's subcommand from args. No subcommand is a
// usage error listing them; -h/--help prints them to stdout (flag.ErrHelp,
// exit 0); an unknown one is a usage error naming the known ones.
func splitSubcommand(env *Env, cmd, usage string, args []string) (string, []string, error) {
	names := subcommandNames(usage)
	if len(args) == 0 {
		return "", nil, usagef("%s needs a subcommand: %s (latch %s -h for more)", cmd, usage, cmd)
	}
	if isHelp(args[0]) {
		printSubcommands(env.Stdout, cmd, usage)
		return "", nil, flag.ErrHelp
	}
	lead, args, err := leadingConnectionFlags(env, cmd, args)
	if err != nil {
		return "", nil, err
	}
	if len(args) == 0 {
		return "", nil, usagef("%s needs a subcommand after %s: %s (latch %s -h for more)", cmd, strings.Join(lead, " "), usage, cmd)
	}
	if !slices.Contains(names, args[0]) {
		return "", nil, usagef("unknown %s subcommand %q (want %s)", cmd, args[0], strings.Join(names, ", "))
	}
	return args[0], append(lead, args[1:]...), nil
}

// leadingConnectionFlags splits off the connection flags (--data, --addr,
// --tls-*) written before a subcommand, as in `latch approvals --data X
// list`, so they can be handed to the subcommand's flag set: the global
// flags work before or after the subcommand. Any other flag there is an
// error that says where it goes.
func leadingConnectionFlags(env *Env, cmd string, args []string) (lead, rest []string, err error) {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return nil, args, nil
	}
	probe := flag.NewFlagSet(cmd, flag.ContinueOnError)
	probe.SetOutput(io.Discard)
	var t target
	t.flags(probe, env)
	if err := probe.Parse(args); errors.Is(err, flag.ErrHelp) {
		return nil, nil, usagef("latch %s: -h goes after the subcommand: latch %s SUBCOMMAND -h", cmd, cmd)
	} else if err != nil {
		return nil, nil, usagef("latch %s: %v; only the connection flags (--data, --addr, --tls-ca, --tls-cert, --tls-key) may come before the subcommand, put the others after it", cmd, err)
	}
	rest = probe.Args()
	lead = args[:len(args)-len(rest)]
	if n := len(lead); n > 0 && lead[n-1] == "--" {
		lead = lead[:n-1]
	}
	return slices.Clip(lead), rest, nil
}

func printSubcommands(w io.Writer, cmd, usage string) {
	fmt.Fprintf(w, "Usage: latch %s SUBCOMMAND [flags]\n\nSubcommands:\n", cmd)
	for _, a := range alternatives(usage) {
		fmt.Fprintf(w, "  latch %s %s\n", cmd, a)
	}
	fmt.Fprintf(w, "\nRun `latch %s SUBCOMMAND -h` for a subcommand's flags.\n", cmd)
}
