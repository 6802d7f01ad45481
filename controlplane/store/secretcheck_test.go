package store_test

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/controlplane/vault"
	"github.com/latchhq/latch/internal/testing/storetest"
)

// secretClock is the witness's clock: stores never read the time.
func secretClock() time.Time { return time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC) }

// vaultStorage is where a vault on the backend keeps its document, as
// latch serve does: the file in the data dir on Badger, the latch_vault row
// on PostgreSQL (through a connection of its own, as another process
// holding the database would use).
func vaultStorage(t *testing.T, open func() store.KV, dir string) vault.Storage {
	t.Helper()
	if !strings.Contains(t.Name(), "/postgres") { // Badger: the file in the data dir
		return vault.FileStorage(filepath.Join(dir, "vault.json"))
	}
	pg := open().(*pgkv.KV)
	t.Cleanup(func() { pg.Close() })
	return pg.VaultStorage()
}

func bearer(token string) vault.Credential {
	return vault.Credential{Kind: vault.KindBearer, Fields: map[string]string{"token": token}}
}

// witnessedVault is a vault held by st's witness, created with a key file
// in dir and holding credential "api": the first token, then rotated to
// the second. It returns the stored documents: the one before the
// rotation and the current one.
func witnessedVault(t *testing.T, st *store.Store, storage vault.Storage, dir string) (before, current []byte) {
	t.Helper()
	v, err := vault.New(vault.Config{Storage: storage})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.SetWitness(st.VaultWitness(t.Context(), secretClock)); err != nil {
		t.Fatal(err)
	}
	if err := v.InitWithKeyFile(filepath.Join(dir, "vault.key")); err != nil {
		t.Fatal(err)
	}
	if err := v.Put("api", bearer("rotated-away")); err != nil {
		t.Fatal(err)
	}
	if before, err = storage.Load(); err != nil {
		t.Fatal(err)
	}
	if err := v.Put("api", bearer("current")); err != nil {
		t.Fatal(err)
	}
	if current, err = storage.Load(); err != nil {
		t.Fatal(err)
	}
	return before, current
}

// reopenVault opens the vault on storage again, unlocked, and holds it
// against st's journal (what latch serve does at start).
func reopenVault(t *testing.T, st *store.Store, storage vault.Storage, dir string) (*vault.Vault, error) {
	t.Helper()
	v, err := vault.New(vault.Config{Storage: storage})
	if err != nil {
		t.Fatal(err)
	}
	if err := v.UnlockWithKeyFile(filepath.Join(dir, "vault.key")); err != nil {
		t.Fatal(err)
	}
	return v, v.SetWitness(st.VaultWitness(t.Context(), secretClock))
}

// TestForgedVaultDocumentRefused: the sealed vault document rolled back to
// the version holding a credential the operator rotated away, altered, or
// swapped for another vault's, in the storage and bypassing Latch (the
// file on Badger, the latch_vault row on PostgreSQL), is refused when the
// vault is held against the journal: opening fails naming the vault, and
// the vault serves no credential. The same document left alone opens and
// serves the current credential.
func TestForgedVaultDocumentRefused(t *testing.T) {
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			for _, tc := range []struct {
				name   string
				forge  func(before, current, other []byte) []byte
				forged bool
			}{
				{"sound", func(_, current, _ []byte) []byte { return nil }, false},
				{"rolled back", func(before, _, _ []byte) []byte { return before }, true},
				{"altered", func(_, current, _ []byte) []byte {
					return append(bytes.TrimRight(bytes.Clone(current), "\n"), " \n"...)
				}, true},
				{"swapped", func(_, _, other []byte) []byte { return other }, true},
			} {
				t.Run(tc.name, func(t *testing.T) {
					dir := t.TempDir()
					open := b.New(t)
					st := storetest.OpenStore(t, open())
					storage := vaultStorage(t, open, dir)
					before, current := witnessedVault(t, st, storage, dir)
					// Another vault, made with the same key file
					// elsewhere: it unlocks, so only the journal tells.
					other := func() []byte {
						odir := t.TempDir()
						ov, err := vault.New(vault.Config{Path: filepath.Join(odir, "vault.json")})
						if err != nil {
							t.Fatal(err)
						}
						if err := ov.InitWithKeyFile(filepath.Join(dir, "vault.key")); err != nil {
							t.Fatal(err)
						}
						if err := ov.Put("api", bearer("planted")); err != nil {
							t.Fatal(err)
						}
						doc, err := vault.FileStorage(filepath.Join(odir, "vault.json")).Load()
						if err != nil {
							t.Fatal(err)
						}
						return doc
					}()
					forged := tc.forge(before, current, other)
					st = storetest.Reopen(t, st, open, func(store.KV) error {
						if forged == nil {
							return nil
						}
						s := vaultStorage(t, open, dir)
						if _, err := s.Load(); err != nil {
							return err
						}
						return s.Replace(forged)
					})
					v, err := reopenVault(t, st, vaultStorage(t, open, dir), dir)
					c, gerr := v.Get("api")
					ms, cerr := st.CheckSecrets(t.Context(), map[string][]byte{store.SecretRowVault: mustLoad(t, vaultStorage(t, open, dir))})
					if cerr != nil {
						t.Fatal(cerr)
					}
					if !tc.forged {
						if err != nil || gerr != nil || c.Get("token") != "current" || len(ms) != 0 {
							t.Errorf("sound vault: SetWitness = %v, Get = %q, %v, CheckSecrets = %v; want it open with the current token", err, c.Get("token"), gerr, ms)
						}
						return
					}
					if !errors.Is(err, vault.ErrForged) || !errors.Is(err, store.ErrStateMismatch) || !strings.Contains(err.Error(), store.SecretRowVault) {
						t.Errorf("SetWitness(%s vault) = %v, want ErrForged and ErrStateMismatch naming the vault row", tc.name, err)
					}
					if !errors.Is(gerr, vault.ErrForged) {
						t.Errorf("Get from a %s vault = %q, %v; want ErrForged", tc.name, c.Get("token"), gerr)
					}
					if len(ms) != 1 || ms[0].Kind != store.MismatchSecret || ms[0].Key != store.SecretRowVault {
						t.Errorf("CheckSecrets(%s vault) = %v, want one %s mismatch of the vault row", tc.name, ms, store.MismatchSecret)
					}
				})
			}
		})
	}
}

