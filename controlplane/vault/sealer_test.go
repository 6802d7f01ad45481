package vault

import (
	"bytes"
	"errors"
	"testing"
)

// TestArgumentSealer: a box opens with its own associated data after a lock
// cycle, never with another's, never once modified, never while locked,
// and never under another vault; it holds no plaintext.
func TestArgumentSealer(t *testing.T) {
	v, cfg, _ := newUnlocked(t, "correct horse battery staple")
	s := v.ArgumentSealer()
	plain := []byte(`{"new_secret":"Zq9-planted-secret"}`)
	box, err := s.Seal([]byte("act_1"), plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(box, []byte("Zq9-planted-secret")) {
		t.Fatalf("box holds the plaintext")
	}
	again, _ := s.Seal([]byte("act_1"), plain)
	if bytes.Equal(box, again) {
		t.Errorf("two seals of the same plaintext are equal; want a fresh nonce each time")
	}
	v.Lock()
	if s.Ready() {
		t.Errorf("Ready() = true while locked")
	}
	if _, err := s.Open([]byte("act_1"), box); !errors.Is(err, ErrLocked) {
		t.Errorf("Open while locked = %v, want ErrLocked", err)
	}
	if err := v.Unlock([]byte("correct horse battery staple")); err != nil {
		t.Fatal(err)
	}
	got, err := s.Open([]byte("act_1"), box)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open after a lock cycle = %q, %v; want the plaintext", got, err)
	}
	if _, err := s.Open([]byte("act_2"), box); !errors.Is(err, ErrUnsealable) {
		t.Errorf("Open with another execution's ad = %v, want ErrUnsealable", err)
	}
	bad := bytes.Clone(box)
	bad[len(bad)-1] ^= 1
	if _, err := s.Open([]byte("act_1"), bad); !errors.Is(err, ErrUnsealable) {
		t.Errorf("Open of a modified box = %v, want ErrUnsealable", err)
	}
	if _, err := s.Open([]byte("act_1"), box[:5]); !errors.Is(err, ErrUnsealable) {
		t.Errorf("Open of a short box = %v, want ErrUnsealable", err)
	}
	// Reopened from its file, the same vault opens it; another vault does not.
	w := mustNew(t, cfg)
	if err := w.Unlock([]byte("correct horse battery staple")); err != nil {
		t.Fatal(err)
	}
	if got, err := w.ArgumentSealer().Open([]byte("act_1"), box); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("Open by the reopened vault = %q, %v", got, err)
	}
	other, _, _ := newUnlocked(t, "correct horse battery staple")
	if _, err := other.ArgumentSealer().Open([]byte("act_1"), box); !errors.Is(err, ErrUnsealable) {
		t.Errorf("Open by another vault = %v, want ErrUnsealable", err)
	}
}
