package testbin

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/latchhq/latch/internal/config"
)

// ConfigReference is docs/reference/config.md, from a package two levels
// below the repository root.
var ConfigReference = filepath.Join("..", "..", "..", "docs", "reference", "config.md")

// CheckConfigReference fails tb unless the generated section name of the
// document at path is content; with update it rewrites the section first.
func CheckConfigReference(tb testing.TB, path, name, content string, update bool) {
	tb.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if update {
		if doc, err = config.ReplaceSection(doc, name, content); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, doc, 0o600); err != nil { //nolint:gosec // a test rewriting a document of this repository (-update-config-ref); it exists, so its mode stays
			tb.Fatal(err)
		}
	}
	got, err := config.Section(doc, name)
	if err != nil {
		tb.Fatal(err)
	}
	if got != content {
		tb.Errorf("%s: the %s keys are stale (a flag was added, renamed or re-described): regenerate with go test ./controlplane/cli ./mcpfront/cmd/latch-mcp ./hostagent/cmd/latch-hostagent -run TestConfigReference -update-config-ref", path, name)
	}
}
