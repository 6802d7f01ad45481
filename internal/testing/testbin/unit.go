package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// UnitExecStart returns the arguments of a systemd unit's ExecStart line
// (continuations joined), after the binary, with ${CREDENTIALS_DIRECTORY}
// replaced by credDir.
func UnitExecStart(tb testing.TB, unitFile, credDir string) []string {
	tb.Helper()
	b, err := os.ReadFile(unitFile)
	if err != nil {
		tb.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	m := regexp.MustCompile(`(?m)^ExecStart=(.*)$`).FindStringSubmatch(text)
	if m == nil {
		tb.Fatalf("%s has no ExecStart line", unitFile)
	}
	fields := strings.Fields(strings.ReplaceAll(m[1], "${CREDENTIALS_DIRECTORY}", credDir))
	return fields[1:]
}

// VerifyUnit runs `systemd-analyze verify` on a copy of the unit whose
// ExecStart binary is /bin/true (the real one is not installed) and fails
// tb on any complaint. Skips when systemd-analyze is not installed.
func VerifyUnit(tb testing.TB, unitFile string) {
	tb.Helper()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		tb.Skip("systemd-analyze is not installed")
	}
	b, err := os.ReadFile(unitFile)
	if err != nil {
		tb.Fatal(err)
	}
	text := regexp.MustCompile(`(?m)^ExecStart=\S+`).ReplaceAllString(string(b), "ExecStart=/bin/true")
	dir := tb.TempDir()
	copyPath := filepath.Join(dir, filepath.Base(unitFile))
	if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
		tb.Fatal(err)
	}
	out, err := exec.Command(sa, "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		tb.Errorf("systemd-analyze verify %s: %v\n%s", filepath.Base(unitFile), err, out)
	}
}
