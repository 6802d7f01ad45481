package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/atomicfile"
)

// The control plane's two keys: the HMAC key of intent fingerprints and
// the Ed25519 key that signs the journal's checkpoints.
//
// On Badger they are files in the data dir (DATA/keys/fingerprint.key,
// journal.key and its verifier journal.pub), created on first start.
//
// On PostgreSQL every replica must use the same keys (else two replicas
// give one intent two fingerprints, and checkpoints two signers), and a
// replica has nothing local but its config: the keys live in the store's
// latch_keys table, sealed by Config.KeySealer (the vault's key sealer,
// AEAD under a key derived from the vault's data key, the key's name as
// associated data). The first replica to start creates them
// (insert-if-absent; a replica that loses the race opens the winner's).
// The journal's verifier key is also stored in clear (public), for
// `latch audit verify --store` under a read-only role. So a replica on
// PostgreSQL needs the vault unlocked at start (--vault-key-file): with a
// locked vault it refuses to start (ErrKeysLocked) rather than run without
// its keys.

// Key names in the PostgreSQL store's latch_keys.
const (
	FingerprintKeyName = datadir.FingerprintKey
	JournalKeyName     = datadir.JournalKey
)

// Key errors.
var (
	// ErrKeysLocked: the store's keys are sealed by the vault, which is
	// locked (or not initialized).
	ErrKeysLocked = errors.New("server: the vault is locked, so the store's keys cannot be opened")
	// ErrKeysUnsealable: a stored key does not open with this vault.
	ErrKeysUnsealable = errors.New("server: the store's keys do not open with this vault")
	// ErrNoKeySealer: a PostgreSQL store was configured without
	// Config.KeySealer.
	ErrNoKeySealer = errors.New("server: a PostgreSQL store keeps the keys sealed by the vault, and no key sealer was configured")
)

// KeySealer seals the keys kept in a shared store. Implemented by the
// vault's key sealer (*vault.ArgumentSealer from Vault.KeySealer).
type KeySealer interface {
	// Ready reports whether Seal and Open can work now (vault unlocked).
	Ready() bool
	Seal(ad, plain []byte) ([]byte, error)
	Open(ad, sealed []byte) ([]byte, error)
}

// keySet is the loaded keys.
type keySet struct {
	fp       *fingerprint.Fingerprinter
	signer   *journal.Signer
	verifier string
	// created names the keys this process created in the store (to
	// journal once it is active).
	created []string
	// sealedIn is true when the keys came from the store.
	sealedIn bool
	// rows is the key rows as loaded, held against the journal
	// (secrets.go).
	rows map[string][]byte
}

// loadKeys loads the keys for kv's backend: files in the data dir, or
// sealed records in a PostgreSQL store.
func loadKeys(ctx context.Context, log hclog.Logger, cfg Config, kv store.KV) (*keySet, error) {
	if pg, ok := kv.(backend.KeyRows); ok {
		return loadStoreKeys(ctx, log, cfg, pg)
	}
	return loadFileKeys(cfg.DataDir)
}

func loadFileKeys(data string) (*keySet, error) {
	if err := os.MkdirAll(datadir.Keys(data), 0o700); err != nil {
		return nil, fmt.Errorf("server: create data dir: %w", err)
	}
	fpKey, err := loadOrCreate(keyPath(data, "fingerprint.key"), func() ([]byte, error) { return fingerprint.GenerateKey() })
	if err != nil {
		return nil, err
	}
	fp, err := fingerprint.New(fpKey)
	if err != nil {
		return nil, fmt.Errorf("server: fingerprint key: %w", err)
	}
	var vkey string
	skey, err := loadOrCreate(keyPath(data, "journal.key"), func() ([]byte, error) {
		s, v, err := journal.GenerateKey("latch/activity")
		vkey = v
		return []byte(s), err
	})
	if err != nil {
		return nil, err
	}
	if vkey != "" {
		if err := writeFile(datadir.Verifier(data), []byte(vkey+"\n"), 0o644); err != nil {
			return nil, err
		}
	}
	signer, err := journal.NewSigner(strings.TrimSpace(string(skey)))
	if err != nil {
		return nil, fmt.Errorf("server: journal key %s: %w", keyPath(data, "journal.key"), err)
	}
	rows, err := store.FileKeyRows(data)
	if err != nil {
		return nil, err
	}
	return &keySet{fp: fp, signer: signer, verifier: strings.TrimSpace(readOr(datadir.Verifier(data))), rows: rows}, nil
}

// keyAD is the associated data a stored key is sealed with: a box moved to
// another name does not open.
func keyAD(name string) []byte { return []byte("latch/store-key/" + name) }

