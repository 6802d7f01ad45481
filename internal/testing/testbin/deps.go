package testbin

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// ForbidDeps fails t when the package in the current directory (a test's
// working directory is its package's) links any package under one of the
// forbidden import path prefixes. It enforces the import rules of docs/contributing/package-map.md.
func ForbidDeps(t *testing.T, forbidden ...string) {
	t.Helper()
	ForbidDepsExcept(t, nil, forbidden...)
}

// ForbidDepsExcept is ForbidDeps with exceptions: a package whose import
// path is exactly one of allowed may be linked although a forbidden prefix
// covers it. An exception names one package, never a tree, so whatever that
// package starts to import is checked like the rest.
func ForbidDepsExcept(t *testing.T, allowed []string, forbidden ...string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list -deps returned %d packages, want the full list", len(deps))
	}
	for _, d := range deps {
		if slices.Contains(allowed, d) {
			continue
		}
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				t.Errorf("this binary depends on %s (forbidden prefix %s)", d, f)
			}
		}
	}
}

// TestSupport lists the packages that exist only for tests: the standard
// library's testing, the test-support tree internal/testing (every package
// under it: helpers, contract suites, example kinds) and the two fault
// suites. No binary may link them: each binary's deps test forbids them
// with ForbidDeps(t, append(TestSupport, ...)...), which matches prefixes.
var TestSupport = []string{
	"testing",
	"github.com/latchhq/latch/internal/testing",
	"github.com/latchhq/latch/controlplane/faultsuite",
	"github.com/latchhq/latch/controlplane/failover",
}
