package httpdispatch

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/example/hmacsig"
)

// The one line that adds a credential kind kept outside package vault.
func init() { vault.Register(hmacsig.Kind{}) }

// TestRegisteredKind: a kind registered from outside package vault
// (internal/testing/example/hmacsig) is validated and sealed by a real vault on
// disk, read back after a restart, and presented on a real HTTP call: the
// target sees a signature it can check, and the target echoing the key (raw
// and base64) stores none of it.
func TestRegisteredKind(t *testing.T) {
	const secret = "hmac/key+0123456789=="
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "vault.key")
	open := func() *vault.Vault {
		v, err := vault.New(vault.Config{Path: filepath.Join(dir, "vault.json")})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := open()
	if err := v.InitWithKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := v.Put("signer", vault.Credential{Kind: hmacsig.Name, Fields: vault.Fields{"key_id": "k1"}}); !errors.Is(err, vault.ErrInvalidCredential) || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("Put without the secret = %v, want ErrInvalidCredential naming secret", err)
	}
	if err := v.Put("signer", vault.Credential{Kind: hmacsig.Name, Fields: vault.Fields{"key_id": "k1", "secret": secret, "token": "x"}}); !errors.Is(err, vault.ErrInvalidCredential) {
		t.Fatalf("Put with another kind's field = %v, want ErrInvalidCredential", err)
	}
	if err := v.Put("signer", vault.Credential{Kind: hmacsig.Name, Fields: vault.Fields{"key_id": "k1", "secret": secret}}); err != nil {
		t.Fatal(err)
	}
	v = open() // a restart: what was sealed is read back
	if err := v.UnlockWithKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	c, err := v.Get("signer")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SSH(); !errors.Is(err, vault.ErrWrongKind) {
		t.Errorf("SSH() of an HTTP-only kind = %v, want ErrWrongKind", err)
	}
	cred, err := c.HTTP()
	if err != nil {
		t.Fatal(err)
	}

	srv, seen := startRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "key %s, again %s, signature header %s\n", secret, base64.StdEncoding.EncodeToString([]byte(secret)), r.Header.Get(hmacsig.Header))
	})
	d := newDispatcher(t, Config{ResultHeaders: []string{hmacsig.Header}})
	body := []byte(`{"version":"1.2.3"}`)
	obs, err := d.Send(t.Context(), Call{ExecutionID: "e1", Target: demoTarget("http", srv.Listener.Addr().String()),
		Method: http.MethodPost, Path: "/v1/releases", Headers: map[string]string{"Content-Type": "application/json"}, Body: body, Credential: cred})
	if err != nil {
		t.Fatalf("Send = %v", err)
	}
	got := seen()
	if len(got) != 1 {
		t.Fatalf("target saw %d requests, want 1", len(got))
	}
	want := "key_id=k1,sig=" + hmacsig.Sign([]byte(secret), http.MethodPost, "/v1/releases", body)
	if h := got[0].header.Get(hmacsig.Header); h != want {
		t.Errorf("target saw %s: %q, want %q", hmacsig.Header, h, want)
	}
	stored := string(obs.Body) + fmt.Sprint(obs.Headers)
	for _, form := range []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), want} {
		if strings.Contains(stored, form) {
			t.Errorf("the observation holds %q:\n%s", form, stored)
		}
	}
	if !strings.Contains(string(obs.Body), "key [REDACTED]") {
		t.Errorf("observation body %q: the echoed key was not redacted", obs.Body)
	}
}
