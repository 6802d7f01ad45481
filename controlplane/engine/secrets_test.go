package engine

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/vault"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

const sealedSecret = "Zq9-sealed-secret-5521"

// testVault is a real vault unlocked by a key file in dir.
func testVault(t *testing.T, dir string) (*vault.Vault, string) {
	t.Helper()
	v, err := vault.New(vault.Config{Path: filepath.Join(dir, "vault.json")})
	if err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, "vault.key")
	if err := v.InitWithKeyFile(key); err != nil {
		t.Fatal(err)
	}
	return v, key
}

// assertNoClearSecret walks dir: no file holds the secret in clear.
func assertNoClearSecret(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(p); bytes.Contains(b, []byte(sealedSecret)) {
			t.Errorf("secret found in clear in %s", p)
		}
		return nil
	})
}

// TestSecretArgumentsSurviveARestart: an execution with a secret argument
// accepted before a restart (awaiting approval) is sent with that secret
// after it, from the sealed copy; nothing holds it in clear on disk, and the
// sealed copy is deleted once the execution completed.
func TestSecretArgumentsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	v, _ := testVault(t, t.TempDir())
	seal := func(c *Config) { c.Sealer = v.ArgumentSealer() }
	h := newHarnessWith(t, dir, nil, seal)
	r := h.submit(t, "alice", "rotate", `{"name":"db","new_secret":"`+sealedSecret+`"}`)
	id := r.Execution.GetId()
	if r.Execution.GetState() != recordv1.State_STATE_AWAITING_APPROVAL {
		t.Fatalf("state %v, want awaiting_approval", r.Execution.GetState())
	}
	h.close()
	assertNoClearSecret(t, dir)

	h2 := newHarnessWith(t, dir, nil, seal)
	if _, err := h2.e.Approve(t.Context(), id, "ops", "after the restart"); err != nil {
		t.Fatal(err)
	}
	x := h2.waitState(t, id, recordv1.State_STATE_COMPLETED, recordv1.State_STATE_CANCELLED)
	if x.GetState() != recordv1.State_STATE_COMPLETED {
		t.Fatalf("after a restart the execution is %v (%s), want completed from the sealed arguments", x.GetState(), x.GetReason())
	}
	if got := h2.ch.seen[0]["new_secret"]; got != sealedSecret {
		t.Errorf("dispatched new_secret = %v, want the secret from before the restart", got)
	}
	if _, err := h2.st.SealedArguments(id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("sealed arguments after completion: %v, want deleted", err)
	}
	h2.close()
	assertNoClearSecret(t, dir)
}

// TestSealedSecretsWaitForTheVault: with the vault locked at restart, an
// approved execution whose secret arguments are sealed waits (authorized,
// nothing sent, not cancelled), across a further restart too; unlocking and
// ResumeSealed send it.
func TestSealedSecretsWaitForTheVault(t *testing.T) {
	dir := t.TempDir()
	v, key := testVault(t, t.TempDir())
	seal := func(c *Config) { c.Sealer = v.ArgumentSealer() }
	h := newHarnessWith(t, dir, nil, seal)
	id := h.submit(t, "alice", "rotate", `{"name":"db","new_secret":"`+sealedSecret+`"}`).Execution.GetId()
	h.close()

	v.Lock()
	waitFor := func(h *harness) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !h.e.waitsForVault(id) {
			if time.Now().After(deadline) {
				t.Fatalf("execution %s never waited for the vault", id)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	h1 := newHarnessWith(t, dir, nil, seal)
	if _, err := h1.e.Approve(t.Context(), id, "ops", "ok"); err != nil {
		t.Fatal(err)
	}
	waitFor(h1) // approved: its dispatch waits
	h1.close()
	// Restarted again, still locked: the start-up scan finds it authorized
	// and its dispatch waits again, without being cancelled or retried.
	h2 := newHarnessWith(t, dir, nil, seal)
	waitFor(h2)
	x, _, err := h2.e.Get(id, "")
	if err != nil {
		t.Fatal(err)
	}
	if x.GetState() != recordv1.State_STATE_AUTHORIZED || h2.ch.calls.Load() != 0 {
		t.Fatalf("with the vault locked: state %v, %d calls; want authorized and nothing sent", x.GetState(), h2.ch.calls.Load())
	}
	if err := v.UnlockWithKeyFile(key); err != nil {
		t.Fatal(err)
	}
	h2.e.ResumeSealed()
	x = h2.waitState(t, id, recordv1.State_STATE_COMPLETED, recordv1.State_STATE_CANCELLED)
	if x.GetState() != recordv1.State_STATE_COMPLETED || h2.ch.seen[0]["new_secret"] != sealedSecret {
		t.Errorf("after unlock: %v (%s), sent %v; want completed with the secret", x.GetState(), x.GetReason(), h2.ch.seen)
	}
}

// TestUnsealableSecretsCancel: without a sealed copy (an execution accepted
// by a control plane without a Sealer), a restart before dispatch cancels
// the execution and says why, as before.
func TestUnsealableSecretsCancel(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, dir, nil)
	id := h.submit(t, "alice", "rotate", `{"name":"db","new_secret":"`+sealedSecret+`"}`).Execution.GetId()
	h.close()
	v, _ := testVault(t, t.TempDir())
	h2 := newHarnessWith(t, dir, nil, func(c *Config) { c.Sealer = v.ArgumentSealer() })
	if _, err := h2.e.Approve(t.Context(), id, "ops", "ok"); err != nil {
		t.Fatal(err)
	}
	x := h2.waitState(t, id, recordv1.State_STATE_CANCELLED, recordv1.State_STATE_COMPLETED)
	if x.GetState() != recordv1.State_STATE_CANCELLED || !bytes.Contains([]byte(x.GetReason()), []byte("call the tool again")) || h2.ch.calls.Load() != 0 {
		t.Errorf("without a sealed copy: %v %q, %d calls; want cancelled, saying to call again, nothing sent", x.GetState(), x.GetReason(), h2.ch.calls.Load())
	}
}
