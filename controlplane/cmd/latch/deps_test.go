package main

import (
	"testing"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// TestDeps enforces the import rule: the control plane's binary (which also
// embeds the MCP front and a host agent for `latch dev`) links no test
// support, and not the standard library's testing.
func TestDeps(t *testing.T) {
	testbin.ForbidDeps(t, testbin.TestSupport...)
}
