package mcpfront

import (
	"bytes"
	"context"
	"os/exec"
	"testing"
	"time"
)

// conformanceRevision is the MCP revision whose required scenarios
// TestConformanceServer runs (the suite's --requirements).
const conformanceRevision = "2026-07-28"

// TestConformanceServer runs every scenario the official conformance suite
// requires of a server at conformanceRevision against a front. The suite's
// fixture scenarios expect its own tools, prompts and resources (greet,
// slow_compute, test_simple_prompt, …), which a gateway in front of a
// catalog does not have: testdata/conformance/server-expected-failures.yaml
// lists exactly those, each with its reason. Every generic scenario must
// pass.
func TestConformanceServer(t *testing.T) {
	url := conformanceFront(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	args := []string{"node_modules/@modelcontextprotocol/conformance/dist/index.js", "server", "--url", url,
		"--requirements", conformanceRevision, "--timeout", "60000",
		"--expected-failures", "server-expected-failures.yaml"}
	cmd := exec.CommandContext(ctx, "node_modules/.bin/node", args...)
	cmd.Dir = conformanceDir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("conformance --requirements %s:\n%s", conformanceRevision, out.String())
	if err != nil {
		t.Errorf("the conformance suite failed beyond its expected failures (testdata/conformance/server-expected-failures.yaml): %v", err)
	}
}
