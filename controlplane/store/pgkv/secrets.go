package pgkv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// What a replica shares through the PostgreSQL store besides the records
// (schema 4): the control plane's keys, sealed, and the vault document.
// The store never sees a key in clear: callers seal before PutKeyIfAbsent
// and open after Keys.

// ErrVaultConflict is returned by the vault storage's Replace when the
// vault in the store changed since this replica last read it.
var ErrVaultConflict = errors.New("store: the vault in the store was changed by another replica")

// PutKeyIfAbsent stores key unless a key of that name exists, and returns
// the stored key: the caller's (created true) or the one another replica
// stored first (created false). Concurrent callers all get the same row: an
// insert that conflicts waits for the winner's transaction, then reads its
// row. It needs no lease: keys are written once and never changed.
func (k *KV) PutKeyIfAbsent(ctx context.Context, key backend.StoredKey) (backend.StoredKey, bool, error) {
	if key.Name == "" || len(key.Sealed) == 0 {
		return backend.StoredKey{}, false, errors.New("store: PutKeyIfAbsent needs a name and sealed bytes")
	}
	err := k.pool.QueryRow(ctx, `INSERT INTO latch_keys (name, sealed, public, created_by) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO NOTHING RETURNING created_at`, key.Name, key.Sealed, key.Public, key.CreatedBy).Scan(&key.CreatedAt)
	if err == nil {
		return key, true, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return backend.StoredKey{}, false, fmt.Errorf("store: store the %s key: %w", key.Name, err)
	}
	got, err := k.Key(ctx, key.Name)
	if err != nil {
		return backend.StoredKey{}, false, err
	}
	return got, false, nil
}

// Key reads the key name, or ErrNotFound.
func (k *KV) Key(ctx context.Context, name string) (backend.StoredKey, error) {
	got := backend.StoredKey{Name: name}
	err := k.pool.QueryRow(ctx, "SELECT sealed, public, created_by, created_at FROM latch_keys WHERE name = $1", name).
		Scan(&got.Sealed, &got.Public, &got.CreatedBy, &got.CreatedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.StoredKey{}, fmt.Errorf("%w: no %s key in the store", backend.ErrNotFound, name)
	case err != nil:
		return backend.StoredKey{}, fmt.Errorf("store: read the %s key: %w", name, err)
	}
	return got, nil
}

// PublicKey reads only the clear part of key name (the journal's verifier
// key), or ErrNotFound: a role that may SELECT only latch_keys' public
// column is enough.
func (k *KV) PublicKey(ctx context.Context, name string) (string, error) {
	var pub string
	err := k.pool.QueryRow(ctx, "SELECT public FROM latch_keys WHERE name = $1", name).Scan(&pub)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("%w: no %s key in the store (no replica has started on it yet)", backend.ErrNotFound, name)
	case err != nil:
		return "", fmt.Errorf("store: read the %s public key: %w", name, err)
	}
	return pub, nil
}

// VaultStorage keeps the vault document in the store (it implements
// vault.Storage): every replica on the database opens the same vault.
// Writes are fenced like commits once this backend holds the lease, and
// each write names the generation it replaces, so a replica never
// overwrites a version it has not read (ErrVaultConflict).
func (k *KV) VaultStorage() *Vault { return &Vault{k: k} }

// VaultDocument is VaultStorage as the backend.VaultRow capability.
func (k *KV) VaultDocument() backend.Document { return k.VaultStorage() }

var _ backend.VaultRow = (*KV)(nil)

// Vault is the vault document's row in the store (VaultStorage).
type Vault struct {
	k   *KV
	mu  sync.Mutex
	gen int64 // the generation last read or written; 0 before
}

