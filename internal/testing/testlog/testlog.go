// Package testlog is the hclog logger of unit tests: every line goes
// through t.Log (shown with the test that logged it, when it fails or runs
// with -v), a copy is kept for tests that check what was logged (that no
// secret was, above all), and nothing is written once the test's cleanups
// have run, when t.Log would panic on a late line from a goroutine the
// test started. Test code only: no binary may link it
// (internal/testing/testbin.TestSupport).
package testlog

import (
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// Logger is an hclog.Logger that logs through a test and remembers what
// it logged.
type Logger struct {
	hclog.Logger
	w *writer
}

// New returns a logger named "test" at level that writes through tb.Log
// until tb's cleanups have run.
func New(tb testing.TB, level hclog.Level) *Logger {
	w := &writer{tb: tb}
	tb.Cleanup(w.stop) // registered before the caller's: runs after them
	return &Logger{Logger: hclog.New(&hclog.LoggerOptions{Name: "test", Level: level, Output: w}), w: w}
}

// Logged returns everything the logger (and the loggers derived from it
// with Named or With) has written so far.
func (l *Logger) Logged() string {
	l.w.mu.Lock()
	defer l.w.mu.Unlock()
	return l.w.buf.String()
}

type writer struct {
	tb   testing.TB
	mu   sync.Mutex
	buf  strings.Builder
	done bool
}

func (w *writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done {
		w.tb.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}

func (w *writer) stop() {
	w.mu.Lock()
	w.done = true
	w.mu.Unlock()
}
