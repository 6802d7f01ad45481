package vault

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
)

// Errors returned by the vault. Test with errors.Is.
var (
	// ErrLocked: the vault is locked (or not initialized); unlock it first.
	ErrLocked = errors.New("vault: locked")
	// ErrNotFound: no credential has that name.
	ErrNotFound = errors.New("vault: credential not found")
	// ErrWrongPassphrase: the passphrase or key file does not open this vault.
	ErrWrongPassphrase = errors.New("vault: wrong passphrase or key file")
	// ErrWrongMethod: the vault was initialized with the other unlock method
	// (passphrase vs key file).
	ErrWrongMethod = errors.New("vault: wrong unlock method")
	// ErrExists: Init found a vault (or GenerateKeyFile a key file) already there.
	ErrExists = errors.New("vault: already exists")
	// ErrNotInitialized: there is no vault file yet; run Init first.
	ErrNotInitialized = errors.New("vault: not initialized")
	// ErrCorrupt: the vault file is malformed or was modified outside latch.
	ErrCorrupt = errors.New("vault: file corrupt or tampered")
	// ErrInvalidName: a credential name does not match ^[a-z0-9][a-z0-9_.-]{0,63}$.
	ErrInvalidName = errors.New("vault: invalid credential name")
	// ErrInvalidCredential: Credential.Validate rejected the credential.
	ErrInvalidCredential = errors.New("vault: invalid credential")
	// ErrWrongKind: the credential's kind is not for this channel (an SSH
	// key asked for as an HTTP credential, or the other way round).
	ErrWrongKind = errors.New("vault: credential kind does not fit the channel")
)

// Config holds what a Vault needs.
type Config struct {
	// Path is the vault file. Its directory must be private to the
	// control plane; the file itself is always written with mode 0600.
	// Required unless Storage is set.
	Path string
	// Storage, when set, keeps the vault document instead of the file at
	// Path (a shared store, so that every replica opens the same vault).
	Storage Storage
	// Logger receives the vault's events (never a secret). Nil discards.
	Logger hclog.Logger
	// KDF are the argon2id parameters Init uses for a passphrase vault.
	// Zero means DefaultParams. Unlock always uses the parameters recorded
	// in the file.
	KDF Params
	// OnChange, if set, is called after every lock, unlock and Init with the
	// new status, on the goroutine that made the change, after the vault's
	// own lock is released (so it may call any Vault method) and before
	// that Lock/Unlock/Init returns. Calls for concurrent changes may
	// arrive out of order: Epoch only grows, so ignore a status whose Epoch
	// is not above the last one seen.
	OnChange func(Status)
}

// Status is what the vault tells about itself without the key.
type Status struct {
	// Locked is true when no key is in memory; Get and Put fail.
	Locked bool
	// Initialized is false until Init has created the vault file.
	Initialized bool
	// Method is "argon2id" (passphrase) or "keyfile"; "" when not initialized.
	Method string
	// Epoch increases by one on every lock and every unlock. It lives in
	// memory only and starts at 0 with each process: pending approvals
	// record the epoch they were made in and are void once it moves.
	Epoch uint64
	// Names is the number of credentials stored.
	Names int
	// Path is where the vault is kept: its file, or the store that holds it.
	Path string
}

// Vault holds credentials encrypted at rest in one file. It is safe for
// concurrent use. One process owns the file: the vault reads it once in New
// and afterwards only writes it.
type Vault struct {
	path     string
	storage  Storage
	log      hclog.Logger
	kdf      Params
	onChange func(Status)

	mu    sync.RWMutex
	file  *fileV1        // nil until initialized; replaced, never mutated
	dek   *[keySize]byte // data key; nil while locked
	epoch uint64
	raw   []byte // the document as stored; nil until initialized

	// witness, once set, holds every load and write of the document
	// (witness.go); refused is its verdict on a document it did not
	// record, which every use of the vault then returns.
	witness Witness
	refused error

	// tokens caches the access tokens credentials fetch (a kind that gets
	// tokens) by name, in memory only; Lock drops them.
	tokensMu sync.Mutex
	tokens   map[string]*tokenCache
}

