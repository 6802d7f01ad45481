package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogValidate: `latch catalog validate` checks files offline with
// the loader's validator: every problem as file:line, exit 1 on any, JSON
// for CI; a good catalog exits 0. No control plane is running here.
func TestCatalogValidate(t *testing.T) {
	good := filepath.Join("..", "..", "tools", "examples", "catalog.yaml")
	bad := filepath.Join("..", "..", "tools", "testdata", "bad", "approval.yaml")
	wantB, err := os.ReadFile(filepath.Join("..", "..", "tools", "testdata", "bad", "approval.want"))
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		env := &Env{Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
		code := Main(t.Context(), env, append([]string{"catalog", "validate"}, args...))
		return out.String() + errOut.String(), code
	}
	if out, code := run(good); code != ExitOK || !strings.Contains(out, "1 catalog file(s) valid") {
		t.Errorf("validate(example) = %d, %q; want %d", code, out, ExitOK)
	}
	out, code := run(good, bad)
	if code != 1 {
		t.Errorf("validate(example, bad) = %d, want 1", code)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(wantB)), "\n") {
		if !strings.Contains(out, line) {
			t.Errorf("validate output %q lacks the loader's problem %q", out, line)
		}
	}
	out, code = run("--json", bad)
	var problems []validateProblem
	if err := json.Unmarshal([]byte(out), &problems); err != nil || code != 1 || len(problems) == 0 || problems[0].Line == 0 {
		t.Errorf("validate --json = %d, %q (%v); want 1 and problems with lines", code, out, err)
	}
	// The example's SSH host agents are warnings (their sockets are on the
	// SSH hosts); a local target's socket is checked here, unless
	// --no-host-checks.
	out, code = run("--json", good)
	problems = nil
	if err := json.Unmarshal([]byte(out), &problems); err != nil || code != ExitOK || len(problems) == 0 || problems[0].Severity != "warning" || !strings.Contains(problems[0].Message, "is not checked at load") {
		t.Errorf("validate --json (example) = %d, %q (%v); want 0 and warnings about the SSH hosts' sockets", code, out, err)
	}
	local := filepath.Join(t.TempDir(), "local.yaml")
	sock := filepath.Join(t.TempDir(), "nothing-here.sock")
	if err := os.WriteFile(local, []byte("targets:\n  here: {channel: local, hostagent_socket: "+sock+"}\ntools:\n  run: {target: here, command: [/bin/true], replay: status_query}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := run(local); code != 1 || !strings.Contains(out, local+":2: target here: hostagent_socket "+sock+" does not exist on this machine") || !strings.Contains(out, "--no-host-checks") {
		t.Errorf("validate(local target, no socket) = %d:\n%s\nwant 1 with %s:2 naming the socket and --no-host-checks", code, out, local)
	}
	if out, code := run("--no-host-checks", local); code != ExitOK {
		t.Errorf("validate --no-host-checks (local target, no socket) = %d:\n%s\nwant %d", code, out, ExitOK)
	}
	if out, code := run(); code != ExitUsage {
		t.Errorf("validate with no file = %d, %q; want %d", code, out, ExitUsage)
	}
	if out, code := run(filepath.Join(t.TempDir(), "missing.yaml")); code != 1 || !strings.Contains(out, "missing.yaml") {
		t.Errorf("validate(missing) = %d, %q; want 1 naming the file", code, out)
	}
}
