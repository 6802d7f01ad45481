package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/latchhq/latch/controlplane/store"
)

// TestRolledBackVaultIsCaughtByVerifyAndStartUp: the vault file of a
// stopped `latch serve` put back to the copy taken before the operator
// rotated a credential (it unlocks with the same key file, its MAC
// verifies) is what the journal does not record: `latch audit verify`
// names the vault row and exits 1, and `latch serve` refuses to start
// with it.
func TestRolledBackVaultIsCaughtByVerifyAndStartUp(t *testing.T) {
	_, url := newTarget(t)
	catalog := writeCatalog(t, url)
	data := t.TempDir()
	p := startServe(t, data, catalog)
	put := func(token string) {
		var out bytes.Buffer
		code := Main(context.Background(), &Env{Stdin: strings.NewReader(`{"token":"` + token + `"}`), Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }},
			[]string{"vault", "put", "deploy", "--kind", "bearer", "--data", data})
		if code != 0 {
			t.Fatalf("vault put: exit %d: %s", code, out.String())
		}
	}
	put("rotated-away")
	old, err := os.ReadFile(filepath.Join(data, "vault.json"))
	if err != nil {
		t.Fatal(err)
	}
	put("current")
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		t.Fatalf("latch serve exited with %v after SIGTERM", err)
	}
	if out, code := runCLI(t, "audit", "verify", data); code != 0 || !strings.Contains(out, "state ok") {
		t.Fatalf("audit verify before the rollback: exit %d\n%s", code, out)
	}

	if err := os.WriteFile(filepath.Join(data, "vault.json"), old, 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runCLI(t, "audit", "verify", data)
	if code != 1 || !strings.Contains(out, store.SecretRowVault) || !strings.Contains(out, string(store.MismatchSecret)) || !strings.Contains(out, "DISAGREES") {
		t.Errorf("audit verify after the rollback: exit %d, want 1 naming the vault row (%s):\n%s", code, store.MismatchSecret, out)
	}
	cmd := exec.Command(latchBin, "serve", "--data", data, "--catalog", catalog, "--vault-key-file", filepath.Join(data, "vault.key"), "--trusted-actor", "alice")
	sout, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(string(sout), "vault") || !strings.Contains(string(sout), string(store.MismatchSecret)) {
		t.Errorf("latch serve on a rolled-back vault: %v, want exit 1 naming the vault (%s)\n%s", err, store.MismatchSecret, sout)
	}
}
