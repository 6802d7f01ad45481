package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/internal/buildinfo"
)

// TestCommandTable: every command is registered in the one table and
// listed by `latch help`; an unknown command is a usage error.
func TestCommandTable(t *testing.T) {
	want := []string{"approvals", "audit", "bench", "catalog", "completion", "config", "demo", "dev", "events", "exec", "observe", "operator", "receipt", "serve", "session", "store", "token", "vault", "version"}
	var got []string
	for name := range commandTable() {
		got = append(got, name)
	}
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commandTable() names (-want +got):\n%s", diff)
	}
	var out bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}
	if code := Main(t.Context(), env, []string{"help"}); code != ExitOK {
		t.Fatalf("Main(help) = %d, want %d", code, ExitOK)
	}
	for _, name := range want {
		if !strings.Contains(out.String(), "\n  "+name+" ") {
			t.Errorf("latch help does not list %s:\n%s", name, out.String())
		}
	}
	out.Reset()
	if code := Main(t.Context(), env, []string{"nonsense"}); code != ExitUsage || !strings.Contains(out.String(), `unknown command "nonsense"`) {
		t.Errorf("Main(nonsense) = %d, %q; want %d and the unknown command named", code, out.String(), ExitUsage)
	}
}

// flagLineRE is a flag.PrintDefaults name line: "-name" and at most one
// placeholder word (a backquoted phrase in a usage string would become a
// stray multi-word placeholder, like "-data latch dev").
var flagLineRE = regexp.MustCompile(`^  -[a-z][a-z0-9-]*( [a-zA-Z_]+)?$`)

// TestEveryCommandHasHelp walks every command and every subcommand its -h
// lists: -h and --help exit 0 with the usage on stdout and nothing on
// stderr, and every flag line is a flag name and at most one word.
func TestEveryCommandHasHelp(t *testing.T) {
	env := func(out, errOut *bytes.Buffer) *Env {
		return &Env{Stdout: out, Stderr: errOut, Getenv: func(string) string { return "" }}
	}
	check := func(t *testing.T, args []string, wantPrefix string) string {
		t.Helper()
		var text string
		for _, h := range []string{"-h", "--help"} {
			var out, errOut bytes.Buffer
			code := Main(t.Context(), env(&out, &errOut), append(append([]string{}, args...), h))
			if code != ExitOK || errOut.Len() != 0 || !strings.HasPrefix(out.String(), wantPrefix) {
				t.Errorf("latch %s %s = exit %d, stdout %q, stderr %q; want exit 0 and stdout starting %q", strings.Join(args, " "), h, code, out.String(), errOut.String(), wantPrefix)
			}
			for _, line := range strings.Split(out.String(), "\n") {
				if strings.HasPrefix(line, "  -") && !flagLineRE.MatchString(line) {
					t.Errorf("latch %s %s: flag line %q has stray words", strings.Join(args, " "), h, line)
				}
			}
			text = out.String()
		}
		return text
	}
	subsSeen := 0
	for name := range commandTable() {
		t.Run(name, func(t *testing.T) {
			top := check(t, []string{name}, "Usage: latch "+name)
			for _, sub := range helpSubcommands(name, top) {
				subsSeen++
				check(t, []string{name, sub}, "Usage: latch "+name+" "+sub)
			}
		})
	}
	if subsSeen < 15 {
		t.Errorf("walked %d subcommands, want the admin commands' subcommands (at least 15)", subsSeen)
	}
	for _, args := range [][]string{{"help", "-h"}, {"-h", "--help"}, {"help", "help"}} {
		var out bytes.Buffer
		if code := Main(t.Context(), env(&out, &out), args); code != ExitOK || !strings.Contains(out.String(), "Commands:") {
			t.Errorf("latch %s = %d, %q; want the command list", strings.Join(args, " "), code, out.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), env(&out, &errOut), []string{"help", "exec", "list"}); code != ExitOK || !strings.HasPrefix(out.String(), "Usage: latch exec list") {
		t.Errorf("latch help exec list = %d, %q; want the usage of exec list", code, out.String())
	}
}

func TestVersionAndCompletion(t *testing.T) {
	var out, errOut bytes.Buffer
	e := &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
	if code := Main(t.Context(), e, []string{"version", "--json"}); code != ExitOK {
		t.Fatalf("latch version --json = %d, %s", code, errOut.String())
	}
	var v buildinfo.Info
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version == "" || !strings.HasPrefix(v.GoVersion, "go") {
		t.Errorf("latch version --json = %s (%v); want a version and the Go version", out.String(), err)
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out.Reset()
		if code := Main(t.Context(), e, []string{"completion", shell}); code != ExitOK {
			t.Fatalf("latch completion %s = %d, %s", shell, code, errOut.String())
		}
		for _, word := range []string{"approvals", "resolve", "--not-executed", "watch"} {
			if !strings.Contains(out.String(), strings.TrimPrefix(word, "--")) {
				t.Errorf("latch completion %s does not offer %s", shell, word)
			}
		}
	}
	if code := Main(t.Context(), e, []string{"completion", "tcsh"}); code != ExitUsage {
		t.Errorf("latch completion tcsh = %d, want %d", code, ExitUsage)
	}
}
