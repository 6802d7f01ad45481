package vault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRoundTripAcrossReopen(t *testing.T) {
	v, cfg, logs := newUnlocked(t, "correct horse battery staple")
	creds, secrets := sampleCredentials(t)
	for name, c := range creds {
		if err := v.Put(name, c); err != nil {
			t.Fatalf("Put(%q) = %v", name, err)
		}
	}

	// A fresh process: New reads the file and starts locked.
	w := mustNew(t, cfg)
	st := w.Status()
	if want := (Status{Locked: true, Initialized: true, Method: "argon2id", Epoch: 0, Names: 4, Path: cfg.Path}); st != want {
		t.Fatalf("Status() after New = %+v, want %+v", st, want)
	}
	if _, err := w.Get("deploy-api"); !errors.Is(err, ErrLocked) {
		t.Fatalf("Get before Unlock = %v, want ErrLocked", err)
	}
	if err := w.Unlock([]byte("correct horse battery staple")); err != nil {
		t.Fatalf("Unlock() = %v", err)
	}
	for name, want := range creds {
		got, err := w.Get(name)
		if err != nil {
			t.Fatalf("Get(%q) = %v", name, err)
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(Credential{})); diff != "" {
			t.Errorf("Get(%q) mismatch (-want +got):\n%s", name, diff)
		}
	}
	names, err := w.List()
	if err != nil {
		t.Fatalf("List() = %v", err)
	}
	if diff := cmp.Diff([]string{"db_host", "deploy-api", "metrics.key", "payments"}, names); diff != "" {
		t.Errorf("List() mismatch (-want +got):\n%s", diff)
	}

	// Replace and delete survive a reopen too.
	if err := w.Put("deploy-api", Credential{Kind: KindBearer, Fields: Fields{"token": "rotated"}}); err != nil {
		t.Fatalf("Put(replace) = %v", err)
	}
	if err := w.Delete("payments"); err != nil {
		t.Fatalf("Delete() = %v", err)
	}
	if err := w.Delete("payments"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Delete(deleted) = %v, want ErrNotFound", err)
	}
	x := mustNew(t, cfg)
	if err := x.Unlock([]byte("correct horse battery staple")); err != nil {
		t.Fatalf("Unlock() = %v", err)
	}
	if got, err := x.Get("deploy-api"); err != nil || got.Fields["token"] != "rotated" {
		t.Errorf("Get(deploy-api) after replace = %v, %v; want the rotated token", got, err)
	}
	if _, err := x.Get("payments"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(payments) after Delete = %v, want ErrNotFound", err)
	}
	assertNoSecret(t, "log output", logs.Logged(), secrets)
}

func TestWrongPassphrase(t *testing.T) {
	_, cfg, _ := newUnlocked(t, "right passphrase")
	v := mustNew(t, cfg)
	for _, pass := range []string{"wrong passphrase", "", "right passphrase "} {
		err := v.Unlock([]byte(pass))
		if !errors.Is(err, ErrWrongPassphrase) {
			t.Errorf("Unlock(%q) = %v, want ErrWrongPassphrase", pass, err)
		}
		if err != nil && strings.Contains(err.Error(), "right passphrase") {
			t.Errorf("Unlock error quotes the passphrase: %v", err)
		}
	}
	if st := v.Status(); !st.Locked || st.Epoch != 0 {
		t.Fatalf("Status() after failed unlocks = %+v, want locked at epoch 0", st)
	}
	if err := v.Unlock([]byte("right passphrase")); err != nil {
		t.Fatalf("Unlock(right) = %v", err)
	}
	// Unlocking again with the wrong passphrase fails and does not lock.
	if err := v.Unlock([]byte("wrong")); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("Unlock(wrong) while unlocked = %v, want ErrWrongPassphrase", err)
	}
	if st := v.Status(); st.Locked {
		t.Fatalf("Status() = %+v, want still unlocked", st)
	}
}

func TestLockedDenies(t *testing.T) {
	v, _, _ := newUnlocked(t, "pass")
	if err := v.Put("a", Credential{Kind: KindBearer, Fields: Fields{"token": "tok-0"}}); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	v.Lock()
	ops := []struct {
		name string
		op   func() error
	}{
		{"Get", func() error { _, err := v.Get("a"); return err }},
		{"Get missing", func() error { _, err := v.Get("zz"); return err }},
		{"Put", func() error { return v.Put("b", Credential{Kind: KindBearer, Fields: Fields{"token": "tok-0"}}) }},
		{"Delete", func() error { return v.Delete("a") }},
		{"DeriveKey", func() error { _, err := v.DeriveKey("fingerprint", 32); return err }},
	}
	for _, tc := range ops {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, ErrLocked) {
				t.Errorf("%s on a locked vault = %v, want ErrLocked", tc.name, err)
			}
		})
	}
	// Names are not secret: List works locked.
	names, err := v.List()
	if err != nil || !cmp.Equal(names, []string{"a"}) {
		t.Errorf("List() locked = %v, %v; want [a]", names, err)
	}
}

