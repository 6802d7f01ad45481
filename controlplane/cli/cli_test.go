package cli

import (
	"bytes"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCommandTable: every command is registered in the one table and
// listed by `latch help`; an unknown command is a usage error.
func TestCommandTable(t *testing.T) {
	want := []string{"approvals", "audit", "catalog", "demo", "dev", "exec", "serve", "session", "token", "vault"}
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
