package vault

import (
	"errors"
	"fmt"
	"io/fs"
)

// Witness holds the vault document against a record kept apart from it:
// the control plane's tamper-evident journal, so that a document swapped,
// altered or rolled back in its Storage (a file, or a database row) is
// refused rather than used. Implemented by *store.VaultWitness.
//
// A write is recorded before it is made (Intend), then confirmed
// (Written) or journaled back (Failed); a crash between Intend and the
// write leaves the previous document, which Check tells apart from a
// forgery and answers with the document to write in its place.
type Witness interface {
	// Check returns nil when doc is the recorded document, redo when doc
	// is what an interrupted write left (write redo, then call Written),
	// or an error when doc is not the recorded one.
	Check(doc []byte) (redo []byte, err error)
	// Intend records doc as the document about to be written.
	Intend(doc []byte) error
	// Written says the write of doc landed.
	Written(doc []byte) error
	// Failed says the write recorded by Intend did not happen: stored
	// (nil: none) is the document in place.
	Failed(stored []byte) error
}

// ErrForged: the vault document in the Storage is not the one the
// Witness recorded; the vault refuses to open or use it.
var ErrForged = errors.New("vault: the stored vault document is not the one the journal recorded")

// SetWitness makes w hold every later load and write of the document, and
// holds the document in place against it now (Reload). Called once the
// store the witness writes to is open and this process may write it (the
// active replica).
func (v *Vault) SetWitness(w Witness) error {
	v.mu.Lock()
	v.witness = w
	v.mu.Unlock()
	return v.Reload()
}

// witnessed loads the document and, with a witness, holds it against the
// witness, finishing an interrupted write. v.mu is held. The error wraps
// fs.ErrNotExist when there is no document and nothing says there was one.
func (v *Vault) witnessed() ([]byte, error) {
	data, err := v.storage.Load()
	if v.witness == nil {
		return data, err
	}
	if errors.Is(err, fs.ErrNotExist) {
		data = nil
	} else if err != nil {
		return nil, err
	}
	redo, werr := v.witness.Check(data)
	if werr != nil {
		v.refused = fmt.Errorf("%w: %s: %w", ErrForged, v.path, werr)
		return nil, v.refused
	}
	v.refused = nil
	if redo != nil {
		// A crash came between the journal record and the write.
		if err := v.storage.Replace(redo); err != nil {
			return nil, fmt.Errorf("vault: finish the vault write a crash interrupted: %w", err)
		}
		if err := v.witness.Written(redo); err != nil {
			return nil, fmt.Errorf("vault: finish the vault write a crash interrupted: %w", err)
		}
		v.log.Warn("finished the vault write a crash interrupted (the journal recorded it, the storage did not have it yet)", "path", v.path)
		data = redo
	}
	if data == nil {
		return nil, fmt.Errorf("vault: no document: %w", fs.ErrNotExist)
	}
	return data, nil
}

// store writes data with write (the Storage's Create or Replace) between
// the witness's Intend and Written; prev is the document in place (nil:
// none). v.mu is held.
func (v *Vault) store(data, prev []byte, write func([]byte) error) error {
	if v.refused != nil {
		return v.refused
	}
	if v.witness == nil {
		return write(data)
	}
	if err := v.witness.Intend(data); err != nil {
		return fmt.Errorf("vault: journal the vault write (nothing was written): %w", err)
	}
	if err := write(data); err != nil {
		if ferr := v.witness.Failed(prev); ferr != nil {
			return errors.Join(err, fmt.Errorf("vault: journal that the vault write failed: %w", ferr))
		}
		return err
	}
	if err := v.witness.Written(data); err != nil {
		// The document is written and journaled; only the marker stays,
		// which the next check clears.
		v.log.Warn("the vault write landed but its pending marker could not be cleared; the next start clears it", "error", err)
	}
	return nil
}