func TestUninitialized(t *testing.T) {
	cfg, _ := testConfig(t)
	v := mustNew(t, cfg)
	if st := v.Status(); st.Initialized || !st.Locked || st.Names != 0 {
		t.Errorf("Status() = %+v, want uninitialized and locked", st)
	}
	if err := v.Unlock([]byte("x")); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("Unlock() = %v, want ErrNotInitialized", err)
	}
	if err := v.UnlockWithKeyFile(filepath.Join(t.TempDir(), "key")); !errors.Is(err, ErrNotInitialized) {
		t.Errorf("UnlockWithKeyFile() = %v, want ErrNotInitialized", err)
	}
	if err := v.Put("a", Credential{Kind: KindBearer, Fields: Fields{"token": "tok-0"}}); !errors.Is(err, ErrLocked) {
		t.Errorf("Put() = %v, want ErrLocked", err)
	}
	if names, err := v.List(); err != nil || len(names) != 0 {
		t.Errorf("List() = %v, %v; want empty", names, err)
	}
	if err := v.Init(nil); err == nil {
		t.Errorf("Init(empty passphrase) = nil, want an error")
	}
	if _, err := os.Stat(cfg.Path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Init left a file: %v", err)
	}
}

func TestInitRefusesExisting(t *testing.T) {
	v, cfg, _ := newUnlocked(t, "pass")
	before, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Init([]byte("other")); !errors.Is(err, ErrExists) {
		t.Errorf("Init() twice = %v, want ErrExists", err)
	}
	w := mustNew(t, cfg)
	if err := w.Init([]byte("other")); !errors.Is(err, ErrExists) {
		t.Errorf("Init() on an existing file = %v, want ErrExists", err)
	}
	keyPath := filepath.Join(t.TempDir(), "key")
	if err := w.InitWithKeyFile(keyPath); !errors.Is(err, ErrExists) {
		t.Errorf("InitWithKeyFile() on an existing file = %v, want ErrExists", err)
	}
	if _, err := os.Stat(keyPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused InitWithKeyFile made a key file (stat: %v)", err)
	}
	// Another process (a Vault that read no file) racing to Init.
	cfg2 := cfg
	cfg2.Path = filepath.Join(t.TempDir(), "vault.json")
	x := mustNew(t, cfg2)
	y := mustNew(t, cfg2)
	if err := x.Init([]byte("x")); err != nil {
		t.Fatalf("Init() = %v", err)
	}
	if err := y.Init([]byte("y")); !errors.Is(err, ErrExists) {
		t.Errorf("second Init() of the same path = %v, want ErrExists", err)
	}
	after, err := os.ReadFile(cfg.Path)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("refused Init changed the file (err %v)", err)
	}
}

func TestEpochAndOnChange(t *testing.T) {
	cfg, _ := testConfig(t)
	var mu sync.Mutex
	var got []Status
	cfg.OnChange = func(st Status) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, st)
	}
	v := mustNew(t, cfg)
	if err := v.Init([]byte("pass")); err != nil { // epoch 1, unlocked
		t.Fatal(err)
	}
	v.Lock() // 2
	v.Lock() // no change
	if err := v.Unlock([]byte("nope")); !errors.Is(err, ErrWrongPassphrase) {
		t.Fatalf("Unlock(wrong) = %v", err)
	}
	if err := v.Unlock([]byte("pass")); err != nil { // 3
		t.Fatal(err)
	}
	if err := v.Unlock([]byte("pass")); err != nil { // already unlocked: no change
		t.Fatal(err)
	}
	v.Lock() // 4

	type ev struct {
		Locked bool
		Epoch  uint64
	}
	var evs []ev
	mu.Lock()
	for _, st := range got {
		evs = append(evs, ev{st.Locked, st.Epoch})
	}
	mu.Unlock()
	want := []ev{{false, 1}, {true, 2}, {false, 3}, {true, 4}}
	if diff := cmp.Diff(want, evs); diff != "" {
		t.Errorf("OnChange events mismatch (-want +got):\n%s", diff)
	}
	if st := v.Status(); st.Epoch != 4 || !st.Locked {
		t.Errorf("Status() = %+v, want locked at epoch 4", st)
	}
}

