package audit

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
)

// The secret rows (the sealed vault document and the key rows) are held
// against their journal records with the state (store.CheckSecrets): a
// vault document swapped or rolled back, or a key row replaced, is a
// mismatch of kind secret_digest naming the row.

// fileSecrets reads a data dir's secret rows: its key files, and the vault
// file at the default place (DATA/vault.json); a vault kept elsewhere
// (--vault) is not read here, and the start-up check holds it.
func fileSecrets(dataDir string) (map[string][]byte, error) {
	rows, err := store.ReadKeyRows(context.Background(), nil, dataDir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	doc, err := os.ReadFile(datadir.Vault(dataDir))
	switch {
	case err == nil:
		rows[store.SecretRowVault] = doc
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("audit: read the vault: %w", err)
	}
	return rows, nil
}

// storeSecrets reads a shared store's secret rows: its key rows and, when
// it keeps the vault (backend.VaultRow), the vault document (nil when
// there is none).
func storeSecrets(ctx context.Context, kv backend.KV) (map[string][]byte, error) {
	rows, err := store.ReadKeyRows(ctx, kv, "")
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	vr, ok := kv.(backend.VaultRow)
	if !ok {
		return rows, nil // the vault is a file the start-up check holds
	}
	doc, err := vr.VaultDocument().Load()
	switch {
	case err == nil:
		rows[store.SecretRowVault] = doc
	case errors.Is(err, fs.ErrNotExist):
		rows[store.SecretRowVault] = nil // journaled but gone is a mismatch
	default:
		return nil, fmt.Errorf("audit: %w", err)
	}
	return rows, nil
}

// checkSecrets adds the secret rows' mismatches to rep.
func (d *Dir) checkSecrets(ctx context.Context, rep *store.StateReport) error {
	if d.secrets == nil || rep == nil {
		return nil
	}
	ms, err := d.st.CheckSecrets(ctx, d.secrets)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	rep.Mismatches = append(rep.Mismatches, ms...)
	return nil
}
