package backend

import "errors"

// Sentinel errors every backend returns.
var (
	ErrNotFound = errors.New("store: not found")
	ErrClosed   = errors.New("store: closed")
	// ErrReadOnly is returned by a read-only view's Commit (Snapshot).
	ErrReadOnly = errors.New("store: a read-only snapshot takes no writes")
	// ErrCommitUnknown is returned when the connection was lost after a
	// commit was sent and its outcome could not be read back. The backend
	// refuses every later commit: the caller's view of the committed state
	// may be wrong, and only a restart (which reloads it) is safe.
	ErrCommitUnknown = errors.New("store: the outcome of a commit is unknown")
	// ErrNotCommitted is returned when a commit certainly did not happen
	// because the database could not be reached or went away (nothing was
	// sent, the connection was lost before COMMIT, or the server is
	// shutting down or refusing connections): the same call may be made
	// again, here once the database is back or on another replica.
	ErrNotCommitted = errors.New("store: the commit did not happen: the database is unreachable")
)

// Write is one key set (Delete false) or deletion in a committed batch.
type Write struct {
	Key, Value []byte
	Delete     bool
}

// KV is a backend: an ordered key-value space with atomic, durable batch
// commits. Implemented by *memkv.KV, *badgerkv.KV and *pgkv.KV (and
// *pgkv.Snapshot, read-only); the contract suite kvtest.Run runs against
// each. A Scan is not promised to be one snapshot (PostgreSQL reads it
// page by page): consistent reads come from the Store's single writer or an
// idle store.
type KV interface {
	// Get returns a copy of the value, or ErrNotFound.
	Get(key []byte) ([]byte, error)
	// Scan calls fn for every key with the prefix in key order (reverse:
	// descending) until fn returns false. Values passed to fn are copies.
	Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error
	// ScanFrom is Scan starting at start (inclusive), which has the prefix:
	// ascending it visits the keys >= start, descending the keys <= start.
	// It lets a long index be read page by page without re-reading it.
	ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error
	// Commit applies the writes atomically and durably.
	Commit(writes []Write) error
	Close() error
}

// LentScanner is a KV whose scans can lend their bytes: fn's key and value
// are valid only during the call (no copy), for long read-only passes.
// Implemented by *badgerkv.KV.
type LentScanner interface {
	ScanFromLent(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error
}
