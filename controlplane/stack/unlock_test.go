package stack

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/vault"
)

// TestUnlockAtStart: --vault-passphrase-file creates the vault on first
// start and unlocks it on the next; a wrong passphrase or key file is
// refused naming the flag; both flags together are a usage error.
func TestUnlockAtStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vault.json")
	pass := filepath.Join(dir, "pass")
	if err := os.WriteFile(pass, []byte("correct horse\nignored second line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	open := func() *vault.Vault {
		v, err := vault.New(vault.Config{Path: path, KDF: vault.FastInsecureParams()})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := open()
	if err := unlockAtStart(v, "", pass); err != nil || v.Status().Locked || v.Status().Method != "argon2id" {
		t.Fatalf("first start: %v, %+v; want a passphrase vault created unlocked", err, v.Status())
	}
	v = open()
	if err := unlockAtStart(v, "", pass); err != nil || v.Status().Locked {
		t.Fatalf("second start: %v, %+v; want unlocked", err, v.Status())
	}
	if err := v.Unlock([]byte("correct horse")); err != nil {
		t.Errorf("the passphrase is the file's first line only: %v", err)
	}
	wrong := filepath.Join(dir, "wrong")
	if err := os.WriteFile(wrong, []byte("battery staple\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := unlockAtStart(open(), "", wrong)
	if !errors.Is(err, vault.ErrWrongPassphrase) || !strings.Contains(err.Error(), "--vault-passphrase-file") {
		t.Errorf("wrong passphrase file = %v, want ErrWrongPassphrase naming the flag", err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unlockAtStart(open(), "", empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty passphrase file = %v, want refused", err)
	}
	if err := unlockAtStart(open(), filepath.Join(dir, "k"), pass); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Errorf("both flags = %v, want a usage error", err)
	}
	if err := unlockAtStart(open(), filepath.Join(dir, "k"), ""); !errors.Is(err, vault.ErrWrongMethod) {
		t.Errorf("key file for a passphrase vault = %v, want ErrWrongMethod", err)
	}
}
