package agent

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestListenRefusesALongPath: a socket path Linux cannot bind is refused
// with its length and what to do, not bind's "invalid argument".
func TestListenRefusesALongPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), strings.Repeat("d", 120), "agent.sock")
	_, err := Listen(path, 0o600)
	if err == nil || !strings.Contains(err.Error(), "at most 107") || !strings.Contains(err.Error(), "--socket") {
		t.Fatalf("Listen(%d-byte path) = %v, want a refusal naming the limit and --socket", len(path), err)
	}
}
