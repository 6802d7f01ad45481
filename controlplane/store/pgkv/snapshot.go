package pgkv

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// Snapshot is a read-only KV over one REPEATABLE READ READ ONLY
// transaction: every read sees the database as of the snapshot's first
// statement, so an auditor reading a live database (an active replica
// committing all the while) reads one consistent state: a whole journal
// prefix with its checkpoints, executions and results, never half a
// commit. It needs only SELECT (a read-only role suffices). The
// transaction holds back vacuum of what it can see while open: close it
// when done.
type Snapshot struct {
	k *KV
	// mu serialises the transaction's statements (one connection); a
	// page is read whole before a scan's callback runs, so a callback may
	// read again.
	mu     sync.Mutex
	tx     pgx.Tx
	closed bool
}

var _ backend.KV = (*Snapshot)(nil)

// Snapshot begins a consistent read-only view of the database.
func (k *KV) Snapshot(ctx context.Context) (*Snapshot, error) {
	if k.closed.Load() {
		return nil, backend.ErrClosed
	}
	tx, err := k.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, fmt.Errorf("store: begin a read-only snapshot: %w", err)
	}
	// Take the snapshot now, so that it is the moment Snapshot returned.
	if _, err := tx.Exec(ctx, "SELECT 1 FROM latch_commit WHERE id = 1"); err != nil {
		tx.Rollback(ctx) //nolint:errcheck // the error above is the one to report
		return nil, fmt.Errorf("store: begin a read-only snapshot (does the role have SELECT on the latch tables?): %w", err)
	}
	return &Snapshot{k: k, tx: tx}, nil
}

// ReadSnapshot is Snapshot as the backend.Snapshotter capability.
func (k *KV) ReadSnapshot(ctx context.Context) (backend.KV, error) {
	s, err := k.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	return s, nil
}

var _ backend.Snapshotter = (*KV)(nil)

func (s *Snapshot) Get(key []byte) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, backend.ErrClosed
	}
	ctx, cancel := s.k.ctx()
	defer cancel()
	var v []byte
	err := s.tx.QueryRow(ctx, "SELECT v FROM latch_kv WHERE k = $1", key).Scan(&v)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, backend.ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("store: PostgreSQL snapshot read: %w", err)
	}
	return v, nil
}

func (s *Snapshot) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return s.ScanFrom(prefix, nil, reverse, fn)
}

func (s *Snapshot) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	return scanPages(prefix, start, reverse, s.k.opts.PageSize, fn, func(lo, hi []byte, n int) ([][]byte, [][]byte, bool, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.closed {
			return nil, nil, false, backend.ErrClosed
		}
		ctx, cancel := s.k.ctx()
		defer cancel()
		keys, vals, more, err := readPage(ctx, s.tx, lo, hi, reverse, n, s.k.opts.PageBytes)
		if err != nil {
			return nil, nil, false, fmt.Errorf("store: PostgreSQL snapshot scan: %w", err)
		}
		return keys, vals, more, nil
	})
}

// Commit refuses: a snapshot is for reading.
func (s *Snapshot) Commit([]backend.Write) error { return backend.ErrReadOnly }

// Close ends the transaction and closes the backend it was taken from.
func (s *Snapshot) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ctx, cancel := s.k.ctx()
	err := s.tx.Rollback(ctx)
	cancel()
	s.mu.Unlock()
	s.k.Close()
	if err != nil && !errors.Is(err, pgx.ErrTxClosed) {
		return fmt.Errorf("store: end the read-only snapshot: %w", err)
	}
	return nil
}
