package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// The secret rows against the journal: the sealed vault document and the
// key rows (the fingerprint and journal keys: latch_keys on PostgreSQL,
// DATA/keys on Badger) are not state the journal derives, but a forged
// one is as bad as a forged execution (a credential rolled back to one the
// operator rotated away, a signing key swapped). So each write of a row is
// journaled with the row's sha256 (recordv1.SecretDigest), and the control
// plane holds the stored row against the latest such record before it
// uses the row: at start (the server), at every vault load and reload (the
// vault's Witness, VaultWitness here) and in `latch audit verify`.
//
// xd/<row> is the journal index (8 bytes, big endian) of the row's latest
// digest record, written by Tx.Append in the same commit as the record.
//
// Rows of a store written before these records have none: the first start
// of this version records the rows as it finds them (kind
// "secret_recorded", trust on first use), on the active replica only (on
// PostgreSQL the record is fenced like every commit, so two replicas never
// record two versions). That is safe as far as it goes: from then on a
// change is seen; a change made before it is not, as it was not before
// this version. The record says so in its reason. No marker guards this
// (as m/sessions_indexed guards the session index): whoever can delete a
// row's index to have a forged row trusted again can delete a marker as
// well. What catches that is the chain: each record names the digest it
// follows and counts the row's records, so `latch audit verify`, which
// reads every secret record of the journal (CheckSecrets), reports a row
// recorded again out of turn.
//
// The vault document is written outside the store (a file, or its own
// PostgreSQL row), so its record and its write cannot be one commit. The
// record comes first, with the document itself kept under m/vault_pending
// in the same commit (it holds sealed entries only); once the write lands
// the marker is deleted. A crash between the two leaves the previous
// document stored with the marker present: the check then finishes the
// write (the marker's document hashes to the record, and the stored one
// to the digest the record replaces), which a forger cannot use to
// install anything but the document the journal names. A write that
// fails is journaled back (a new record of the stored digest).

// Journal entry kinds of the secret rows.
const (
	// KindVaultWritten: the vault document about to be written.
	KindVaultWritten = recordv1.EntryKind_ENTRY_KIND_VAULT_WRITTEN
	// KindKeyCreated: a key row created in the store (server/keys.go).
	KindKeyCreated = recordv1.EntryKind_ENTRY_KIND_KEY_CREATED
	// KindSecretRecorded: a row recorded as found (first use, or a vault
	// write that failed journaled back).
	KindSecretRecorded = recordv1.EntryKind_ENTRY_KIND_SECRET_RECORDED
)

// SecretRowVault names the vault document's row.
const SecretRowVault = "vault"

// SecretKeyRow names a key row ("key/fingerprint", "key/journal").
func SecretKeyRow(name string) string { return "key/" + name }

// MismatchSecret: a stored secret row does not hash to its latest journal
// record, or has none although one was recorded.
const MismatchSecret MismatchKind = "secret_digest"

func secretIndexKey(row string) []byte { return []byte("xd/" + row) }

var vaultPendingKey = []byte("m/vault_pending")

// SecretSum is the digest journaled for a row's stored bytes.
func SecretSum(stored []byte) []byte {
	s := sha256.Sum256(stored)
	return s[:]
}

// indexSecret keeps xd/ when Append adds journal record n.
func (t *Tx) indexSecret(e *recordv1.JournalEntry, n int64) {
	if row := e.GetSecret().GetRow(); row != "" {
		t.set(secretIndexKey(row), binary.BigEndian.AppendUint64(nil, uint64(n)))
	}
}

// latestSecret returns the latest digest record of row and its index, or
// ErrNotFound when none was journaled.
func latestSecret(get getter, row string) (*recordv1.SecretDigest, int64, error) {
	idx, err := decodeIndex(get(secretIndexKey(row)))
	if err != nil {
		return nil, -1, err
	}
	e, err := entryAt(get, idx)
	if err != nil {
		return nil, idx, fmt.Errorf("store: the digest record of %s: %w", row, err)
	}
	if e.GetSecret().GetRow() != row {
		return nil, idx, secretMismatch(row, idx, "xd/%s names journal record %d, which is not a record of this row: the index was edited; restore the store from a backup", row, idx)
	}
	return e.GetSecret(), idx, nil
}