func TestOnChangeMayCallVault(t *testing.T) {
	cfg, _ := testConfig(t)
	var seen []Status
	var v *Vault
	cfg.OnChange = func(st Status) {
		seen = append(seen, v.Status())
		if !st.Locked && st.Epoch == 1 {
			v.Lock() // re-entrant: must not deadlock
		}
	}
	v = mustNew(t, cfg)
	if err := v.Init([]byte("p")); err != nil {
		t.Fatal(err)
	}
	if st := v.Status(); !st.Locked || st.Epoch != 2 {
		t.Fatalf("Status() = %+v, want locked at epoch 2 by the callback", st)
	}
	if len(seen) != 2 || seen[0].Epoch != 1 || seen[1].Epoch != 2 || !seen[1].Locked {
		t.Errorf("Status() seen from OnChange = %+v, want epoch 1 then locked epoch 2", seen)
	}
}

func TestNoPlaintextInFile(t *testing.T) {
	v, cfg, logs := newUnlocked(t, "pass")
	creds, secrets := sampleCredentials(t)
	for name, c := range creds {
		if err := v.Put(name, c); err != nil {
			t.Fatalf("Put(%q) = %v", name, err)
		}
	}
	data, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	// The check must be able to fail: the names are in clear.
	if !bytes.Contains(data, []byte("deploy-api")) {
		t.Fatalf("vault file does not name its entries; the secret check below would prove nothing")
	}
	assertNoSecret(t, "vault file", string(data), secrets)
	assertNoSecret(t, "log output", logs.Logged(), secrets)
	for _, s := range []string{"svc-payments", "X-Api-Key"} { // not secret, but sealed too
		if bytes.Contains(data, []byte(s)) {
			t.Errorf("vault file contains %q in clear", s)
		}
	}

	st, err := os.Stat(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := st.Mode().Perm(); perm != 0o600 {
		t.Errorf("vault file mode = %#o, want 0600", perm)
	}
	// No temp files left behind.
	ents, err := os.ReadDir(filepath.Dir(cfg.Path))
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 {
		t.Errorf("vault directory holds %d files, want only the vault file", len(ents))
	}
}

// rewrite decodes the vault file, lets edit change it and writes it back.
func rewrite(t testing.TB, path string, edit func(f *fileV1)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := parseFile(data)
	if err != nil {
		t.Fatalf("parseFile() = %v", err)
	}
	edit(f)
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestTamperedFileRefusesUnlock(t *testing.T) {
	tests := []struct {
		name string
		edit func(f *fileV1)
		want error
	}{
		{"flipped entry byte", func(f *fileV1) { f.Entries["a"][40] ^= 1 }, ErrCorrupt},
		{"swapped entries", func(f *fileV1) { f.Entries["a"], f.Entries["b"] = f.Entries["b"], f.Entries["a"] }, ErrCorrupt},
		{"deleted entry", func(f *fileV1) { delete(f.Entries, "b") }, ErrCorrupt},
		{"entry copied to a new name", func(f *fileV1) { f.Entries["c"] = f.Entries["a"] }, ErrCorrupt},
		{"flipped mac", func(f *fileV1) { f.MAC[0] ^= 1 }, ErrCorrupt},
		{"flipped check", func(f *fileV1) { f.Check[30] ^= 1 }, ErrWrongPassphrase},
		{"other salt", func(f *fileV1) { f.KDF.Salt[0] ^= 1 }, ErrWrongPassphrase},
		{"other id", func(f *fileV1) { f.ID[0] ^= 1 }, ErrCorrupt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, cfg, _ := newUnlocked(t, "pass")
			for _, n := range []string{"a", "b"} {
				if err := v.Put(n, Credential{Kind: KindBearer, Fields: Fields{"token": "secret-of-" + n}}); err != nil {
					t.Fatal(err)
				}
			}
			rewrite(t, cfg.Path, tc.edit)
			w := mustNew(t, cfg)
			err := w.Unlock([]byte("pass"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("Unlock() of a tampered file = %v, want %v", err, tc.want)
			}
			if strings.Contains(err.Error(), "secret-of-") {
				t.Errorf("error quotes a secret: %v", err)
			}
			if !w.Status().Locked {
				t.Errorf("vault unlocked despite tampering")
			}
		})
	}
}

// TestTamperedEntryDetectedOnGet checks the per-entry binding on its own:
// the file MAC is recomputed, as if the attacker had the key for it, so
// only the sealed name and vault id can catch the change.
func TestTamperedEntryDetectedOnGet(t *testing.T) {
	otherVault, _, _ := newUnlocked(t, "pass")
	if err := otherVault.Put("a", Credential{Kind: KindBearer, Fields: Fields{"token": "foreign"}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		edit   func(v *Vault, f *fileV1)
		get    string
		wantIn string
	}{
		{"flipped byte", func(v *Vault, f *fileV1) { f.Entries["a"][len(f.Entries["a"])-1] ^= 0x80 }, "a", "does not decrypt"},
		{"swapped", func(v *Vault, f *fileV1) { f.Entries["a"], f.Entries["b"] = f.Entries["b"], f.Entries["a"] }, "a", "another name"},
		{"copied", func(v *Vault, f *fileV1) { f.Entries["c"] = f.Entries["a"] }, "c", "another name"},
		{"from another vault with the same key", func(v *Vault, f *fileV1) {
			// Re-seal the other vault's payload under this vault's key: only
			// the sealed vault id tells them apart.
			p, ok := open(otherVault.file.Entries["a"], otherVault.dek)
			if !ok {
				t.Fatal("cannot open the other vault's entry")
			}
			b, err := seal(p, v.dek)
			if err != nil {
				t.Fatal(err)
			}
			f.Entries["a"] = b
		}, "a", "another name or vault"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, _, _ := newUnlocked(t, "pass")
			for _, n := range []string{"a", "b"} {
				if err := v.Put(n, Credential{Kind: KindBearer, Fields: Fields{"token": "secret-of-" + n}}); err != nil {
					t.Fatal(err)
				}
			}
			v.mu.Lock()
			f := v.file.clone()
			for k, b := range f.Entries {
				f.Entries[k] = bytes.Clone(b)
			}
			tc.edit(v, f)
			err := v.commit(f)
			v.mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			_, err = v.Get(tc.get)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.wantIn) {
				t.Fatalf("Get(%q) = %v, want ErrCorrupt saying %q", tc.get, err, tc.wantIn)
			}
			if strings.Contains(err.Error(), "secret-of-") || strings.Contains(err.Error(), "foreign") {
				t.Errorf("error quotes a secret: %v", err)
			}
			if _, err := v.Get("b"); tc.name != "swapped" && err != nil {
				t.Errorf("Get(b) untouched entry = %v", err)
			}
		})
	}
}

func TestNewRejectsCorruptFile(t *testing.T) {
	tests := []struct {
		name string
		data string
	}{
		{"empty", ""},
		{"not json", "hello"},
		{"wrong version", `{"version":2}`},
		{"unknown field", `{"version":1,"extra":true}`},
		{"trailing data", `{"version":1} {}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, _ := testConfig(t)
			if err := os.WriteFile(cfg.Path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := New(cfg); !errors.Is(err, ErrCorrupt) {
				t.Errorf("New() on %s = %v, want ErrCorrupt", tc.name, err)
			}
		})
	}
}

func TestKeyFile(t *testing.T) {
	cfg, _ := testConfig(t)
	keyPath := filepath.Join(t.TempDir(), "keys", "vault.key")
	v := mustNew(t, cfg)
	if err := v.InitWithKeyFile(keyPath); err != nil {
		t.Fatalf("InitWithKeyFile() = %v", err)
	}
	st, err := os.Stat(keyPath)
	if err != nil {
		t.Fatalf("key file not created: %v", err)
	}
	if st.Mode().Perm() != 0o600 || st.Size() != 32 {
		t.Errorf("key file mode %#o size %d, want 0600 and 32 bytes", st.Mode().Perm(), st.Size())
	}
	if err := v.Put("tok", Credential{Kind: KindBearer, Fields: Fields{"token": "kf-secret"}}); err != nil {
		t.Fatal(err)
	}

	w := mustNew(t, cfg)
	if got := w.Status().Method; got != "keyfile" {
		t.Errorf("Status().Method = %q, want keyfile", got)
	}
	if err := w.Unlock([]byte("pass")); !errors.Is(err, ErrWrongMethod) {
		t.Errorf("Unlock(passphrase) of a key-file vault = %v, want ErrWrongMethod", err)
	}
	other := filepath.Join(t.TempDir(), "other.key")
	if err := GenerateKeyFile(other); err != nil {
		t.Fatal(err)
	}
	if err := w.UnlockWithKeyFile(other); !errors.Is(err, ErrWrongPassphrase) {
		t.Errorf("UnlockWithKeyFile(other key) = %v, want ErrWrongPassphrase", err)
	}
	if err := GenerateKeyFile(keyPath); !errors.Is(err, ErrExists) {
		t.Errorf("GenerateKeyFile(existing) = %v, want ErrExists", err)
	}
	if err := w.UnlockWithKeyFile(keyPath); err != nil {
		t.Fatalf("UnlockWithKeyFile() = %v", err)
	}
	if got, err := w.Get("tok"); err != nil || got.Fields["token"] != "kf-secret" {
		t.Errorf("Get(tok) = %v, %v", got, err)
	}

	// A passphrase vault refuses a key file.
	p, _, _ := newUnlocked(t, "pass")
	p.Lock()
	if err := p.UnlockWithKeyFile(keyPath); !errors.Is(err, ErrWrongMethod) {
		t.Errorf("UnlockWithKeyFile() of a passphrase vault = %v, want ErrWrongMethod", err)
	}
}

func TestKeyFileRejected(t *testing.T) {
	cfg, _ := testConfig(t)
	keyPath := filepath.Join(t.TempDir(), "vault.key")
	v := mustNew(t, cfg)
	if err := v.InitWithKeyFile(keyPath); err != nil {
		t.Fatal(err)
	}
	v.Lock()
	key, err := os.ReadFile(keyPath)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		data []byte
		mode os.FileMode
		want string
	}{
		{"group readable", key, 0o640, "chmod 600"},
		{"world readable", key, 0o604, "chmod 600"},
		{"short", key[:31], 0o600, "exactly 32 bytes"},
		{"long", append(bytes.Clone(key), '\n'), 0o600, "exactly 32 bytes"},
		{"empty", nil, 0o600, "exactly 32 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "k")
			if err := os.WriteFile(p, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.mode); err != nil {
				t.Fatal(err)
			}
			err := v.UnlockWithKeyFile(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("UnlockWithKeyFile(%s) = %v, want an error saying %q", tc.name, err, tc.want)
			}
			if !v.Status().Locked {
				t.Errorf("vault unlocked by a rejected key file")
			}
		})
	}
	if err := v.UnlockWithKeyFile(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("UnlockWithKeyFile(missing) = %v, want ErrNotExist", err)
	}
}

func TestNames(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"0", true},
		{"deploy-api", true},
		{"db_host.prod-1", true},
		{strings.Repeat("a", 64), true},
		{strings.Repeat("a", 65), false},
		{"", false},
		{"-leading", false},
		{".hidden", false},
		{"_x", false},
		{"Upper", false},
		{"has space", false},
		{"slash/path", false},
		{"../escape", false},
		{"tab\t", false},
		{"new\nline", false},
		{"ünïcode", false},
		{"a\x00", false},
	}
	v, _, _ := newUnlocked(t, "pass")
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%q", tc.name), func(t *testing.T) {
			err := v.Put(tc.name, Credential{Kind: KindBearer, Fields: Fields{"token": "tok-0"}})
			if tc.ok && err != nil {
				t.Errorf("Put(%q) = %v, want nil", tc.name, err)
			}
			if !tc.ok && !errors.Is(err, ErrInvalidName) {
				t.Errorf("Put(%q) = %v, want ErrInvalidName", tc.name, err)
			}
			if _, err := v.Get(tc.name); !tc.ok && !errors.Is(err, ErrInvalidName) {
				t.Errorf("Get(%q) = %v, want ErrInvalidName", tc.name, err)
			}
		})
	}
}

func TestDeriveKey(t *testing.T) {
	v, cfg, _ := newUnlocked(t, "pass")
	a, err := v.DeriveKey("fingerprint", 32)
	if err != nil {
		t.Fatal(err)
	}
	b, err := v.DeriveKey("other", 32)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a, b) {
		t.Errorf("DeriveKey gives the same key for two purposes")
	}
	w := mustNew(t, cfg)
	if err := w.Unlock([]byte("pass")); err != nil {
		t.Fatal(err)
	}
	a2, err := w.DeriveKey("fingerprint", 32)
	if err != nil || !bytes.Equal(a, a2) {
		t.Errorf("DeriveKey after reopen = %x, %v; want the same key", a2, err)
	}
	for _, n := range []int{0, 15, 65} {
		if _, err := w.DeriveKey("fingerprint", n); err == nil {
			t.Errorf("DeriveKey(n=%d) = nil error, want an error", n)
		}
	}
	if _, err := w.DeriveKey("", 32); err == nil {
		t.Errorf("DeriveKey(empty purpose) = nil error, want an error")
	}
	other, _, _ := newUnlocked(t, "pass")
	c, err := other.DeriveKey("fingerprint", 32)
	if err != nil || bytes.Equal(a, c) {
		t.Errorf("two vaults with one passphrase derive the same key (err %v)", err)
	}
}

func TestConfigValidation(t *testing.T) {
	if _, err := New(Config{}); err == nil {
		t.Errorf("New(empty Config) = nil error, want an error naming Path")
	}
	for _, p := range []Params{{Time: 0, MemoryKiB: 1024, Threads: 1}, {Time: 1, MemoryKiB: 1024, Threads: 0}, {Time: 1, MemoryKiB: 4, Threads: 1}} {
		cfg, _ := testConfig(t)
		cfg.KDF = p
		if _, err := New(cfg); err == nil {
			t.Errorf("New(KDF %+v) = nil error, want an error", p)
		}
	}
}

func TestConcurrentPutGet(t *testing.T) {
	v, _, _ := newUnlocked(t, "pass")
	const writers, perWriter, readers = 4, 15, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers*perWriter+readers*perWriter+10)
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				name := fmt.Sprintf("w%d-%d", w, i)
				if err := v.Put(name, Credential{Kind: KindBearer, Fields: Fields{"token": "tok-" + name}}); err != nil {
					errs <- fmt.Errorf("Put(%q) = %w", name, err)
				}
			}
		})
	}
	for r := range readers {
		wg.Go(func() {
			for i := range perWriter {
				name := fmt.Sprintf("w%d-%d", r%writers, i)
				c, err := v.Get(name)
				switch {
				case errors.Is(err, ErrNotFound):
				case err != nil:
					errs <- fmt.Errorf("Get(%q) = %w", name, err)
				case c.Fields["token"] != "tok-"+name:
					errs <- fmt.Errorf("Get(%q) returned another entry's token", name)
				}
				_ = v.Status()
				if _, err := v.List(); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := v.Status().Names; n != writers*perWriter {
		t.Errorf("Status().Names = %d, want %d", n, writers*perWriter)
	}
}

func TestConcurrentLockUnlock(t *testing.T) {
	v, cfg, _ := newUnlocked(t, "pass")
	if err := v.Put("a", Credential{Kind: KindBearer, Fields: Fields{"token": "tok-a"}}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	wg.Go(func() {
		for range 5 {
			v.Lock()
			if err := v.Unlock([]byte("pass")); err != nil {
				errs <- err
			}
		}
	})
	for range 3 {
		wg.Go(func() {
			for range 20 {
				c, err := v.Get("a")
				if err != nil && !errors.Is(err, ErrLocked) {
					errs <- err
				}
				if err == nil && c.Fields["token"] != "tok-a" {
					errs <- errors.New("wrong token")
				}
				if err := v.Put("b", Credential{Kind: KindBearer, Fields: Fields{"token": "tok-b"}}); err != nil && !errors.Is(err, ErrLocked) {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if st := v.Status(); st.Locked || st.Epoch != 11 {
		t.Errorf("Status() = %+v, want unlocked at epoch 11", st)
	}
	w := mustNew(t, cfg)
	if err := w.Unlock([]byte("pass")); err != nil {
		t.Fatalf("file unusable after concurrent use: %v", err)
	}
}

func BenchmarkGet(b *testing.B) {
	v, _, _ := newUnlocked(b, "pass")
	if err := v.Put("a", Credential{Kind: KindBearer, Fields: Fields{"token": "tok-0"}}); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := v.Get("a"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkPut(b *testing.B) {
	v, _, _ := newUnlocked(b, "pass")
	for b.Loop() {
		if err := v.Put("a", Credential{Kind: KindBearer, Fields: Fields{"token": "tok-0"}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnlockDefaultParams(b *testing.B) {
	cfg, _ := testConfig(b)
	cfg.KDF = DefaultParams()
	cfg.Logger = nil
	v := mustNew(b, cfg)
	if err := v.Init([]byte("pass")); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		v.Lock()
		if err := v.Unlock([]byte("pass")); err != nil {
			b.Fatal(err)
		}
	}
}
