package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// heldUpstream is a catalog addition whose upstream exits at once: its one
// tool is held ("upstream gone was not reached").
const heldUpstream = `upstreams:
  gone:
    transport: stdio
    command: [/bin/false]
`

const heldTool = `  gone.lookup:
    upstream: gone
    tool: lookup
    replay: review
`

// writeHeldCatalog writes the e2e catalog with a held upstream tool.
func writeHeldCatalog(t *testing.T, url string) string {
	t.Helper()
	p := writeCatalog(t, url)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "\ntools:\n", "\n"+heldUpstream+"tools:\n", 1) + heldTool
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCatalogStatusListsToolsAndHeld: latch catalog status shows the
// catalog in force (version, source, when and why it came into force), its
// tools and each held tool with why; a reload that holds a tool exits
// non-zero unless --allow-held; status itself exits 0.
func TestCatalogStatusListsToolsAndHeld(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeHeldCatalog(t, url)
	data := t.TempDir()
	startServe(t, data, catalog)

	out, code := runCLI(t, "catalog", "status", "--data", data)
	t.Logf("latch catalog status:\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^catalog sha256:[0-9a-f]{64}$`),
		regexp.MustCompile(`(?m)^source  ` + regexp.QuoteMeta(catalog) + `$`),
		regexp.MustCompile(`(?m)^in force since \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ \(start\)$`),
		regexp.MustCompile(`(?m)^2 tool\(s\) in force:$`),
		regexp.MustCompile(`(?m)^  create_ticket  target tickets \(http\), replay status_query$`),
		regexp.MustCompile(`(?m)^  deploy_release  target releases \(http\), replay idempotency_key$`),
		regexp.MustCompile(`(?m)^1 tool\(s\) held: .*latch catalog reload\)?:$`),
		regexp.MustCompile(`(?m)^  gone\.lookup: upstream gone was not reached`),
	} {
		if !want.MatchString(out) {
			t.Errorf("catalog status = %d:\n%s\nwant a line matching %s", code, out, want)
		}
	}
	if code != 0 {
		t.Errorf("catalog status exit = %d, want 0 (status reports; reload refuses)", code)
	}

	// The global flags work before the subcommand, and --json is the
	// documented shape.
	out, code = runCLI(t, "catalog", "--data", data, "status", "--json")
	var st catalogStatusJSON
	dec := json.NewDecoder(bytes.NewReader([]byte(out)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || code != 0 {
		t.Fatalf("catalog status --json = %d, %v:\n%s", code, err, out)
	}
	if len(st.Tools) != 2 || len(st.Held) != 1 || st.Held[0].Tool != "gone.lookup" || st.Trigger != "start" || !strings.HasPrefix(st.Version, "sha256:") {
		t.Errorf("catalog status --json = %+v; want 2 tools, gone.lookup held, trigger start", st)
	}

	// A reload holding a tool says so and exits non-zero; then status
	// names the reload.
	if out, code := runCLI(t, "catalog", "reload", "--data", data); code == 0 || !strings.Contains(out, "gone.lookup: upstream gone was not reached") || !strings.Contains(out, "--allow-held") {
		t.Errorf("catalog reload with a held tool = %d:\n%s\nwant non-zero naming gone.lookup and --allow-held", code, out)
	}
	// A catalog without the held tool: status shows none held.
	if err := os.WriteFile(catalog, []byte(strings.Replace(mustRead(t, catalog), heldTool, "", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, code := runCLI(t, "catalog", "reload", "--data", data); code != 0 {
		t.Fatalf("catalog reload without the held tool = %d:\n%s", code, out)
	}
	out, _ = runCLI(t, "catalog", "status", "--data", data)
	if !strings.Contains(out, "no tool is held") || !regexp.MustCompile(`(?m)^in force since \S+ \(reload\)$`).MatchString(out) {
		t.Errorf("catalog status after a clean reload:\n%s\nwant no tool held, in force since the reload", out)
	}

	// A host agent on an SSH host: its socket cannot be checked from here,
	// so the reload says so (file:line) and takes the catalog.
	text := strings.Replace(mustRead(t, catalog), "\ntargets:\n", "\ntargets:\n  far:\n    channel: ssh\n    address: db1.example.test:22\n    user: deploy\n    host_key: ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n    hostagent_socket: /run/latch-hostagent.sock\n", 1) +
		"  migrate:\n    target: far\n    command: [/usr/local/bin/migrate]\n    replay: status_query\n"
	if err := os.WriteFile(catalog, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	line := 1 + strings.Count(text[:strings.Index(text, "    hostagent_socket:")], "\n")
	out, code = runCLI(t, "catalog", "reload", "--data", data)
	if want := fmt.Sprintf("warning: %s:%d: target far: hostagent_socket /run/latch-hostagent.sock is on db1.example.test:22 and is not checked at load", catalog, line); code != 0 || !strings.Contains(out, want) {
		t.Errorf("catalog reload with an SSH host agent = %d:\n%s\nwant exit 0 and %q", code, out, want)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Clean(p))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