// Load reads the document; the error wraps fs.ErrNotExist when no vault
// was created on this database yet.
func (p *Vault) Load() ([]byte, error) {
	ctx, cancel := p.k.ctx()
	defer cancel()
	var doc []byte
	var gen int64
	err := p.k.pool.QueryRow(ctx, "SELECT doc, generation FROM latch_vault WHERE id = 1").Scan(&doc, &gen)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("store: no vault in the store: %w", fs.ErrNotExist)
	case err != nil:
		return nil, fmt.Errorf("store: read the vault: %w", err)
	}
	p.mu.Lock()
	p.gen = gen
	p.mu.Unlock()
	return doc, nil
}

// Create stores the first document; when another replica created one
// first the error wraps fs.ErrExist and nothing is written.
func (p *Vault) Create(data []byte) error {
	var gen int64
	err := p.write(func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `INSERT INTO latch_vault (id, doc, generation) VALUES (1, $1, 1)
			ON CONFLICT (id) DO NOTHING RETURNING generation`, data).Scan(&gen)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("store: a vault already exists in the store (another replica created it): %w", fs.ErrExist)
	}
	if err != nil {
		return fmt.Errorf("store: create the vault: %w", err)
	}
	p.mu.Lock()
	p.gen = gen
	p.mu.Unlock()
	return nil
}

// Replace stores data over the generation last read or written.
func (p *Vault) Replace(data []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var gen int64
	err := p.write(func(ctx context.Context, tx pgx.Tx) error {
		return tx.QueryRow(ctx, `UPDATE latch_vault SET doc = $1, generation = generation + 1, updated_at = now()
			WHERE id = 1 AND generation = $2 RETURNING generation`, data, p.gen).Scan(&gen)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w since it was read (generation %d): nothing was written; restart this replica to read it again", ErrVaultConflict, p.gen)
	}
	if err != nil {
		return fmt.Errorf("store: write the vault: %w", err)
	}
	p.gen = gen
	return nil
}

// write runs fn in a transaction fenced by this backend's epoch (when it
// holds the lease).
func (p *Vault) write(fn func(context.Context, pgx.Tx) error) error {
	if p.k.closed.Load() {
		return backend.ErrClosed
	}
	ctx, cancel := p.k.ctx()
	defer cancel()
	err := pgx.BeginFunc(ctx, p.k.pool, func(tx pgx.Tx) error {
		if e := p.k.epoch.Load(); e != 0 {
			if _, err := tx.Exec(ctx, fenceCommit, e); err != nil {
				return err
			}
		}
		return fn(ctx, tx)
	})
	if ferr := fencedErr(err); ferr != nil {
		return ferr
	}
	return err
}

func (p *Vault) String() string { return "the PostgreSQL store (table latch_vault)" }

// VaultInfo is what may be told about the vault's row without opening it.
type VaultInfo struct {
	Generation int64
	Updated    time.Time
	Bytes      int
}

// keyInfo lists the stored keys without their sealed bytes.
func (k *KV) keyInfo(ctx context.Context) ([]backend.StoredKey, error) {
	rows, err := k.pool.Query(ctx, "SELECT name, public, created_by, created_at FROM latch_keys ORDER BY name")
	if err != nil {
		return nil, fmt.Errorf("store: read latch_keys: %w", err)
	}
	defer rows.Close()
	var out []backend.StoredKey
	for rows.Next() {
		var key backend.StoredKey
		if err := rows.Scan(&key.Name, &key.Public, &key.CreatedBy, &key.CreatedAt); err != nil {
			return nil, fmt.Errorf("store: read latch_keys: %w", err)
		}
		out = append(out, key)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: read latch_keys: %w", err)
	}
	return out, nil
}

func (k *KV) vaultInfo(ctx context.Context) (*VaultInfo, error) {
	v := &VaultInfo{}
	err := k.pool.QueryRow(ctx, "SELECT generation, updated_at, length(doc) FROM latch_vault WHERE id = 1").Scan(&v.Generation, &v.Updated, &v.Bytes)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("store: read latch_vault: %w", err)
	}
	return v, nil
}
