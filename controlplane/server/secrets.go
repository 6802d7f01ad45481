package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
)

// The key rows against the journal (store/secretcheck.go): the bytes of
// each key row as loaded are held against the row's latest journal
// record before the control plane serves with them, and recorded on
// first use when the store has none (a store written before the records;
// a key file made at this start). The vault document is held by the
// vault itself, through Config.VaultWitness.

// rowBytes is the unambiguous encoding of a row's parts, each length
// prefixed: what a row's digest is taken over.
func rowBytes(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// storedKeyRow is the bytes of a latch_keys row whose digest is journaled:
// its name, sealed key and public part (not who created it or when, which
// a key_created record already says).
func storedKeyRow(k backend.StoredKey) []byte {
	return rowBytes([]byte(k.Name), k.Sealed, []byte(k.Public))
}

// fileKeyRows is the key rows of a data dir: the fingerprint key file,
// and the journal key file with its verifier (what checkpoints are checked
// with), each as stored. A row with a file missing is nil (gone).
func fileKeyRows(data string) (map[string][]byte, error) {
	read := func(names ...string) ([]byte, error) {
		parts := [][]byte{}
		for _, name := range names {
			b, err := os.ReadFile(keyPath(data, name))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("server: read %s: %w", keyPath(data, name), err)
			}
			parts = append(parts, b)
		}
		return rowBytes(parts...), nil
	}
	fp, err := read("fingerprint.key")
	if err != nil {
		return nil, err
	}
	j, err := read("journal.key", "journal.pub")
	if err != nil {
		return nil, err
	}
	// The row's name leads its bytes: a file moved to the other row does
	// not hash alike.
	named := func(name string, b []byte) []byte {
		if b == nil {
			return nil
		}
		return append(rowBytes([]byte(name)), b...)
	}
	return map[string][]byte{
		store.SecretKeyRow(FingerprintKeyName): named(FingerprintKeyName, fp),
		store.SecretKeyRow(JournalKeyName):     named(JournalKeyName, j),
	}, nil
}

// SecretRows reads the key rows of a store (the latch_keys rows through
// backend.KeyRows, else the key files of dataDir) as the control plane
// holds them against the journal, for `latch audit verify`.
func SecretRows(ctx context.Context, kv store.KV, dataDir string) (map[string][]byte, error) {
	pg, ok := kv.(backend.KeyRows)
	if !ok {
		return fileKeyRows(dataDir)
	}
	rows := map[string][]byte{}
	for _, name := range []string{FingerprintKeyName, JournalKeyName} {
		k, err := pg.Key(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rows[store.SecretKeyRow(name)] = storedKeyRow(k)
	}
	return rows, nil
}

// checkSecrets holds the key rows loaded (ks.rows) against the journal.
// Run on the active replica (fenced on PostgreSQL): it records a row on
// first use.
func checkSecrets(ctx context.Context, log hclog.Logger, st *store.Store, ks *keySet) error {
	names := make([]string, 0, len(ks.rows))
	for row := range ks.rows {
		names = append(names, row)
	}
	slices.Sort(names)
	for _, row := range names {
		err := st.CheckSecret(row, ks.rows[row])
		if errors.Is(err, store.ErrNotFound) {
			if err := st.RecordSecret(ctx, row, ks.rows[row], time.Now()); err != nil {
				return fmt.Errorf("server: record the %s row in the journal: %w", row, err)
			}
			log.Named("server").Info("recorded the key row in the journal on first use; a later change to it stops the control plane", "row", row)
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %v (the %s row the control plane signs or fingerprints with is not the one journaled: not serving with it)", ErrStateMismatch, err, row)
		}
	}
	return nil
}
