// Package audit reads a stopped control plane's data directory offline, or
// a PostgreSQL store live (through one read-only snapshot, so a running
// active replica may go on committing), and presents its activity journal
// to the journal package for verification and export. It never writes:
// on PostgreSQL a role with only SELECT suffices.
package audit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/datadir"
	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/backends"
)

// Dir is an opened data directory or PostgreSQL store.
type Dir struct {
	st       *store.Store
	journal  *journalCopy
	Verifier string
	// name says where the journal was read, for messages (never a
	// connection string: it may hold a password).
	name string
	// secrets is the secret rows as stored (secrets.go), held against
	// their journal records with the state.
	secrets map[string][]byte
}

var _ journal.Source = (*Dir)(nil)

// Open opens a data dir, or a shared store given its --store value
// (backends.IsSpec: a PostgreSQL connection string), for reading. A data dir fails while a control
// plane runs on it (Badger holds a lock): stop it first, or verify an
// export instead. A PostgreSQL store is read live, from one consistent
// snapshot.
func Open(dataDir string) (*Dir, error) { return open(dataDir, nil) }

// open is Open reporting its reading of the journal to progress (when set).
func open(dataDir string, progress func(journal.Progress)) (*Dir, error) {
	d, err := openDir(dataDir)
	if err != nil {
		return nil, err
	}
	if err := d.read(progress); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// openDir opens a data dir or PostgreSQL store as open does, without
// reading its journal yet (read does).
func openDir(dataDir string) (*Dir, error) {
	if backends.IsSpec(dataDir) {
		return openStore(dataDir)
	}
	if _, err := os.Stat(datadir.DB(dataDir)); err != nil {
		return nil, fmt.Errorf("audit: %s holds no control plane data (no %s): pass the --data dir of a control plane", dataDir, datadir.DB(dataDir))
	}
	vkey, err := os.ReadFile(datadir.Verifier(dataDir))
	if err != nil {
		return nil, fmt.Errorf("audit: read the journal verifier key: %w", err)
	}
	kv, err := backends.OpenReader(context.Background(), "", datadir.DB(dataDir), nil)
	if err != nil {
		return nil, fmt.Errorf("audit: %w (if `latch serve` or `latch dev` runs on this data dir, stop it first or use `latch audit export` on a copy)", err)
	}
	rows, err := fileSecrets(dataDir)
	if err != nil {
		kv.Close()
		return nil, err
	}
	d, err := newDir(kv, strings.TrimSpace(string(vkey)), dataDir)
	if err == nil {
		d.secrets = rows
	}
	return d, err
}

// newDir opens the store on kv (which the Dir then owns).
func newDir(kv store.KV, verifier, name string) (*Dir, error) {
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		kv.Close()
		return nil, err
	}
	return &Dir{st: st, Verifier: verifier, name: name}, nil
}

// read reads the journal into memory (once: every Dir method but Close
// needs it).
func (d *Dir) read(progress func(journal.Progress)) error {
	j, err := readJournal(d.st, progress)
	if err != nil {
		return err
	}
	d.journal = j
	return nil
}

// StoreVerifier reads the journal's verifier key from a shared store (its
// key rows keep it in clear), to verify an export of that store.
func StoreVerifier(ctx context.Context, spec string) (string, error) {
	kv, keys, err := openShared(ctx, spec)
	if err != nil {
		return "", err
	}
	defer kv.Close()
	return verifierOf(ctx, keys)
}

// openStore opens a shared store read-only: the journal's verifier key
// from its key rows (in clear: it is public), then, where the backend
// offers one (backend.Snapshotter), one consistent snapshot for
// everything else.
func openStore(spec string) (*Dir, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kv, keys, err := openShared(ctx, spec)
	if err != nil {
		return nil, err
	}
	vkey, err := verifierOf(ctx, keys)
	if err != nil {
		kv.Close()
		return nil, err
	}
	// The secret rows before the snapshot: a vault write landing between
	// the two then looks like one the journal recorded and the storage
	// did not have yet, which the check accepts; read after, it would be
	// a document newer than the journal read.
	rows, err := storeSecrets(ctx, kv)
	if err != nil {
		kv.Close()
		return nil, err
	}
	if s, ok := kv.(backend.Snapshotter); ok {
		snap, err := s.ReadSnapshot(ctx)
		if err != nil {
			kv.Close()
			return nil, fmt.Errorf("audit: %w", err)
		}
		kv = snap // closing the snapshot closes the store
	}
	d, err := newDir(kv, vkey, backends.Noun(spec))
	if err == nil {
		d.secrets = rows
	}
	return d, err
}

