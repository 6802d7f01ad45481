package cli

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/latchhq/latch/controlplane/channels"
	"github.com/latchhq/latch/internal/testing/testbin"
)

const (
	serveUnit    = "../cmd/latch/latch.service"
	serveConfig  = "../cmd/latch/latch.yaml"
	serveCatalog = "../cmd/latch/catalog.yaml"
)

var updateConfigRef = flag.Bool("update-config-ref", false, "rewrite latch serve's keys in docs/reference/config.md")

func quietEnv() *Env {
	return &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(string) string { return "" }}
}

// TestServeUnit: the shipped unit is valid for systemd and starts latch
// serve with the shipped config file, which latch serve accepts, and the
// catalog it names is the shipped one, which loads.
func TestServeUnit(t *testing.T) {
	testbin.VerifyUnit(t, serveUnit)
	args := testbin.UnitExecStart(t, serveUnit, t.TempDir())
	if want := []string{"serve", "--config", "/etc/latch/latch.yaml"}; !cmp.Equal(args, want) {
		t.Fatalf("latch.service runs latch %q, want %q", args, want)
	}
	_, o, err := parseServe(quietEnv(), []string{"--config", serveConfig})
	if err != nil {
		t.Fatalf("parseServe(--config %s) = %v", serveConfig, err)
	}
	if *o.catalogPath != "/etc/latch/catalog.yaml" || *o.data != "/var/lib/latch" {
		t.Errorf("%s: catalog %q, data %q; want /etc/latch/catalog.yaml, /var/lib/latch", serveConfig, *o.catalogPath, *o.data)
	}
	if _, err := channels.Default().Catalog().Load(serveCatalog); err != nil {
		t.Errorf("the packaged catalog %s: %v", serveCatalog, err)
	}
}

// TestConfigReference: docs/reference/config.md lists every key of latch
// serve (every flag but --config).
func TestConfigReference(t *testing.T) {
	fs, _ := serveFlags(quietEnv())
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if keys := len(serveBinary.Keys(fs)); keys < 30 || keys >= n {
		t.Errorf("latch serve has %d keys for %d flags", keys, n)
	}
	testbin.CheckConfigReference(t, filepath.Join("..", "..", "docs", "reference", "config.md"), "latch serve", serveBinary.Reference(fs), *updateConfigRef)
}

// TestConfigValidate: latch config validate accepts the shipped file and
// refuses every problem of a bad one with file:line (exit 2).
func TestConfigValidate(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte("data: /d\ncatalog: /c\nlog_level: loud\ngrpc_lisen: x\nstore: postgres://latch:hunter2@db/latch\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noTLSKey := filepath.Join(dir, "nokey.yaml")
	if err := os.WriteFile(noTLSKey, []byte("data: /d\ncatalog: /c\ngrpc_listen: 0.0.0.0:7400\ntls:\n  cert_file: /c.pem\n  client_ca_file: /ca.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		file string
		code int
		want []string
	}{
		{"shipped", serveConfig, ExitOK, []string{"valid latch serve configuration"}},
		{"bad", bad, ExitUsage, []string{
			bad + `:4: latch serve config: unknown key "grpc_lisen"`,
			bad + `:5: store: the connection string holds a password`,
		}},
		{"flag rules", noTLSKey, ExitUsage, []string{"--tls-cert-file and --tls-key-file go together"}},
		{"absent", filepath.Join(dir, "absent.yaml"), ExitUsage, []string{"cannot read the config file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := Main(t.Context(), &Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}, []string{"config", "validate", tc.file})
			if code != tc.code {
				t.Errorf("latch config validate %s = exit %d, want %d:\n%s", tc.file, code, tc.code, out.String())
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("latch config validate %s printed:\n%s\nwant it to contain %q", tc.file, out.String(), w)
				}
			}
			if strings.Contains(out.String(), "hunter2") {
				t.Errorf("latch config validate printed the password:\n%s", out.String())
			}
		})
	}
}

// TestServeConfigPrecedence: a flag beats the environment, which beats the
// file; a deprecated flag name still sets its key.
func TestServeConfigPrecedence(t *testing.T) {
	env := &Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string {
		return map[string]string{"LATCH_SERVE_LOG_LEVEL": "debug", "LATCH_SERVE_CATALOG": "/env/catalog.yaml"}[k]
	}}
	_, o, err := parseServe(env, []string{"--config", serveConfig, "--catalog", "/flag/catalog.yaml", "--http-listen", "127.0.0.1:7999"})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{*o.data, *o.catalogPath, *o.level, o.ops.listen}
	want := []string{"/var/lib/latch", "/flag/catalog.yaml", "debug", "127.0.0.1:7999"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("data, catalog, log level, ops listen (-want +got):\n%s", d)
	}
}
