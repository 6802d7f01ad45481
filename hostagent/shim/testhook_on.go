//go:build latch_testhooks

package shim

import (
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
)

// testPause is the one test hook of the shim, compiled only into binaries
// built with -tags latch_testhooks (internal/testing/testbin builds the binaries of
// tests that way; a release build never has it). When the shim's environment
// sets LATCH_HOSTAGENT_TEST_SHIM_PAUSE to a Go duration, the shim pauses that
// long (at most a minute) after the command is waiting at the gate and before
// it tells the agent, so a test can kill a shim before the gate opens.
func testPause(log hclog.Logger) {
	v := os.Getenv("LATCH_HOSTAGENT_TEST_SHIM_PAUSE")
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return
	}
	d = min(d, time.Minute)
	log.Warn("test hook: pausing before reporting to the agent", "pause", d)
	time.Sleep(d)
}
