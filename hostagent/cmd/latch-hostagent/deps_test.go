package main

import (
	"testing"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// TestDeps enforces the import rule: the host agent links neither the control
// plane, nor the MCP front, nor the MCP SDK, nor any test support.
func TestDeps(t *testing.T) {
	testbin.ForbidDeps(t, append([]string{
		"github.com/latchhq/latch/controlplane",
		"github.com/latchhq/latch/mcpfront",
		"github.com/modelcontextprotocol/go-sdk",
	}, testbin.TestSupport...)...)
}
