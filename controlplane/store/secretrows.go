package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/store/backend"
)

// The key rows as the control plane holds them against the journal
// (secretcheck.go): the server reads them at start, `latch audit verify`
// offline.

// SecretRowBytes is the unambiguous encoding of a row's parts, each length
// prefixed: what a row's digest is taken over.
func SecretRowBytes(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = binary.AppendUvarint(b, uint64(len(p)))
		b = append(b, p...)
	}
	return b
}

// StoredKeyRow is the bytes of a latch_keys row whose digest is journaled:
// its name, sealed key and public part (not who created it or when, which
// a key_created record already says).
func StoredKeyRow(k backend.StoredKey) []byte {
	return SecretRowBytes([]byte(k.Name), k.Sealed, []byte(k.Public))
}

// FileKeyRows is the key rows of a data dir: the fingerprint key file,
// and the journal key file with its verifier (what checkpoints are checked
// with), each as stored. A row with a file missing is nil (gone).
func FileKeyRows(data string) (map[string][]byte, error) {
	read := func(names ...string) ([]byte, error) {
		parts := [][]byte{}
		for _, name := range names {
			b, err := os.ReadFile(datadir.Key(data, name))
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			if err != nil {
				return nil, fmt.Errorf("store: read %s: %w", datadir.Key(data, name), err)
			}
			parts = append(parts, b)
		}
		return SecretRowBytes(parts...), nil
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
		return append(SecretRowBytes([]byte(name)), b...)
	}
	return map[string][]byte{
		SecretKeyRow(datadir.FingerprintKey): named(datadir.FingerprintKey, fp),
		SecretKeyRow(datadir.JournalKey):     named(datadir.JournalKey, j),
	}, nil
}

// ReadKeyRows reads the key rows of a store (the latch_keys rows through
// backend.KeyRows, else the key files of dataDir) as the control plane
// holds them against the journal, for `latch audit verify`.
func ReadKeyRows(ctx context.Context, kv KV, dataDir string) (map[string][]byte, error) {
	pg, ok := kv.(backend.KeyRows)
	if !ok {
		return FileKeyRows(dataDir)
	}
	rows := map[string][]byte{}
	for _, name := range []string{datadir.FingerprintKey, datadir.JournalKey} {
		k, err := pg.Key(ctx, name)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		rows[SecretKeyRow(name)] = StoredKeyRow(k)
	}
	return rows, nil
}
