package cli

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/latchhq/latch/internal/testing/testbin"
)

const serveUnit = "../cmd/latch/latch.service"

// TestServeUnit: the shipped unit is valid for systemd and `latch serve`
// accepts its command line (it stops only at the TLS files this machine
// does not have: a runtime error, never a usage error).
func TestServeUnit(t *testing.T) {
	testbin.VerifyUnit(t, serveUnit)
	args := testbin.UnitExecStart(t, serveUnit, t.TempDir())
	if args[0] != "serve" {
		t.Fatalf("latch.service runs latch %s, want serve", args[0])
	}
	out, _ := exec.Command(latchBin, args...).CombinedOutput()
	if !strings.Contains(string(out), "TLS certificate") {
		t.Errorf("latch %s = %s, want it to get as far as loading the TLS certificate", strings.Join(args, " "), out)
	}
}