// openShared opens the shared store spec names for reading, and its key
// rows: a store without them keeps its keys in a data dir, which is what
// to pass instead.
func openShared(ctx context.Context, spec string) (backend.KV, backend.KeyRows, error) {
	if !backends.IsSpec(spec) {
		return nil, nil, fmt.Errorf("audit: --store takes a shared store's connection string (postgres://user@host/db or \"host=... dbname=...\"); pass a data dir as the argument instead")
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	kv, err := backends.OpenReader(ctx, spec, "", nil)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	keys, ok := kv.(backend.KeyRows)
	if !ok {
		kv.Close()
		return nil, nil, errors.New("audit: this store keeps its keys in a data dir, not in the store: pass that data dir instead of --store")
	}
	return kv, keys, nil
}

// verifierOf reads the journal's verifier key from a store's key rows.
func verifierOf(ctx context.Context, keys backend.KeyRows) (string, error) {
	v, err := keys.PublicKey(ctx, datadir.JournalKey)
	if err != nil {
		return "", fmt.Errorf("audit: the journal verifier key: %w", err)
	}
	return strings.TrimSpace(v), nil
}

// Close releases the directory.
func (d *Dir) Close() error { return d.st.Close() }

// Size is the number of records found on disk (the positions, in key order).
func (d *Dir) Size() int64 { return int64(len(d.journal.entries)) }

// Entry returns the record at position i.
func (d *Dir) Entry(i int64) ([]byte, error) {
	if i < 0 || i >= int64(len(d.journal.entries)) {
		return nil, journal.ErrEntryNotFound
	}
	return d.journal.entries[i], nil
}

// StoredHash returns the stored hash at index as the store holds it, read
// with the journal when the directory was opened.
func (d *Dir) StoredHash(index int64) (tlog.Hash, bool, error) {
	h, ok := d.journal.storedHash(index)
	return h, ok, nil
}

func (d *Dir) Checkpoints() ([][]byte, error) { return d.st.Checkpoints() }

// Verify verifies the data dir's journal, with the options' checkpoint
// copy when one is given.
func Verify(dataDir string, opts journal.Options) (*journal.Report, error) {
	d, err := open(dataDir, opts.Progress)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return journal.VerifyWith(d, d.Verifier, opts)
}

// Export writes the data dir's journal as JSON lines.
func Export(dataDir string, w io.Writer) error {
	d, err := Open(dataDir)
	if err != nil {
		return err
	}
	defer d.Close()
	return journal.Export(w, d)
}

// Proof is an inclusion proof of one journal record in a signed checkpoint.
type Proof struct {
	Index    int64
	LeafHash tlog.Hash
	Hashes   tlog.RecordProof
}

// Prove returns, for every journal record of an execution, an inclusion
// proof against the newest signed checkpoint that covers it, and that
// checkpoint. Each proof is checked before it is returned.
func Prove(dataDir, executionID string) (checkpoint []byte, proofs []Proof, err error) {
	d, err := Open(dataDir)
	if err != nil {
		return nil, nil, err
	}
	defer d.Close()
	cps, err := d.Checkpoints()
	if err != nil || len(cps) == 0 {
		return nil, nil, fmt.Errorf("audit: no signed checkpoint in %s yet (one is written every 30 s and at shutdown)", d.name)
	}
	checkpoint = cps[len(cps)-1]
	c, err := journal.OpenCheckpoint(checkpoint, d.Verifier)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: newest checkpoint: %w", err)
	}
	hist, err := d.st.History(executionID)
	if err != nil {
		return nil, nil, err
	}
	if len(hist) == 0 {
		return nil, nil, fmt.Errorf("audit: no journal record of %s in %s", executionID, d.name)
	}
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			h, ok, err := d.StoredHash(x)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, fmt.Errorf("audit: stored hash %d missing: run `latch audit verify`", x)
			}
			out[i] = h
		}
		return out, nil
	})
	for _, e := range hist {
		i := int64(e.GetIndex())
		if i >= c.Size {
			continue // after the newest checkpoint: provable at the next one
		}
		data, err := d.Entry(i)
		if err != nil {
			return nil, nil, err
		}
		p, err := tlog.ProveRecord(c.Size, i, reader)
		if err != nil {
			return nil, nil, fmt.Errorf("audit: prove record %d: %w", i, err)
		}
		leaf := journal.LeafHash(data)
		if err := tlog.CheckRecord(p, c.Size, c.Root, i, leaf); err != nil {
			return nil, nil, fmt.Errorf("audit: record %d does not prove against the checkpoint (run `latch audit verify`): %w", i, err)
		}
		proofs = append(proofs, Proof{Index: i, LeafHash: leaf, Hashes: p})
	}
	if len(proofs) == 0 {
		return nil, nil, fmt.Errorf("audit: %s's records are newer than the newest checkpoint; prove again after the next one", executionID)
	}
	return checkpoint, proofs, nil
}
