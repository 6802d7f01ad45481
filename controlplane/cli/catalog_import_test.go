package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCatalogImportOpenAPI: `latch catalog import openapi` writes a catalog
// that `latch catalog validate` accepts, prints the counts per replay class
// to stderr, and refuses bad arguments with a usage error.
func TestCatalogImportOpenAPI(t *testing.T) {
	spec := filepath.Join("..", "..", "tools", "openapi", "testdata", "payments.yaml")
	run := func(stdin string, args ...string) (stdout, stderr string, code int) {
		var out, errOut bytes.Buffer
		env := &Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut, Getenv: func(string) string { return "" }}
		code = Main(t.Context(), env, args)
		return out.String(), errOut.String(), code
	}
	file := filepath.Join(t.TempDir(), "payments.catalog.yaml")
	out, errOut, code := run("", "catalog", "import", "openapi", spec, "--target", "payments", "-o", file)
	if code != ExitOK {
		t.Fatalf("import = %d: %s%s", code, out, errOut)
	}
	want := "12 operations: read_only 4, idempotency_key 1, status_query (proposed) 1, review 4, skipped 2\n"
	if !strings.HasPrefix(errOut, want) {
		t.Errorf("import stderr = %q, want it to start with %q", errOut, want)
	}
	if out != "" {
		t.Errorf("import -o wrote %q to stdout", out)
	}
	if out, errOut, code := run("", "catalog", "validate", file); code != ExitOK {
		t.Errorf("validate(imported) = %d: %s%s", code, out, errOut)
	}
	// Standard input in, standard output out.
	b, err := os.ReadFile(spec)
	if err != nil {
		t.Fatal(err)
	}
	out, _, code = run(string(b), "catalog", "import", "openapi", "-", "--target", "payments", "--status-path", "/lookups/{execution_id}")
	if code != ExitOK || !strings.Contains(out, "status: {method: GET, path: '/lookups/{execution_id}'}") {
		t.Errorf("import - = %d, catalog:\n%s", code, out)
	}
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no target", []string{spec}, ExitUsage, "needs --target"},
		{"no spec", []string{"--target", "x"}, ExitUsage, "needs one description"},
		{"other format", nil, ExitUsage, "knows one format"},
		{"missing file", []string{"nope.yaml", "--target", "x"}, ExitRuntime, "no such file"},
		{"bad target", []string{spec, "--target", "Not A Name"}, ExitRuntime, "target name"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"catalog", "import", "openapi"}, c.args...)
			if c.name == "other format" {
				args = []string{"catalog", "import", "raml", spec}
			}
			out, errOut, code := run("", args...)
			if code != c.code || !strings.Contains(out+errOut, c.says) {
				t.Errorf("latch %s = %d, %q; want %d saying %q", strings.Join(args, " "), code, out+errOut, c.code, c.says)
			}
		})
	}
}
