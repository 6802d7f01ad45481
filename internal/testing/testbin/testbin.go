// Package testbin builds the project's binaries once per test process and
// collects the output of the processes tests start. Tests of the control
// plane, the host agent and their channels run the real binaries; this is
// the one place that knows how to build them. Test code only.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// TestHooksTag is the build tag that compiles the project's test hooks into a
// binary. Main builds with it; production builds never set it.
const TestHooksTag = "latch_testhooks"

// Main builds each package (an import path of a main package) into a
// temporary directory, sets *paths[i] to the binary, runs the tests and
// removes the binaries. Call it from TestMain. The processes the tests
// start keep their default state (e.g. latch-mcp's delivery reports, under
// XDG_STATE_HOME) in that directory too, never in the user's home, and
// test processes running at once never share it.
func Main(m *testing.M, pkgs []string, paths []*string) {
	dir, err := os.MkdirTemp("", "latch-testbin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state")); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for i, pkg := range pkgs {
		out := filepath.Join(dir, filepath.Base(pkg))
		// The tag compiles in the test hooks (e.g. hostagent/shim
		// testhook_on.go); a release build never has them.
		build := exec.Command("go", "build", "-tags", TestHooksTag, "-o", out, pkg)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n", pkg, err)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		*paths[i] = out
	}
	code := m.Run()
	os.RemoveAll(dir)
	Exit(code)
}

var (
	atExitMu sync.Mutex
	atExit   []func()
)

// AtExit registers fn to run when the tests end (through Main or Exit),
// e.g. to stop a server shared by a package's tests.
func AtExit(fn func()) {
	atExitMu.Lock()
	defer atExitMu.Unlock()
	atExit = append(atExit, fn)
}

// Exit runs the AtExit functions, newest first, and exits with code. A
// TestMain that does not use Main ends with Exit(m.Run()).
func Exit(code int) {
	atExitMu.Lock()
	fns := atExit
	atExit = nil
	atExitMu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
	os.Exit(code)
}

// Buffer is an io.Writer safe for a process's stdout and stderr at once.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
