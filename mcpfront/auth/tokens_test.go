package auth

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/latchhq/latch/internal/actorname"
)

func TestTokenStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	s, err := OpenTokenStore(path)
	if err != nil {
		t.Fatalf("OpenTokenStore: %v", err)
	}
	alice, err := s.Create("alice")
	if err != nil {
		t.Fatalf("Create(alice): %v", err)
	}
	bob, err := s.Create("bob")
	if err != nil {
		t.Fatalf("Create(bob): %v", err)
	}
	if !strings.HasPrefix(alice, Prefix) || len(alice) != len(Prefix)+43 {
		t.Errorf("Create(alice) = %q, want latch_ + 43 base64url characters", alice)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %v, want 0600", fi.Mode().Perm())
	}
	data, _ := os.ReadFile(path)
	if strings.Contains(string(data), alice) || strings.Contains(string(data), alice[len(Prefix):]) {
		t.Errorf("token file contains the token itself")
	}

	// A second store over the same file sees the tokens (what latch-mcp does
	// while `latch token create` writes).
	s2, err := OpenTokenStore(path)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, token, actor string
		wantErr            error
	}{
		{"alice", alice, "alice", nil},
		{"bob", bob, "bob", nil},
		{"wrong", Prefix + "AAAA", "", ErrInvalidToken},
		{"no prefix", alice[len(Prefix):], "", ErrInvalidToken},
		{"empty", "", "", ErrInvalidToken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actor, id, err := s2.Verify(context.Background(), tt.token)
			if !errors.Is(err, tt.wantErr) || actor != tt.actor {
				t.Fatalf("Verify(%s) = %q, %v, want %q, %v", tt.name, actor, err, tt.actor, tt.wantErr)
			}
			if err == nil && !strings.HasPrefix(id, "tok_") {
				t.Errorf("Verify(%s) id = %q, want tok_…", tt.name, id)
			}
		})
	}

	list, err := s2.List()
	if err != nil || len(list) != 2 {
		t.Fatalf("List() = %v, %v, want 2 tokens", list, err)
	}
	if n, err := s.Revoke("alice"); err != nil || n != 1 {
		t.Fatalf("Revoke(alice) = %d, %v, want 1, nil", n, err)
	}
	if _, _, err := s2.Verify(context.Background(), alice); !errors.Is(err, ErrInvalidToken) {
		t.Errorf("Verify(revoked) error = %v, want ErrInvalidToken", err)
	}
	if _, err := s.Revoke("alice"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Revoke(alice) twice error = %v, want ErrNotFound", err)
	}
	if _, err := s.Create("two words"); !errors.Is(err, ErrBadActor) {
		t.Errorf("Create(two words) error = %v, want ErrBadActor", err)
	}
}

func TestTokenStoreRejectsBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.json")
	if err := os.WriteFile(path, []byte(`{"tokens": [], "extra": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenTokenStore(path); err == nil {
		t.Fatalf("OpenTokenStore(unknown key) = nil error, want an error")
	}
}

func TestHasActor(t *testing.T) {
	s, err := OpenTokenStore(filepath.Join(t.TempDir(), "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := s.HasActor("alice"); ok || err != nil {
		t.Errorf("HasActor on an empty store = %v, %v", ok, err)
	}
	if _, err := s.Create("alice"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.HasActor("alice"); !ok {
		t.Error("HasActor(alice) = false after Create")
	}
	if _, err := s.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	if ok, _ := s.HasActor("alice"); ok {
		t.Error("HasActor(alice) = true after Revoke")
	}
}

// TestTokenStoreRefusesInvisibleActors: a static token cannot be made for
// a name with invisible characters or in a non-NFC form.
func TestTokenStoreRefusesInvisibleActors(t *testing.T) {
	s, err := OpenTokenStore(filepath.Join(t.TempDir(), "tokens.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"dev\u200b", "dev\u00a0", "a\u202eb", "\u0085x", "e\u0301"} {
		if _, err := s.Create(name); !errors.Is(err, ErrBadActor) || !errors.Is(err, actorname.ErrInvalid) {
			t.Errorf("Create(%q) error = %v, want ErrBadActor", name, err)
		}
	}
}
