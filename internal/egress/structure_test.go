package egress

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// outboundHTTP matches code that builds an outbound HTTP transport or
// client, or uses net/http's shared ones, outside this package.
var outboundHTTP = regexp.MustCompile(`http\.(Transport|Client)\{|http\.Default(Client|Transport)\b|http\.(Get|Post|PostForm|Head)\(`)

// notEgress are the production files allowed to: the latch CLI's demo
// command and the bench harness, which talk to the local dev stack they started (its MCP
// front and demo target on loopback), not to anything a catalog, a vault or
// an issuer names.
var notEgress = []string{
	"controlplane/bench/bench.go",
	"controlplane/cli/demo.go",
}

// TestOnlyEgressBuildsClients enforces the package's rule: production code
// builds its outbound HTTP transports and clients here, so every one of
// them has the address policy and the redirect rule.
func TestOnlyEgressBuildsClients(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" || rel == "internal/egress" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || slices.Contains(notEgress, rel) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if trimmed := strings.TrimSpace(line); strings.HasPrefix(trimmed, "//") {
				continue
			}
			if outboundHTTP.MatchString(line) {
				t.Errorf("%s:%d builds an outbound HTTP client outside internal/egress: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked %d files, want the whole module", checked)
	}
}
