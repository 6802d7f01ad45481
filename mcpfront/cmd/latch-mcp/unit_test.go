package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/internal/testing/testbin"
)

var updateConfigRef = flag.Bool("update-config-ref", false, "rewrite latch-mcp's keys in docs/reference/config.md")

// TestUnit: the shipped unit is valid for systemd and starts latch-mcp
// with the shipped config file, which latch-mcp accepts.
func TestUnit(t *testing.T) {
	testbin.VerifyUnit(t, "latch-mcp.service")
	args := testbin.UnitExecStart(t, "latch-mcp.service", t.TempDir())
	if want := []string{"--config", "/etc/latch/latch-mcp.yaml"}; !cmp.Equal(args, want) {
		t.Fatalf("latch-mcp.service runs latch-mcp %q, want %q", args, want)
	}
	o, err := parseFlags([]string{"--config", "latch-mcp.yaml"}, io.Discard)
	if err != nil {
		t.Fatalf("parseFlags(--config latch-mcp.yaml) = %v", err)
	}
	if !cmp.Equal(o.controlPlane, []string{"unix:///var/lib/latch/control.sock"}) {
		t.Errorf("latch-mcp.yaml: control plane %q, want the socket in /var/lib/latch", o.controlPlane)
	}
}

// TestConfigReference: docs/reference/config.md lists every key.
func TestConfigReference(t *testing.T) {
	fs, _, _ := newFlags(io.Discard)
	testbin.CheckConfigReference(t, testbin.ConfigReference, "latch-mcp", binary.Reference(fs), *updateConfigRef)
}

// TestConfigValidate: latch-mcp config validate accepts the shipped file
// and refuses a bad one with file:line (exit 2); the old flag names set
// the new keys.
func TestConfigValidate(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("control_plane: unix:///s\ntls:\n  cert: /c.pem\nperson_wait: 5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run(t.Context(), []string{"config", "validate", "latch-mcp.yaml"}, &out); code != 0 {
		t.Errorf("latch-mcp config validate latch-mcp.yaml = exit %d:\n%s", code, out.String())
	}
	out.Reset()
	code := run(t.Context(), []string{"config", "validate", bad}, &out)
	for _, w := range []string{bad + `:3: tls: unknown key "cert" (known: ca_file, cert_file, key_file)`, bad + `:4: person_wait: must be a duration like 30s`} {
		if code != 2 || !strings.Contains(out.String(), w) {
			t.Errorf("latch-mcp config validate bad.yaml = exit %d:\n%s\nwant exit 2 and %q", code, out.String(), w)
		}
	}
	o, err := parseFlags([]string{"--config", "latch-mcp.yaml", "--metrics-listen", "127.0.0.1:0", "--tls-ca", "ca.pem"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.ops.metricsListen != "127.0.0.1:0" || o.tlsCA != "ca.pem" {
		t.Errorf("deprecated --metrics-listen, --tls-ca: ops listen %q, CA %q", o.ops.metricsListen, o.tlsCA)
	}
}