func mustLoad(t *testing.T, s vault.Storage) []byte {
	t.Helper()
	doc, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// crashingStorage is a storage whose next Replace is lost with the
// process (the crash comes before the write lands).
type crashingStorage struct{ vault.Storage }

var errCrash = errors.New("the process stopped here")

func (crashingStorage) Replace([]byte) error { return errCrash }

// crashedWitness is the witness of a process that stopped before it could
// journal a failed write back.
type crashedWitness struct{ *store.VaultWitness }

func (crashedWitness) Failed([]byte) error { return errCrash }

// TestVaultWriteInterruptedByACrash: a crash between the journal record of
// a vault write and the write leaves the document before it stored; the
// next start tells that from a rollback (the write's marker is in the
// store, holding the document the journal names) and finishes the write.
// Without the marker the same document is a rollback, refused; a marker
// planted after a write that landed, with the storage rolled back, can only
// bring back the document the journal names.
func TestVaultWriteInterruptedByACrash(t *testing.T) {
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			for _, tc := range []struct {
				name  string
				forge func(kv store.KV, before, current []byte) error
				want  string // the token served after the next start; "" refused
			}{
				{"crash", nil, "next"},
				{"crash, marker deleted", func(kv store.KV, _, _ []byte) error {
					return kv.Commit([]store.Write{{Key: []byte("m/vault_pending"), Delete: true}})
				}, ""},
			} {
				t.Run(tc.name, func(t *testing.T) {
					dir := t.TempDir()
					open := b.New(t)
					st := storetest.OpenStore(t, open())
					storage := vaultStorage(t, open, dir)
					before, current := witnessedVault(t, st, storage, dir)
					v, err := vault.New(vault.Config{Storage: crashingStorage{storage}})
					if err != nil {
						t.Fatal(err)
					}
					if err := v.UnlockWithKeyFile(filepath.Join(dir, "vault.key")); err != nil {
						t.Fatal(err)
					}
					if err := v.SetWitness(crashedWitness{st.VaultWitness(t.Context(), secretClock)}); err != nil {
						t.Fatal(err)
					}
					if err := v.Put("api", bearer("next")); !errors.Is(err, errCrash) {
						t.Fatalf("Put through the crashing storage = %v, want the crash", err)
					}
					st = storetest.Reopen(t, st, open, func(kv store.KV) error {
						if tc.forge == nil {
							return nil
						}
						return tc.forge(kv, before, current)
					})
					if got := mustLoad(t, vaultStorage(t, open, dir)); !bytes.Equal(got, current) {
						t.Fatal("the crash left another document than the one before the write")
					}
					v, err = reopenVault(t, st, vaultStorage(t, open, dir), dir)
					c, gerr := v.Get("api")
					if tc.want == "" {
						if !errors.Is(err, vault.ErrForged) || !errors.Is(gerr, vault.ErrForged) {
							t.Errorf("SetWitness = %v, Get = %q, %v; want ErrForged", err, c.Get("token"), gerr)
						}
						return
					}
					if err != nil || gerr != nil || c.Get("token") != tc.want {
						t.Errorf("after the crash: SetWitness = %v, Get = %q, %v; want the write finished (%q)", err, c.Get("token"), gerr, tc.want)
					}
					ms, err := st.CheckSecrets(t.Context(), map[string][]byte{store.SecretRowVault: mustLoad(t, vaultStorage(t, open, dir))})
					if err != nil || len(ms) != 0 {
						t.Errorf("CheckSecrets after the write was finished = %v, %v; want none", ms, err)
					}
				})
			}
		})
	}
}