// New opens the vault file at cfg.Path if it exists (checking its
// structure; a damaged file is an error wrapping ErrCorrupt) or prepares to
// create it with Init. The vault starts locked.
func New(cfg Config) (*Vault, error) {
	if cfg.Storage == nil {
		if cfg.Path == "" {
			return nil, errors.New("vault: Config.Path is empty; set the vault file path")
		}
		cfg.Storage = FileStorage(cfg.Path)
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.KDF == (Params{}) {
		cfg.KDF = DefaultParams()
	}
	if err := cfg.KDF.validate(); err != nil {
		return nil, fmt.Errorf("vault: Config.KDF: %w", err)
	}
	v := &Vault{
		path:     cfg.Storage.String(),
		storage:  cfg.Storage,
		log:      cfg.Logger.Named("vault"),
		kdf:      cfg.KDF,
		onChange: cfg.OnChange,
	}
	raw, f, err := load(cfg.Storage)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		v.log.Info("vault not initialized", "path", v.path)
		return v, nil
	case err != nil:
		return nil, err
	}
	if p, ok := cfg.Storage.(FileStorage); ok {
		if st, err := os.Stat(string(p)); err == nil && st.Mode().Perm()&0o077 != 0 {
			v.log.Warn("vault file is readable by group or others; the next write resets it to 0600", "path", v.path, "mode", fmt.Sprintf("%#o", st.Mode().Perm()))
		}
	}
	v.file, v.raw = f, raw
	v.log.Info("vault opened locked", "path", v.path, "method", f.KDF.Algorithm, "names", len(f.Entries))
	return v, nil
}

// load reads and parses the document s holds.
func load(s Storage) ([]byte, *fileV1, error) {
	data, err := s.Load()
	if err != nil {
		return nil, nil, err
	}
	f, err := parse(s, data)
	return data, f, err
}

func parse(s Storage, data []byte) (*fileV1, error) {
	f, err := parseFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	return f, nil
}

// Reload reads the document again from the Storage: another process (the
// replica that was active before this one) may have changed the
// credentials since New. The header (id, unlock method, check value) must
// be the one this vault opened; while unlocked the document's MAC must
// verify, else nothing changes and the error wraps ErrCorrupt. A vault
// initialized elsewhere since New is picked up (still locked). With a
// Witness the document must be the one it recorded, else the error wraps
// ErrForged and the vault refuses every use until a Reload passes.
func (v *Vault) Reload() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	data, err := v.witnessed()
	if errors.Is(err, fs.ErrNotExist) {
		if v.file != nil {
			return fmt.Errorf("%w: the vault at %s disappeared", ErrCorrupt, v.path)
		}
		return nil
	}
	if err != nil {
		return err
	}
	f, err := parse(v.storage, data)
	if err != nil {
		return err
	}
	if v.file != nil && (!bytes.Equal(v.file.ID, f.ID) || v.file.KDF.Algorithm != f.KDF.Algorithm || !bytes.Equal(v.file.Check, f.Check)) {
		return fmt.Errorf("%w: the vault at %s was replaced by another vault since it was opened; restart latch", ErrCorrupt, v.path)
	}
	if v.dek != nil {
		if err := verifyMAC(f, v.dek); err != nil {
			return err
		}
	}
	v.file, v.raw = f, data
	v.log.Debug("vault reloaded", "path", v.path, "names", len(f.Entries))
	return nil
}