// JournaledSecret returns the latest journal record of row's digest and its
// journal index, or ErrNotFound.
func (s *Store) JournaledSecret(row string) (*recordv1.SecretDigest, int64, error) {
	return latestSecret(s.kv.Get, row)
}

func secretMismatch(row string, idx int64, format string, args ...any) error {
	return &StateError{Mismatches: []Mismatch{{ExecutionID: row, JournalIndex: idx, Key: row, Kind: MismatchSecret, Detail: fmt.Sprintf(format, args...)}}}
}

func short(sum []byte) string {
	if len(sum) == 0 {
		return "(none)"
	}
	return "sha256:" + hex.EncodeToString(sum)[:16]
}

// CheckSecret holds the stored bytes of row against its latest journal
// record. It returns nil when they match, ErrNotFound when the row was
// never journaled (RecordSecret records it), or a *StateError
// (ErrStateMismatch) that names the row and says what to do.
func (s *Store) CheckSecret(row string, stored []byte) error {
	rec, idx, err := s.JournaledSecret(row)
	if err != nil {
		return err
	}
	if sum := SecretSum(stored); !bytes.Equal(sum, rec.GetSha256()) {
		return secretMismatch(row, idx, "the stored %s hashes to %s, its journal record (generation %d) says %s: it was replaced or rolled back outside Latch; restore it from a backup taken after journal record %d (or, if the change was deliberate, move the data aside and start from a fresh store)",
			row, short(sum), rec.GetGeneration(), short(rec.GetSha256()), idx)
	}
	return nil
}

// SecretRecord is the journal record of a row's stored bytes (kind: one of
// the Kind constants above), following the row's latest record.
func (t *Tx) SecretRecord(row string, stored []byte, kind recordv1.EntryKind, actor, reason string, now time.Time) (int64, error) {
	d := &recordv1.SecretDigest{Row: row, Generation: 1}
	if stored != nil { // nil: no document in place
		d.Sha256 = SecretSum(stored)
	}
	prev, _, err := latestSecret(t.get, row)
	switch {
	case err == nil:
		d.Generation, d.PreviousSha256 = prev.GetGeneration()+1, prev.GetSha256()
	case !errors.Is(err, ErrNotFound):
		return 0, err
	}
	return t.Append(&recordv1.JournalEntry{Time: timestamppb.New(now), EntryKind: kind, Actor: actor, Reason: reason, Secret: d})
}

// RecordSecret journals row as stored now, on first use (kind
// "secret_recorded"): a row that has no record yet. It does nothing when
// the row has a record (CheckSecret holds the row against it).
//
// A row without an index but with a record in the journal is not a first
// use: its index was deleted (to have a replaced row trusted again), and
// RecordSecret refuses it as CheckSecret refuses a replaced row. Finding
// that out reads the journal's secret records, once per row without an
// index (in practice the first start of a store written before secret rows
// were journaled).
func (s *Store) RecordSecret(ctx context.Context, row string, stored []byte, now time.Time) error {
	if _, _, err := s.JournaledSecret(row); !errors.Is(err, ErrNotFound) {
		return err
	}
	idx, found, err := s.anySecretRecord(ctx, row)
	if err != nil {
		return err
	}
	if found {
		return secretMismatch(row, idx, "journal record %d records %s, but the row's index xd/%s is gone: it was deleted outside Latch (to have a replaced row trusted as new); restore the store from a backup taken after journal record %d", idx, row, row, idx)
	}
	return s.Update(ctx, func(tx *Tx) error {
		if _, _, err := latestSecret(tx.get, row); !errors.Is(err, ErrNotFound) {
			return err
		}
		_, err := tx.SecretRecord(row, stored, KindSecretRecorded, "latch",
			"recorded as found (trust on first use: a store written before secret rows were journaled, or a row with no record yet); changes from here on are checked", now)
		return err
	})
}

