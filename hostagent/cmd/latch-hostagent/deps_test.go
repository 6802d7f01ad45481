package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDeps enforces the import rule: the host agent links neither the control
// plane, nor the MCP front, nor the MCP SDK.
func TestDeps(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	forbidden := []string{
		"github.com/latchhq/latch/controlplane",
		"github.com/latchhq/latch/mcpfront",
		"github.com/modelcontextprotocol/go-sdk",
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps returned %d packages, want the full list", len(deps))
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("latch-hostagent depends on %s (forbidden prefix %s)", d, f)
			}
		}
	}
}
