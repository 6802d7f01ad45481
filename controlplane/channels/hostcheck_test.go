package channels_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/tools"
)

// TestLocalSocketCheckedAtLoad: the control plane's loader (the channel
// kinds' registry) refuses a local target whose hostagent_socket does not
// exist or is not a socket, at the key's line; a socket there loads; the
// socket latch dev serves itself is not checked; --no-host-checks skips the
// check; an SSH host agent's socket is only a warning (it is on the other
// host). The catalog table: each case's target line is line 3.
func TestLocalSocketCheckedAtLoad(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "agent.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "hostagent.sock")
	const hostKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
	local := func(p string) string {
		return fmt.Sprintf("targets:\n  here:\n    channel: local\n    hostagent_socket: %s\ntools:\n  run:\n    target: here\n    command: [/bin/true]\n    replay: status_query\n", p)
	}
	tests := []struct {
		name     string
		catalog  string
		checks   tools.HostChecks
		problem  string // "" when it loads
		warning  string // a warning it loads with
		wantLine int
	}{
		{name: "socket exists", catalog: local(sock)},
		{name: "missing socket", catalog: local(missing), problem: "target here: hostagent_socket " + missing + " does not exist on this machine: start the host agent there", wantLine: 4},
		{name: "missing socket names latch dev's", catalog: local(missing), problem: "latch dev serves DATA/hostagent.sock", wantLine: 4},
		{name: "a regular file", catalog: local(file), problem: "is not a unix socket (it is a regular file)", wantLine: 4},
		{name: "a directory", catalog: local(dir), problem: "is not a unix socket (it is a directory)", wantLine: 4},
		{name: "the socket this process serves", catalog: local(missing), checks: tools.HostChecks{Own: []string{missing}}},
		{name: "no host checks", catalog: local(missing), checks: tools.HostChecks{Skip: true}},
		{name: "no socket at all", catalog: "targets:\n  here:\n    channel: local\ntools:\n  run:\n    target: here\n    command: [/bin/true]\n    replay: status_query\n",
			problem: "hostagent_socket is required for local targets (the host agent's unix socket; latch dev serves one at DATA/hostagent.sock", wantLine: 2},
		{name: "remote agent is a warning", catalog: fmt.Sprintf("targets:\n  far:\n    channel: ssh\n    address: db1:22\n    user: deploy\n    host_key: %s\n    hostagent_socket: %s\ntools:\n  run:\n    target: far\n    command: [/bin/true]\n    replay: status_query\n", hostKey, missing),
			warning: "target far: hostagent_socket " + missing + " is on db1:22 and is not checked at load", wantLine: 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			kinds := channels.Default().Catalog().WithHostChecks(tc.checks)
			cat, err := kinds.Parse("c.yaml", []byte(tc.catalog))
			var le *tools.LoadError
			switch {
			case tc.problem == "" && err != nil:
				t.Fatalf("Parse = %v, want it to load", err)
			case tc.problem != "" && !errors.As(err, &le):
				t.Fatalf("Parse = %v, want a *tools.LoadError with %q", err, tc.problem)
			case tc.problem != "":
				if len(le.Problems) != 1 || !strings.Contains(le.Problems[0].Msg, tc.problem) || le.Problems[0].Line != tc.wantLine {
					t.Errorf("Parse problems = %v, want one at c.yaml:%d containing %q", le.Problems, tc.wantLine, tc.problem)
				}
				return
			}
			if tc.warning == "" {
				if len(cat.Warnings) != 0 {
					t.Errorf("Warnings = %v, want none", cat.Warnings)
				}
				return
			}
			if len(cat.Warnings) != 1 || !strings.Contains(cat.Warnings[0].Msg, tc.warning) || cat.Warnings[0].Line != tc.wantLine {
				t.Errorf("Warnings = %v, want one at c.yaml:%d containing %q", cat.Warnings, tc.wantLine, tc.warning)
			}
		})
	}
	// tools.Parse (the built-in kinds without the control plane's halves)
	// makes no host check: unit tests and fuzzing stay off the filesystem.
	if _, err := tools.Parse("c.yaml", []byte(local(missing))); err != nil {
		t.Errorf("tools.Parse(missing socket) = %v, want no host check", err)
	}
}
