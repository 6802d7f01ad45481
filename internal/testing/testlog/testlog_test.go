package testlog

import (
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestLoggedKeepsWhatPassesTheLevel(t *testing.T) {
	log := New(t, hclog.Info)
	log.Debug("below the level")
	log.Named("sub").With("k", "v").Info("kept")
	got := log.Logged()
	if strings.Contains(got, "below the level") || !strings.Contains(got, "test.sub: kept: k=v") {
		t.Errorf("Logged() = %q, want the info line of the derived logger only", got)
	}
}

// TestNoLogAfterCleanup: a line logged after the test's cleanups (a
// goroutine the test left behind) is kept but not passed to t.Log, which
// would panic.
func TestNoLogAfterCleanup(t *testing.T) {
	var log *Logger
	t.Run("inner", func(t *testing.T) { log = New(t, hclog.Trace) })
	log.Info("late")
	if !strings.Contains(log.Logged(), "late") {
		t.Errorf("Logged() = %q, want the late line kept", log.Logged())
	}
}
