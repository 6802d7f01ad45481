// Package audit reads a stopped control plane's data directory offline and
// presents its activity journal to the journal package for verification and
// export. It never writes the journal.
package audit

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/latchhq/latch/controlplane/journal"
	"github.com/latchhq/latch/controlplane/server"
	"github.com/latchhq/latch/controlplane/store"
)

// Dir is an opened data directory.
type Dir struct {
	kv       *store.BadgerKV
	st       *store.Store
	entries  [][]byte
	Verifier string
}

var _ journal.Source = (*Dir)(nil)

// Open opens a data dir for reading. It fails while a control plane runs on
// it (Badger holds a lock): stop it first, or verify an export instead.
func Open(dataDir string) (*Dir, error) {
	if _, err := os.Stat(server.DBDir(dataDir)); err != nil {
		return nil, fmt.Errorf("audit: %s holds no control plane data (no %s): pass the --data dir of a control plane", dataDir, server.DBDir(dataDir))
	}
	vkey, err := os.ReadFile(server.VerifierPath(dataDir))
	if err != nil {
		return nil, fmt.Errorf("audit: read the journal verifier key: %w", err)
	}
	kv, err := store.OpenBadger(server.DBDir(dataDir), store.BadgerOptions{ReadOnly: true})
	if err != nil {
		// A data dir left by a crash cannot be opened read-only (Badger
		// must replay its log first); a normal open does that.
		var rerr error
		kv, rerr = store.OpenBadger(server.DBDir(dataDir), store.BadgerOptions{})
		if rerr != nil {
			return nil, fmt.Errorf("audit: %w (if `latch serve` or `latch dev` runs on this data dir, stop it first or use `latch audit export` on a copy)", err)
		}
	}
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		kv.Close()
		return nil, err
	}
	d := &Dir{kv: kv, st: st, Verifier: strings.TrimSpace(string(vkey))}
	if err := st.ScanJournal(func(_ int64, data []byte) bool {
		d.entries = append(d.entries, data)
		return true
	}); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close releases the directory.
func (d *Dir) Close() error { return d.st.Close() }

// Size is the number of records found on disk (the positions, in key order).
func (d *Dir) Size() int64 { return int64(len(d.entries)) }

// Entry returns the record at position i.
func (d *Dir) Entry(i int64) ([]byte, error) {
	if i < 0 || i >= int64(len(d.entries)) {
		return nil, journal.ErrEntryNotFound
	}
	return d.entries[i], nil
}

func (d *Dir) StoredHash(index int64) (tlog.Hash, bool, error) { return d.st.StoredHash(index) }

func (d *Dir) Checkpoints() ([][]byte, error) { return d.st.Checkpoints() }

// Verify verifies the data dir's journal, plus any external checkpoint copy.
func Verify(dataDir string, extraCheckpoints [][]byte) (*journal.Report, error) {
	d, err := Open(dataDir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return journal.Verify(WithCheckpoints(d, extraCheckpoints), d.Verifier)
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

// WithCheckpoints adds checkpoints kept outside the data dir (an external
// copy) to a source, so truncation behind them is caught too.
func WithCheckpoints(src journal.Source, extra [][]byte) journal.Source {
	if len(extra) == 0 {
		return src
	}
	return withCheckpoints{src, extra}
}

type withCheckpoints struct {
	journal.Source
	extra [][]byte
}

func (w withCheckpoints) Checkpoints() ([][]byte, error) {
	cps, err := w.Source.Checkpoints()
	return append(cps, w.extra...), err
}