// anySecretRecord finds the last journal record of row's digest by reading
// the journal (not the index).
func (s *Store) anySecretRecord(ctx context.Context, row string) (int64, bool, error) {
	last, found := int64(-1), false
	var derr error
	err := s.kv.ScanFrom([]byte("j/"), journalKey(0), false, func(k, v []byte) bool {
		_, data, ok := decodeLeaf(v)
		if !ok || !carriesField(data, journalEntrySecret) {
			return ctx.Err() == nil
		}
		e := &recordv1.JournalEntry{}
		if proto.Unmarshal(data, e) != nil || e.GetSecret().GetRow() != row {
			return ctx.Err() == nil
		}
		i, err := strconv.ParseInt(string(k[2:]), 16, 64)
		if err != nil {
			derr = fmt.Errorf("store: journal key %q is malformed", k)
			return false
		}
		last, found = i, true
		return ctx.Err() == nil
	})
	if err == nil {
		err = derr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return -1, false, fmt.Errorf("store: read the journal records of %s: %w", row, err)
	}
	return last, found, nil
}

// VaultWitness holds the vault document against the journal; it
// implements vault.Witness. Its writes run under ctx and are journaled at
// now.
type VaultWitness struct {
	s   *Store
	ctx context.Context
	now func() time.Time
}

// VaultWitness returns the store's witness of the vault document (now nil:
// time.Now).
func (s *Store) VaultWitness(ctx context.Context, now func() time.Time) *VaultWitness {
	if now == nil {
		now = time.Now
	}
	return &VaultWitness{s: s, ctx: ctx, now: now}
}

// pendingVault returns the document an interrupted write left under the
// marker, or nil.
func pendingVault(get getter) ([]byte, error) {
	p, err := get(vaultPendingKey)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return p, err
}

// interrupted reports whether doc is what a vault write the journal
// recorded (rec) but a crash stopped left: the document before it, with
// the write's document under the marker.
func interrupted(rec *recordv1.SecretDigest, doc, pending []byte) bool {
	return pending != nil && bytes.Equal(SecretSum(pending), rec.GetSha256()) &&
		len(rec.GetPreviousSha256()) > 0 && bytes.Equal(SecretSum(doc), rec.GetPreviousSha256())
}

// Check holds a loaded document against the journal. It returns nil when
// doc is the journaled one, or redo, the document to write in its place,
// when doc is what an interrupted write left; the caller writes redo and
// calls Written. A document never journaled is recorded on first use.
// Anything else is a *StateError (ErrStateMismatch).
func (w *VaultWitness) Check(doc []byte) (redo []byte, err error) {
	rec, _, err := w.s.JournaledSecret(SecretRowVault)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, w.s.RecordSecret(w.ctx, SecretRowVault, doc, w.now())
	case err != nil:
		return nil, err
	case len(rec.GetSha256()) == 0:
		// Journaled as absent (a creation that failed): this is the
		// first document since.
		return nil, w.s.Update(w.ctx, func(tx *Tx) error {
			_, err := tx.SecretRecord(SecretRowVault, doc, KindSecretRecorded, "latch", "the vault document found after a creation that failed", w.now())
			return err
		})
	}
	pending, err := pendingVault(w.s.kv.Get)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(SecretSum(doc), rec.GetSha256()) {
		if pending != nil {
			return nil, w.Written(doc) // the write landed; its marker did not go
		}
		return nil, nil
	}
	if interrupted(rec, doc, pending) {
		return pending, nil
	}
	return nil, w.s.CheckSecret(SecretRowVault, doc)
}

// Intend journals doc as the vault document about to be written (kind
// "vault_written") and keeps it under the pending marker, in one commit.
func (w *VaultWitness) Intend(doc []byte) error {
	return w.s.Update(w.ctx, func(tx *Tx) error {
		if _, err := tx.SecretRecord(SecretRowVault, doc, KindVaultWritten, "latch", "the vault document written (a credential changed or the vault created)", w.now()); err != nil {
			return err
		}
		tx.set(vaultPendingKey, bytes.Clone(doc))
		return nil
	})
}

// Written says the write of doc landed: the pending marker goes.
func (w *VaultWitness) Written([]byte) error {
	return w.s.Update(w.ctx, func(tx *Tx) error {
		tx.del(vaultPendingKey)
		return nil
	})
}

// Failed says the write Intend journaled did not happen and stored (nil:
// none) is the document in place: it is journaled back and the marker
// goes.
func (w *VaultWitness) Failed(stored []byte) error {
	return w.s.Update(w.ctx, func(tx *Tx) error {
		if _, err := tx.SecretRecord(SecretRowVault, stored, KindSecretRecorded, "latch", "the vault write journaled before it failed: the document in place is the one before it", w.now()); err != nil {
			return err
		}
		tx.del(vaultPendingKey)
		return nil
	})
}