// TestPlantedVaultMarkerRestoresTheJournaledDocument: after a write that
// landed, a marker planted with the storage rolled back to the document
// before (the shape of an interrupted write) cannot install the rollback:
// the check writes the document the journal names.
func TestPlantedVaultMarkerRestoresTheJournaledDocument(t *testing.T) {
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			dir := t.TempDir()
			open := b.New(t)
			st := storetest.OpenStore(t, open())
			storage := vaultStorage(t, open, dir)
			before, current := witnessedVault(t, st, storage, dir)
			st = storetest.Reopen(t, st, open, func(kv store.KV) error {
				s := vaultStorage(t, open, dir)
				if _, err := s.Load(); err != nil {
					return err
				}
				if err := s.Replace(before); err != nil {
					return err
				}
				return kv.Commit([]store.Write{{Key: []byte("m/vault_pending"), Value: before}})
			})
			v, err := reopenVault(t, st, vaultStorage(t, open, dir), dir)
			c, gerr := v.Get("api")
			if !errors.Is(err, vault.ErrForged) || !errors.Is(gerr, vault.ErrForged) {
				t.Errorf("SetWitness = %v, Get = %q, %v; want ErrForged (the planted marker is not the journaled document)", err, c.Get("token"), gerr)
			}
			st = storetest.Reopen(t, st, open, func(kv store.KV) error {
				return kv.Commit([]store.Write{{Key: []byte("m/vault_pending"), Value: current}})
			})
			v, err = reopenVault(t, st, vaultStorage(t, open, dir), dir)
			c, gerr = v.Get("api")
			if err != nil || gerr != nil || c.Get("token") != "current" {
				t.Errorf("with the journaled document planted as the marker: SetWitness = %v, Get = %q, %v; want the journaled document (current) back", err, c.Get("token"), gerr)
			}
		})
	}
}

// TestVaultIndexDeletedIsCaughtByTheAudit: the vault's journal index
// deleted with the document rolled back is not a first use: the next start
// finds the row's record in the journal and refuses the document, naming
// the deleted index; CheckSecrets, which reads the whole journal as `latch
// audit verify` does, reports the index that no longer names the row's
// last record.
func TestVaultIndexDeletedIsCaughtByTheAudit(t *testing.T) {
	for _, b := range storetest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			dir := t.TempDir()
			open := b.New(t)
			st := storetest.OpenStore(t, open())
			before, _ := witnessedVault(t, st, vaultStorage(t, open, dir), dir)
			st = storetest.Reopen(t, st, open, func(kv store.KV) error {
				s := vaultStorage(t, open, dir)
				if _, err := s.Load(); err != nil {
					return err
				}
				if err := s.Replace(before); err != nil {
					return err
				}
				return kv.Commit([]store.Write{{Key: []byte("xd/" + store.SecretRowVault), Delete: true}})
			})
			if _, err := reopenVault(t, st, vaultStorage(t, open, dir), dir); !errors.Is(err, store.ErrStateMismatch) || !strings.Contains(err.Error(), "index xd/vault is gone") {
				t.Fatalf("SetWitness with the index deleted and the document rolled back = %v; want a state mismatch naming the deleted index (not a first use)", err)
			}
			ms, err := st.CheckSecrets(t.Context(), map[string][]byte{store.SecretRowVault: before})
			if err != nil {
				t.Fatal(err)
			}
			if len(ms) == 0 || ms[0].Kind != store.MismatchSecret || !strings.Contains(ms[0].Detail, "xd/vault does not name the row's last journal record") {
				t.Errorf("CheckSecrets = %v, want a %s mismatch: the index no longer names the row's last record", ms, store.MismatchSecret)
			}
		})
	}
}
