package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateCLIRef = flag.Bool("update-cli-ref", false, "rewrite docs/reference/cli.md from the commands' help")

// cliReferencePath is the generated CLI reference, from this package.
var cliReferencePath = filepath.Join("..", "..", "docs", "reference", "cli.md")

// TestCLIReferenceIsCurrent keeps docs/reference/cli.md the commands' own
// help (the flag sets): a flag added, renamed or re-described without the
// reference regenerated fails here. Regenerate with
// go test ./controlplane/cli -run TestCLIReferenceIsCurrent -update-cli-ref.
func TestCLIReferenceIsCurrent(t *testing.T) {
	help := func(args ...string) string {
		var out, errOut bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
		if code := Main(t.Context(), env, append(args, "-h")); code != ExitOK {
			t.Fatalf("latch %s -h = exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return strings.TrimRight(out.String(), "\n")
	}
	var names []string
	for name := range commandTable() {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("# `latch` command reference\n\n")
	b.WriteString("Generated from the commands' own help (their flag sets) by\n")
	b.WriteString("`go test ./controlplane/cli -run TestCLIReferenceIsCurrent -update-cli-ref`; the test fails when\n")
	b.WriteString("this page is stale. `latch help`, `latch CMD -h` and `latch CMD SUB -h` print the same.\n\nThe connection flags (`--data`, `--addr`, `--tls-ca`, `--tls-cert`, `--tls-key`) go before or after\nthe subcommand: `latch approvals --data D list` is `latch approvals list --data D`.\nWhat each command prints with `--json`: [`--json` output](cli-json.md).\n")
	for _, name := range names {
		top := help(name)
		fmt.Fprintf(&b, "\n## latch %s\n\n```\n%s\n```\n", name, top)
		for _, sub := range helpSubcommands(name, top) {
			fmt.Fprintf(&b, "\n### latch %s %s\n\n```\n%s\n```\n", name, sub, help(name, sub))
		}
	}
	got := b.String()
	if *updateCLIRef {
		if err := os.WriteFile(cliReferencePath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(cliReferencePath)
	if err != nil {
		t.Fatalf("%v (generate it with -update-cli-ref)", err)
	}
	if string(want) != got {
		t.Errorf("%s is stale: regenerate it with go test ./controlplane/cli -run TestCLIReferenceIsCurrent -update-cli-ref", cliReferencePath)
	}
}
