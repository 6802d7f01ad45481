package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
)

// cmdInfo is one command for completion: its subcommands and flags, read
// from the command's own -h output, so completion never drifts from it.
type cmdInfo struct {
	name  string
	subs  []string
	flags map[string][]string // subcommand ("" for the command) -> flags
}

// commandTree asks every command (and subcommand) for its -h.
func commandTree(ctx context.Context, env *Env) []cmdInfo {
	names := make([]string, 0)
	for n := range commandTable() {
		names = append(names, n)
	}
	sort.Strings(names)
	help := func(args ...string) string {
		var out bytes.Buffer
		Main(ctx, &Env{Stdout: &out, Stderr: io.Discard, Getenv: env.Getenv}, append(args, "-h"))
		return out.String()
	}
	var tree []cmdInfo
	for _, n := range names {
		ci := cmdInfo{name: n, flags: map[string][]string{}}
		top := help(n)
		ci.subs = helpSubcommands(n, top)
		if len(ci.subs) == 0 {
			ci.flags[""] = helpFlags(top)
		}
		for _, s := range ci.subs {
			ci.flags[s] = helpFlags(help(n, s))
		}
		tree = append(tree, ci)
	}
	return tree
}

// helpSubcommands reads "  latch CMD SUB ..." lines of a subcommand list.
func helpSubcommands(cmd, out string) []string {
	var subs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "latch" && f[1] == cmd && strings.HasPrefix(line, "  ") && f[2] != "SUBCOMMAND" {
			if len(subs) == 0 || subs[len(subs)-1] != f[2] {
				subs = append(subs, f[2])
			}
		}
	}
	return subs
}

// helpFlags reads the "  -name" lines of flag.PrintDefaults.
func helpFlags(out string) []string {
	var flags []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "  -") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "  -"), " ")
			flags = append(flags, "--"+name)
		}
	}
	return flags
}

func runCompletion(ctx context.Context, env *Env, args []string) error {
	fs := newFlagSet(env, "completion", "completion bash|zsh|fish\n\nPrints a completion script. Load it with:\n  bash: source <(latch completion bash)\n  zsh:  source <(latch completion zsh)\n  fish: latch completion fish | source")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("completion needs one shell: bash, zsh or fish")
	}
	tree := commandTree(ctx, env)
	switch pos[0] {
	case "bash":
		writeBash(env.Stdout, tree, false)
	case "zsh":
		writeBash(env.Stdout, tree, true)
	case "fish":
		writeFish(env.Stdout, tree)
	default:
		return usagef("completion: unknown shell %q (want bash, zsh or fish)", pos[0])
	}
	return nil
}

func writeBash(w io.Writer, tree []cmdInfo, zsh bool) {
	if zsh {
		fmt.Fprintln(w, "#compdef latch\nautoload -U +X bashcompinit && bashcompinit")
	}
	var cmds []string
	for _, c := range tree {
		cmds = append(cmds, c.name)
	}
	fmt.Fprintf(w, `_latch() {
  local cur="${COMP_WORDS[COMP_CWORD]}" cmd="${COMP_WORDS[1]}" sub="${COMP_WORDS[2]}" words=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W %q -- "$cur"))
    return
  fi
  case "$cmd" in
`, strings.Join(cmds, " ")+" help")
	for _, c := range tree {
		fmt.Fprintf(w, "    %s)\n", c.name)
		if len(c.subs) == 0 {
			fmt.Fprintf(w, "      words=%q ;;\n", strings.Join(c.flags[""], " "))
			continue
		}
		fmt.Fprintf(w, "      if [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", strings.Join(c.subs, " "))
		fmt.Fprintln(w, "      case \"$sub\" in")
		for _, s := range c.subs {
			fmt.Fprintf(w, "        %s) words=%q ;;\n", s, strings.Join(c.flags[s], " "))
		}
		fmt.Fprintln(w, "      esac ;;")
	}
	fmt.Fprint(w, `  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _latch latch
`)
}

func writeFish(w io.Writer, tree []cmdInfo) {
	fmt.Fprintln(w, "complete -c latch -f")
	var cmds []string
	for _, c := range tree {
		cmds = append(cmds, c.name)
	}
	fmt.Fprintf(w, "complete -c latch -n '__fish_use_subcommand' -a '%s help'\n", strings.Join(cmds, " "))
	for _, c := range tree {
		if len(c.subs) == 0 {
			for _, f := range c.flags[""] {
				fmt.Fprintf(w, "complete -c latch -n '__fish_seen_subcommand_from %s' -l %s\n", c.name, strings.TrimPrefix(f, "--"))
			}
			continue
		}
		fmt.Fprintf(w, "complete -c latch -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a '%s'\n", c.name, strings.Join(c.subs, " "), strings.Join(c.subs, " "))
		for _, s := range c.subs {
			for _, f := range c.flags[s] {
				fmt.Fprintf(w, "complete -c latch -n '__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s' -l %s\n", c.name, s, strings.TrimPrefix(f, "--"))
			}
		}
	}
}
