package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/latchhq/latch/internal/testing/testbin"
)

// TestServeConfigReload: latch serve started from a config file alone
// re-reads it on SIGHUP: a new log level is applied at once, a changed key that needs a restart is named, and a broken file
// changes nothing and leaves the server running.
func TestServeConfigReload(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	cfg := filepath.Join(dir, "latch.yaml")
	write := func(s string) {
		if err := os.WriteFile(cfg, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	base := "data: " + data + "\ncatalog: " + catalog + "\nvault_key_file: " + filepath.Join(data, "vault.key") + "\n"
	write(base + "log_level: warn\nupstream_max_description: 1000\n")
	cmd := exec.Command(latchBin, "serve", "--config", cfg)
	log := &testbin.Buffer{}
	cmd.Stderr = log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("latch serve log:\n%s", log.String())
		}
	})
	testbin.Eventually(t, "latch serve to serve its API on its socket", func() bool { return serving(data) })
	hup := func() {
		if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	write(base + "log_level: debug\nupstream_max_description: 2000\n")
	hup()
	testbin.Eventually(t, "the reload to apply log_level and name upstream_max_description", func() bool {
		s := log.String()
		return strings.Contains(s, "configuration reloaded") && strings.Contains(s, "applied=log_level") && strings.Contains(s, "need_restart=upstream_max_description")
	})
	// Started at warn, the server wrote no info line before the reload;
	// the reload's own line is at info: written at the new level.
	if s := log.String(); strings.Index(s, "[INFO]") != strings.Index(s, "[INFO]  latch: configuration reloaded") {
		t.Errorf("an info line before the reload at log_level warn:\n%s", s)
	}
	write("log_level: [\n")
	hup()
	testbin.Eventually(t, "the broken file refused", func() bool {
		return strings.Contains(log.String(), "configuration not reloaded")
	})
	if !serving(data) {
		t.Error("latch serve stopped serving after a broken config reload")
	}
}
