package journal

import (
	"errors"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
	"google.golang.org/protobuf/proto"

	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// Errors of this package.
var (
	// ErrEntryNotFound is what a Source returns (possibly wrapped) from
	// Entry for a position it holds no record for.
	ErrEntryNotFound = errors.New("journal: entry not found")
	// ErrMalformedEntry: leaf data that is not a JournalEntry.
	ErrMalformedEntry = errors.New("journal: malformed entry")
	// ErrMalformedCheckpoint: checkpoint text or note that does not parse.
	ErrMalformedCheckpoint = errors.New("journal: malformed checkpoint")
	// ErrBadSignature: a checkpoint not signed by the verifier key.
	ErrBadSignature = errors.New("journal: checkpoint signature does not verify")
	// ErrBadKey: a signer or verifier key that does not parse.
	ErrBadKey = errors.New("journal: invalid key")
	// ErrMalformedExport: an export file that does not parse.
	ErrMalformedExport = errors.New("journal: malformed export")
)

var marshalOptions = proto.MarshalOptions{Deterministic: true}

// EncodeEntry returns the leaf data of e: its deterministic protobuf
// encoding. The caller sets e.Index to the leaf's position.
func EncodeEntry(e *recordv1.JournalEntry) ([]byte, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil entry", ErrMalformedEntry)
	}
	b, err := marshalOptions.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	return b, nil
}

// DecodeEntry parses leaf data written by EncodeEntry.
func DecodeEntry(data []byte) (*recordv1.JournalEntry, error) {
	e := new(recordv1.JournalEntry)
	if err := proto.Unmarshal(data, e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformedEntry, err)
	}
	return e, nil
}

// LeafHash is the RFC 6962 leaf hash of data (tlog.RecordHash).
func LeafHash(data []byte) tlog.Hash { return tlog.RecordHash(data) }

// StoredHashes returns the hashes to store when appending leaf n (0-based)
// with the given data. Store them at the consecutive stored-hash indexes
// tlog.StoredHashIndex(0, n), tlog.StoredHashIndex(0, n)+1, ...; the first
// is the leaf hash. r must return hashes stored for leaves before n.
func StoredHashes(n int64, data []byte, r tlog.HashReader) ([]tlog.Hash, error) {
	h, err := tlog.StoredHashes(n, data, r)
	if err != nil {
		return nil, fmt.Errorf("journal: stored hashes of leaf %d: %w", n, err)
	}
	return h, nil
}

// TreeHash returns the root hash of the tree of the first n leaves, read
// from the stored hashes through r.
func TreeHash(n int64, r tlog.HashReader) (tlog.Hash, error) {
	h, err := tlog.TreeHash(n, r)
	if err != nil {
		return tlog.Hash{}, fmt.Errorf("journal: tree hash of size %d: %w", n, err)
	}
	return h, nil
}