// Init creates a new passphrase vault with the configured argon2id
// parameters and leaves it unlocked. It refuses (ErrExists) if the vault
// file exists. The vault never keeps or modifies passphrase; the caller
// may zero it afterwards.
func (v *Vault) Init(passphrase []byte) error {
	if len(passphrase) == 0 {
		return errors.New("vault: passphrase is empty")
	}
	k := kdfV1{Algorithm: algArgon2id, Salt: make([]byte, saltSize), Time: v.kdf.Time, MemoryKiB: v.kdf.MemoryKiB, Threads: v.kdf.Threads}
	if _, err := io.ReadFull(rand.Reader, k.Salt); err != nil {
		return fmt.Errorf("vault: read random salt: %w", err)
	}
	return v.create(k, func(id []byte) (*[keySize]byte, error) {
		return kekFromPassphrase(passphrase, k), nil
	})
}

// InitWithKeyFile creates a new vault unlocked by the key file at keyPath
// (made with GenerateKeyFile if absent) and leaves it unlocked. For dev:
// whoever reads the key file reads the vault.
func (v *Vault) InitWithKeyFile(keyPath string) error {
	if err := v.checkAbsent(); err != nil {
		return err // before making a key file nobody will use
	}
	if _, err := os.Stat(keyPath); errors.Is(err, fs.ErrNotExist) {
		if err := GenerateKeyFile(keyPath); err != nil {
			return err
		}
		v.log.Info("generated vault key file", "path", keyPath)
	}
	key, err := readKeyFile(keyPath)
	if err != nil {
		return err
	}
	defer clear(key)
	return v.create(kdfV1{Algorithm: algKeyFile}, func(id []byte) (*[keySize]byte, error) {
		return kekFromKeyFile(key, id)
	})
}

// checkAbsent fails with ErrExists if the vault is initialized or its file
// exists. create checks again, atomically, when it links the file.
func (v *Vault) checkAbsent() error {
	v.mu.RLock()
	opened := v.file != nil
	v.mu.RUnlock()
	if opened {
		return fmt.Errorf("%w: %s", ErrExists, v.path)
	}
	there, err := exists(v.storage)
	if err != nil {
		return err
	}
	if there {
		return fmt.Errorf("%w: %s", ErrExists, v.path)
	}
	return nil
}

func (v *Vault) create(k kdfV1, makeKEK func(id []byte) (*[keySize]byte, error)) error {
	if err := v.checkAbsent(); err != nil {
		return err
	}

	f := &fileV1{Version: fileVersion, ID: make([]byte, idSize), KDF: k, Entries: map[string][]byte{}}
	dek := new([keySize]byte)
	if _, err := io.ReadFull(rand.Reader, f.ID); err != nil {
		return fmt.Errorf("vault: read random id: %w", err)
	}
	if _, err := io.ReadFull(rand.Reader, dek[:]); err != nil {
		return fmt.Errorf("vault: read random key: %w", err)
	}
	kek, err := makeKEK(f.ID) // slow for argon2id: outside the lock
	if err != nil {
		return err
	}
	f.Check, err = sealCheck(dek, kek, f.ID)
	clear(kek[:])
	if err != nil {
		return err
	}
	f.MAC = fileMAC(f, dek)
	data, err := f.marshal()
	if err != nil {
		return err
	}

	v.mu.Lock()
	if v.file != nil {
		v.mu.Unlock()
		clear(dek[:])
		return fmt.Errorf("%w: %s", ErrExists, v.path)
	}
	if err := v.store(data, nil, v.storage.Create); err != nil {
		v.mu.Unlock()
		clear(dek[:])
		if errors.Is(err, fs.ErrExist) && !errors.Is(err, ErrExists) {
			err = fmt.Errorf("%w: %w", ErrExists, err)
		}
		return err
	}
	v.file, v.raw = f, data
	v.dek = dek
	v.epoch++
	v.log.Info("vault initialized and unlocked", "path", v.path, "method", k.Algorithm, "epoch", v.epoch)
	v.notifyLocked()
	return nil
}

