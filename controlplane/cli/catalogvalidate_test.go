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
	if out, code := run(); code != ExitUsage {
		t.Errorf("validate with no file = %d, %q; want %d", code, out, ExitUsage)
	}
	if out, code := run(filepath.Join(t.TempDir(), "missing.yaml")); code != 1 || !strings.Contains(out, "missing.yaml") {
		t.Errorf("validate(missing) = %d, %q; want 1 naming the file", code, out)
	}
}
