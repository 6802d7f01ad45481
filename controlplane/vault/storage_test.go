package vault

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
)

// memStorage is a Storage in memory with insert-if-absent Create, as a
// shared store behaves.
type memStorage struct {
	mu   sync.Mutex
	data []byte
}

func (m *memStorage) Load() ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		return nil, fs.ErrNotExist
	}
	return append([]byte(nil), m.data...), nil
}

func (m *memStorage) Create(data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data != nil {
		return fmt.Errorf("taken: %w", fs.ErrExist)
	}
	m.data = append([]byte(nil), data...)
	return nil
}

func (m *memStorage) Replace(data []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.data = append([]byte(nil), data...)
	return nil
}

func (m *memStorage) String() string { return "memory" }

// TestSharedStorage: two vaults on one Storage (two replicas on one
// store). The second, opened before the first created the vault, loses the
// race to create it (ErrExists), reloads and unlocks the winner's with the
// same key file; a credential the first stores later is seen by the second
// after Reload; a document replaced by another vault's is refused by
// Reload, and so is one whose MAC does not verify, leaving the vault as it
// was.
func TestSharedStorage(t *testing.T) {
	st := &memStorage{}
	keyFile := filepath.Join(t.TempDir(), "vault.key")
	a := mustNew(t, Config{Storage: st})
	b := mustNew(t, Config{Storage: st})
	if err := a.InitWithKeyFile(keyFile); err != nil {
		t.Fatal(err)
	}
	if err := b.InitWithKeyFile(keyFile); !errors.Is(err, ErrExists) {
		t.Fatalf("second Init on a shared storage = %v, want ErrExists", err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := b.UnlockWithKeyFile(keyFile); err != nil {
		t.Fatalf("unlock the winner's vault: %v", err)
	}
	cred := Credential{Kind: KindBearer, Fields: Fields{"token": "tok-Zq9-shared"}}
	if err := a.Put("deploy", cred); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Get("deploy"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get before Reload = %v, want ErrNotFound (read once)", err)
	}
	if err := b.Reload(); err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get("deploy"); err != nil || got.Fields["token"] != cred.Fields["token"] {
		t.Fatalf("Get after Reload = %v, %v", got, err)
	}
	ka, err := a.KeySealer().Seal([]byte("k"), []byte("key"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := b.KeySealer().Open([]byte("k"), ka); err != nil || string(p) != "key" {
		t.Errorf("key sealed by one replica's vault does not open with the other's: %v", err)
	}
	if _, err := b.ArgumentSealer().Open([]byte("k"), ka); !errors.Is(err, ErrUnsealable) {
		t.Errorf("a key box opened with the argument sealer: %v; want independent keys", err)
	}

	good, _ := st.Load()
	tampered := append([]byte(nil), good...)
	other := &memStorage{}
	o := mustNew(t, Config{Storage: other})
	if err := o.InitWithKeyFile(filepath.Join(t.TempDir(), "other.key")); err != nil {
		t.Fatal(err)
	}
	st.data, _ = other.Load()
	if err := b.Reload(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Reload of another vault's document = %v, want ErrCorrupt", err)
	}
	f, err := parseFile(tampered)
	if err != nil {
		t.Fatal(err)
	}
	delete(f.Entries, "deploy")
	st.data, _ = f.marshal()
	if err := b.Reload(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Reload of a document with an entry removed outside latch = %v, want ErrCorrupt", err)
	}
	if _, err := b.Get("deploy"); err != nil {
		t.Errorf("a refused Reload changed the vault: %v", err)
	}
}