// Unlock derives the key from passphrase with the file's argon2id
// parameters and unlocks the vault. A passphrase that does not open the
// check value gives ErrWrongPassphrase; a file whose MAC does not verify
// gives ErrCorrupt and stays locked. Unlocking an unlocked vault with the
// right passphrase changes nothing (the epoch does not move).
func (v *Vault) Unlock(passphrase []byte) error {
	f, err := v.fileFor(algArgon2id)
	if err != nil {
		return err
	}
	kek := kekFromPassphrase(passphrase, f.KDF)
	defer clear(kek[:])
	return v.unlock(f, kek)
}

// UnlockWithKeyFile unlocks a vault made by InitWithKeyFile.
func (v *Vault) UnlockWithKeyFile(keyPath string) error {
	f, err := v.fileFor(algKeyFile)
	if err != nil {
		return err
	}
	key, err := readKeyFile(keyPath)
	if err != nil {
		return err
	}
	defer clear(key)
	kek, err := kekFromKeyFile(key, f.ID)
	if err != nil {
		return err
	}
	defer clear(kek[:])
	return v.unlock(f, kek)
}

// fileFor returns the current file if it was made with method alg.
func (v *Vault) fileFor(alg string) (*fileV1, error) {
	v.mu.RLock()
	f := v.file
	v.mu.RUnlock()
	switch {
	case f == nil:
		return nil, fmt.Errorf("%w: no vault at %s; run init first", ErrNotInitialized, v.path)
	case f.KDF.Algorithm != alg && f.KDF.Algorithm == algKeyFile:
		return nil, fmt.Errorf("%w: this vault is unlocked with its key file, not a passphrase", ErrWrongMethod)
	case f.KDF.Algorithm != alg:
		return nil, fmt.Errorf("%w: this vault is unlocked with a passphrase, not a key file", ErrWrongMethod)
	}
	return f, nil
}

func (v *Vault) unlock(snap *fileV1, kek *[keySize]byte) error {
	dek, err := openCheck(snap, kek)
	if err != nil {
		if errors.Is(err, ErrWrongPassphrase) {
			v.log.Warn("vault unlock refused: wrong passphrase or key file")
		} else {
			v.log.Error("vault unlock refused", "error", err)
		}
		return err
	}

	v.mu.Lock()
	// The header (id, kdf, check) never changes after Init, so the key
	// opened from the snapshot opens the current file; the MAC covers the
	// current entries.
	if err := verifyMAC(v.file, dek); err != nil {
		v.mu.Unlock()
		clear(dek[:])
		v.log.Error("vault unlock refused", "error", err)
		return err
	}
	if v.dek != nil {
		v.mu.Unlock()
		clear(dek[:])
		return nil
	}
	v.dek = dek
	v.epoch++
	v.log.Info("vault unlocked", "epoch", v.epoch)
	v.notifyLocked()
	return nil
}

// Lock zeroes the key in memory. Get, Put and Delete fail with ErrLocked
// until the next Unlock. Locking a locked vault changes nothing.
func (v *Vault) Lock() {
	v.mu.Lock()
	if v.dek == nil {
		v.mu.Unlock()
		return
	}
	clear(v.dek[:])
	v.dek = nil
	v.epoch++
	v.tokensMu.Lock()
	v.tokens = nil // cached access tokens go with the key
	v.tokensMu.Unlock()
	v.log.Info("vault locked", "epoch", v.epoch)
	v.notifyLocked()
}

// notifyLocked is called with v.mu held for writing; it releases v.mu and
// then calls OnChange with the status as of the change.
func (v *Vault) notifyLocked() {
	st := v.statusLocked()
	v.mu.Unlock()
	if v.onChange != nil {
		v.onChange(st)
	}
}

// Status reports the vault's state. It never needs the key.
func (v *Vault) Status() Status {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return v.statusLocked()
}