// CheckSecrets holds stored secret rows (row name to bytes; the vault
// document under SecretRowVault) against their latest journal records,
// for `latch audit verify`: a read, it writes nothing. It reads the whole
// journal's secret records, so that beyond what CheckSecret sees it finds
// a row's records that do not follow each other (its index deleted or
// pointed back, and the row recorded again on first use) and an index
// that does not name the row's last record. A row never journaled is no
// mismatch (a store this version has not started on yet; its first start
// records it); the vault document an interrupted write left is none
// either (the next start finishes the write).
func (s *Store) CheckSecrets(ctx context.Context, rows map[string][]byte) ([]Mismatch, error) {
	var out []Mismatch
	add := func(row string, idx int64, format string, args ...any) {
		out = append(out, Mismatch{ExecutionID: row, JournalIndex: idx, Key: row, Kind: MismatchSecret, Detail: fmt.Sprintf(format, args...)})
	}
	type last struct {
		rec *recordv1.SecretDigest
		idx int64
	}
	latest := map[string]last{}
	var derr error
	err := s.kv.ScanFrom([]byte("j/"), journalKey(0), false, func(k, v []byte) bool {
		_, data, ok := decodeLeaf(v)
		if !ok || !carriesField(data, journalEntrySecret) {
			return ctx.Err() == nil
		}
		i, err := strconv.ParseInt(string(k[2:]), 16, 64)
		if err != nil {
			derr = fmt.Errorf("store: journal key %q is malformed", k)
			return false
		}
		e := &recordv1.JournalEntry{}
		if proto.Unmarshal(data, e) != nil || e.GetSecret().GetRow() == "" {
			return ctx.Err() == nil // the journal check judges damaged leaves
		}
		d := e.GetSecret()
		if prev, ok := latest[d.GetRow()]; ok && (d.GetGeneration() != prev.rec.GetGeneration()+1 || !bytes.Equal(d.GetPreviousSha256(), prev.rec.GetSha256())) {
			add(d.GetRow(), i, "journal record %d (generation %d, kind %s) does not follow the row's record %d (generation %d): the row's index was deleted or edited and the row recorded again; restore the store from a backup taken before journal record %d", i, d.GetGeneration(), lifecycle.EntryKindNameOf(e), prev.idx, prev.rec.GetGeneration(), i)
		}
		latest[d.GetRow()] = last{d, i}
		return ctx.Err() == nil
	})
	if err == nil {
		err = derr
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		return nil, fmt.Errorf("store: read the secret rows' journal records: %w", err)
	}
	names := make([]string, 0, len(latest))
	for row := range latest {
		names = append(names, row)
	}
	slices.Sort(names)
	pending, err := pendingVault(s.kv.Get)
	if err != nil {
		return nil, err
	}
	for _, row := range names {
		l := latest[row]
		if idx, err := decodeIndex(s.kv.Get(secretIndexKey(row))); err != nil || idx != l.idx {
			add(row, l.idx, "xd/%s does not name the row's last journal record %d (%v): the index was edited; restore the store from a backup", row, l.idx, errOr(err, fmt.Sprintf("it names %d", idx)))
		}
		stored, ok := rows[row]
		if !ok {
			continue // not read here (a vault kept outside the data dir)
		}
		switch {
		case row == SecretRowVault && len(l.rec.GetSha256()) == 0 && stored == nil:
		case row == SecretRowVault && interrupted(l.rec, stored, pending):
		case !bytes.Equal(SecretSum(stored), l.rec.GetSha256()):
			what := "hashes to " + short(SecretSum(stored))
			if stored == nil {
				what = "is gone"
			}
			add(row, l.idx, "the stored %s %s, its journal record (generation %d) says %s: it was replaced or rolled back outside Latch; restore it from a backup taken after journal record %d", row, what, l.rec.GetGeneration(), short(l.rec.GetSha256()), l.idx)
		}
	}
	return out, nil
}

func errOr(err error, s string) string {
	if err != nil {
		return err.Error()
	}
	return s
}

// journalEntrySecret is the field number of JournalEntry.secret.
var journalEntrySecret = (&recordv1.JournalEntry{}).ProtoReflect().Descriptor().Fields().ByName("secret").Number()