func loadStoreKeys(ctx context.Context, log hclog.Logger, cfg Config, pg backend.KeyRows) (*keySet, error) {
	if cfg.KeySealer == nil {
		return nil, fmt.Errorf("%w (Config.KeySealer): pass the vault's KeySealer", ErrNoKeySealer)
	}
	if !cfg.KeySealer.Ready() {
		return nil, fmt.Errorf("%w: a replica on PostgreSQL opens the fingerprint and journal keys in the store with the vault's key, so it needs the vault unlocked when it starts: start latch serve with --vault-key-file FILE (the vault's 32-byte key file, the same on every replica) or --vault-passphrase-file FILE", ErrKeysLocked)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil { // for the socket
		return nil, fmt.Errorf("server: create data dir: %w", err)
	}
	for _, name := range []string{"fingerprint.key", "journal.key"} {
		if _, err := os.Stat(keyPath(cfg.DataDir, name)); err == nil {
			log.Warn("ignoring a local key file: on a PostgreSQL store every replica uses the keys sealed in the store", "file", keyPath(cfg.DataDir, name))
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	holder := cfg.Replica
	if holder == "" {
		holder, _ = os.Hostname()
	}
	ks := &keySet{sealedIn: true, rows: map[string][]byte{}}
	// get returns the plaintext of key name, creating it when absent.
	get := func(name string, gen func() (secret []byte, public string, err error)) ([]byte, string, error) {
		stored, err := pg.Key(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			secret, public, gerr := gen()
			if gerr != nil {
				return nil, "", fmt.Errorf("server: generate the %s key: %w", name, gerr)
			}
			sealed, serr := cfg.KeySealer.Seal(keyAD(name), secret)
			clear(secret)
			if serr != nil {
				return nil, "", fmt.Errorf("server: seal the %s key: %w", name, serr)
			}
			var created bool
			stored, created, err = pg.PutKeyIfAbsent(ctx, backend.StoredKey{Name: name, Sealed: sealed, Public: public, CreatedBy: holder})
			if err == nil && created {
				ks.created = append(ks.created, name)
				log.Info("created the key in the store, sealed by the vault", "key", name)
			}
		}
		if err != nil {
			return nil, "", err
		}
		ks.rows[store.SecretKeyRow(name)] = store.StoredKeyRow(stored)
		plain, err := cfg.KeySealer.Open(keyAD(name), stored.Sealed)
		if err != nil {
			return nil, "", fmt.Errorf("%w: the %s key (created by %s at %s) does not open (%v): this replica's vault is not the one in the store that sealed it; every replica must unlock the same vault (the store's) with its key file", ErrKeysUnsealable, name, stored.CreatedBy, stored.CreatedAt.UTC().Format(time.RFC3339), err)
		}
		return plain, stored.Public, nil
	}
	fpKey, _, err := get(FingerprintKeyName, func() ([]byte, string, error) {
		k, err := fingerprint.GenerateKey()
		return k, "", err
	})
	if err != nil {
		return nil, err
	}
	ks.fp, err = fingerprint.New(fpKey)
	clear(fpKey)
	if err != nil {
		return nil, fmt.Errorf("server: the store's fingerprint key: %w", err)
	}
	skey, vkey, err := get(JournalKeyName, func() ([]byte, string, error) {
		s, v, err := journal.GenerateKey("latch/activity")
		return []byte(s), v, err
	})
	if err != nil {
		return nil, err
	}
	ks.signer, err = journal.NewSigner(strings.TrimSpace(string(skey)))
	clear(skey)
	if err != nil {
		return nil, fmt.Errorf("server: the store's journal key: %w", err)
	}
	ks.verifier = strings.TrimSpace(vkey)
	// The clear verifier is what auditors check checkpoints with: it must
	// be the signer's.
	probe, err := ks.signer.Sign(0, tlog.Hash{}, time.Now())
	if err == nil {
		_, err = journal.OpenCheckpoint(probe, ks.verifier)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the journal's public verifier key in latch_keys does not verify the sealed signing key's signatures (%v): the row was modified; restore it from a backup", ErrKeysUnsealable, err)
	}
	return ks, nil
}

// journalCreated journals the keys this replica created in the store
// (kind "key_created": which key, by which replica; never key material,
// but the journal verifier, which is public). Called once the replica is
// active, so the record is fenced like every other.
func journalCreated(ctx context.Context, st *store.Store, ks *keySet, replica string) error {
	if len(ks.created) == 0 {
		return nil
	}
	return st.Update(ctx, func(tx *store.Tx) error {
		for _, name := range ks.created {
			reason := fmt.Sprintf("%s key created in the store by replica %s, sealed by the vault", name, replica)
			if name == JournalKeyName {
				reason += "; checkpoints verify with " + ks.verifier
			}
			if _, err := tx.SecretRecord(store.SecretKeyRow(name), ks.rows[store.SecretKeyRow(name)], store.KindKeyCreated, "latch", reason, time.Now()); err != nil {
				return err
			}
		}
		return nil
	})
}

func loadOrCreate(path string, gen func() ([]byte, error)) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("server: read %s: %w", path, err)
	}
	b, err = gen()
	if err != nil {
		return nil, fmt.Errorf("server: generate %s: %w", path, err)
	}
	if err := writeFile(path, b, 0o600); err != nil {
		return nil, err
	}
	return b, nil
}

// writeFile replaces path durably (atomicfile: temp file, fsync, rename,
// directory fsync).
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := atomicfile.Write(path, data, mode, true); err != nil {
		return fmt.Errorf("server: write %s: %w", path, err)
	}
	return nil
}

func readOr(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}