func (v *Vault) statusLocked() Status {
	st := Status{Locked: v.dek == nil, Epoch: v.epoch, Path: v.path}
	if v.file != nil {
		st.Initialized = true
		st.Method = v.file.KDF.Algorithm
		st.Names = len(v.file.Entries)
	}
	return st
}

// Put validates c and stores it under name, replacing any credential of
// that name. The file is rewritten atomically before Put returns.
func (v *Vault) Put(name string, c Credential) error {
	if err := checkName(name); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dek == nil {
		return ErrLocked
	}
	sealed, err := sealEntry(v.file.ID, name, c, v.dek)
	if err != nil {
		return err
	}
	f := v.file.clone()
	if _, ok := f.Entries[name]; !ok && len(f.Entries) >= maxEntries {
		return fmt.Errorf("vault: at most %d credentials", maxEntries)
	}
	f.Entries[name] = sealed
	if err := v.commit(f); err != nil {
		return err
	}
	v.log.Debug("credential stored", "name", name, "kind", c.kindLabel())
	return nil
}

// Delete removes the credential name. It needs the vault unlocked.
func (v *Vault) Delete(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dek == nil {
		return ErrLocked
	}
	if _, ok := v.file.Entries[name]; !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	f := v.file.clone()
	delete(f.Entries, name)
	if err := v.commit(f); err != nil {
		return err
	}
	v.log.Debug("credential deleted", "name", name)
	return nil
}

// commit writes f with a fresh MAC and makes it current. v.mu is held.
func (v *Vault) commit(f *fileV1) error {
	f.MAC = fileMAC(f, v.dek)
	data, err := f.marshal()
	if err != nil {
		return err
	}
	if err := v.store(data, v.raw, v.storage.Replace); err != nil {
		return err
	}
	v.file, v.raw = f, data
	return nil
}

// Get decrypts and returns the credential name. A ciphertext that was
// modified, or moved from another name, gives ErrCorrupt.
func (v *Vault) Get(name string) (Credential, error) {
	if err := checkName(name); err != nil {
		return Credential{}, err
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.refused != nil {
		return Credential{}, v.refused
	}
	if v.dek == nil {
		return Credential{}, ErrLocked
	}
	sealed, ok := v.file.Entries[name]
	if !ok {
		return Credential{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	c, err := openEntry(v.file.ID, name, sealed, v.dek)
	if err == nil {
		c.tokens = v.tokenCache(name) // kept for the kinds that fetch tokens
	}
	return c, err
}

// tokenCache is the token cache of credential name.
func (v *Vault) tokenCache(name string) *tokenCache {
	v.tokensMu.Lock()
	defer v.tokensMu.Unlock()
	if v.tokens == nil {
		v.tokens = make(map[string]*tokenCache)
	}
	tc, ok := v.tokens[name]
	if !ok {
		tc = &tokenCache{}
		v.tokens[name] = tc
	}
	return tc
}

// List returns the credential names, sorted. Names are not secret (they
// are credential_ref values in tool catalogs and stored in clear in the
// file), so List works while the vault is locked: an operator can see what
// a locked vault holds. Before Init the list is empty.
func (v *Vault) List() ([]string, error) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.refused != nil {
		return nil, v.refused
	}
	if v.file == nil {
		return []string{}, nil
	}
	return v.file.names(), nil
}

// DeriveKey returns n bytes (16..64) of key derived from the vault's data
// key for purpose, e.g. "fingerprint" for the intent-fingerprint HMAC key.
// The same vault gives the same key for the same purpose across restarts
// and lock cycles; different purposes give independent keys. It needs the
// vault unlocked.
func (v *Vault) DeriveKey(purpose string, n int) ([]byte, error) {
	if purpose == "" || n < 16 || n > 64 {
		return nil, errors.New("vault: DeriveKey needs a purpose and 16 to 64 bytes")
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if v.dek == nil {
		return nil, ErrLocked
	}
	return subKey(v.dek, v.file.ID, "latch/vault/derive/v1/"+purpose, n), nil
}
