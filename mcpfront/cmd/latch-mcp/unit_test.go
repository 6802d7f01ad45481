package main

import (
	"io"
	"testing"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// TestUnit: the shipped unit is valid for systemd and its command line
// parses.
func TestUnit(t *testing.T) {
	testbin.VerifyUnit(t, "latch-mcp.service")
	args := testbin.UnitExecStart(t, "latch-mcp.service", t.TempDir())
	if _, err := parseFlags(args, io.Discard); err != nil {
		t.Errorf("latch-mcp.service: parseFlags(%q) = %v", args, err)
	}
}
