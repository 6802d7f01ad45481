package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/hostagent"
	"github.com/latchhq/latch/internal/testing/testbin"
)

var updateConfigRef = flag.Bool("update-config-ref", false, "rewrite latch-hostagent's keys in docs/reference/config.md")

// TestUnit: the shipped unit is valid for systemd and starts the agent
// with the shipped config file, which the agent accepts.
func TestUnit(t *testing.T) {
	testbin.VerifyUnit(t, "latch-hostagent.service")
	args := testbin.UnitExecStart(t, "latch-hostagent.service", t.TempDir())
	if want := []string{"serve", "--config", "/etc/latch/latch-hostagent.yaml"}; !cmp.Equal(args, want) {
		t.Fatalf("latch-hostagent.service runs latch-hostagent %q, want %q", args, want)
	}
	_, o, err := parseServe([]string{"--config", "latch-hostagent.yaml"}, io.Discard)
	if err != nil {
		t.Fatalf("parseServe(--config latch-hostagent.yaml) = %v", err)
	}
	if o.data != "/var/lib/latch-hostagent" || o.socket != "/run/latch-hostagent/agent.sock" {
		t.Errorf("latch-hostagent.yaml: data %q, socket %q", o.data, o.socket)
	}
}

// TestConfigReference: docs/reference/config.md lists every key.
func TestConfigReference(t *testing.T) {
	fs, _ := serveFlags(io.Discard)
	testbin.CheckConfigReference(t, testbin.ConfigReference, "latch-hostagent", binary.Reference(fs), *updateConfigRef)
}

// TestConfigValidate: config validate accepts the shipped file and
// refuses a bad one with file:line (exit 2); the environment beats the
// file and a flag beats both.
func TestConfigValidate(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("data: /d\nallow_uid: [1, x]\noutput_cap: lots\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(t.Context(), []string{"config", "validate", "latch-hostagent.yaml"}, &out, &out); code != hostagent.ExitOK {
		t.Errorf("config validate latch-hostagent.yaml = exit %d:\n%s", code, out.String())
	}
	out.Reset()
	code := run(t.Context(), []string{"config", "validate", bad}, &out, &out)
	for _, w := range []string{bad + `:2: allow_uid: uid "x" is not a number`, bad + `:3: output_cap: must be a whole number, got "lots"`} {
		if code != hostagent.ExitUsage || !strings.Contains(out.String(), w) {
			t.Errorf("config validate bad.yaml = exit %d:\n%s\nwant exit 2 and %q", code, out.String(), w)
		}
	}
	t.Setenv("LATCH_HOSTAGENT_SOCKET", "/env.sock")
	t.Setenv("LATCH_HOSTAGENT_LOG_LEVEL", "debug")
	_, o, err := parseServe([]string{"--config", "latch-hostagent.yaml", "--log-level", "warn", "--metrics-listen", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := []string{o.data, o.socket, o.level, o.opsListen}, []string{"/var/lib/latch-hostagent", "/env.sock", "warn", "127.0.0.1:0"}; !cmp.Equal(got, want) {
		t.Errorf("data, socket, level, ops listen = %q, want %q", got, want)
	}
}

// TestReloadOnHUP: a running agent re-reads its file on SIGHUP, says which
// changed keys need a restart, and keeps running on a broken file.
func TestReloadOnHUP(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("output_cap: 1000\n")
	a := startAgent(t, agentOpts{flags: []string{"--config", cfg}})
	hup := func() {
		if err := a.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write("output_cap: 2000\n")
	hup()
	testbin.Eventually(t, "the agent to log the key that needs a restart", func() bool {
		return strings.Contains(a.Log.String(), "configuration reloaded") && strings.Contains(a.Log.String(), "need_restart=output_cap")
	})
	write("output_cap: [\n")
	hup()
	testbin.Eventually(t, "the agent to refuse the broken file", func() bool {
		return strings.Contains(a.Log.String(), "configuration not reloaded")
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if _, err := a.Client.ListMarkers(ctx, nil); err != nil {
		t.Errorf("the agent after a broken reload: ListMarkers = %v", err)
	}
}
