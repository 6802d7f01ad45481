// Package badgerkv is the embedded on-disk store backend: Badger with
// SyncWrites, in the data directory (DATA/db). Package backends opens it
// for an empty --store; offline readers (audit) and benchmarks open it
// directly. Everything else holds it as a backend.KV.
package badgerkv

import (
	"errors"
	"fmt"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// KV is the on-disk backend: Badger with SyncWrites, so a commit that
// returned survives power loss.
type KV struct {
	db *badger.DB
	// Close waits for the calls in progress (active) and later calls fail
	// with ErrClosed: Badger panics on a closed DB. Not an RWMutex: a read
	// nested in a Scan callback must not block behind a waiting Close.
	mu     sync.Mutex
	idle   *sync.Cond
	active int
	closed bool

	// snap is the read snapshot every Get and Scan reads through: a
	// read-only transaction opened when the last Commit returned (see
	// snapshot). snapMu guards it and the reference counts.
	snapMu sync.Mutex
	snap   *snapshot
}

// snapshot is a read-only Badger transaction shared by concurrent reads.
//
// Why: a Badger read transaction opened while a commit is in flight waits
// for that commit to be applied (oracle.readTs waits on the commit
// watermark), and with SyncWrites that includes its fsync. The store's
// writer always has a commit in flight under load, so every read that
// missed the cache, in the writer's build of the next group or in a
// caller's WarmLatest, waited for a whole sync it does not need: what a
// read must see is every commit that returned before it began, and the
// snapshot opened when the last Commit returned is exactly that (only this
// KV's Commit writes the DB, one at a time: the store's committer). A
// commit still in flight is not yet an answer to anyone, so not seeing it
// is what reading before it would have returned.
//
// A snapshot is replaced at the end of every Commit and discarded when the
// last read on it ends (Discard must not run under a live iterator).
type snapshot struct {
	txn     *badger.Txn
	refs    int
	retired bool
}

// acquire returns the current read snapshot with a reference taken.
func (k *KV) acquire() *snapshot {
	k.snapMu.Lock()
	defer k.snapMu.Unlock()
	if k.snap == nil {
		k.snap = &snapshot{txn: k.db.NewTransaction(false)}
	}
	k.snap.refs++
	return k.snap
}

func (k *KV) release(s *snapshot) {
	k.snapMu.Lock()
	defer k.snapMu.Unlock()
	s.refs--
	if s.retired && s.refs == 0 {
		s.txn.Discard()
	}
}

// renew replaces the read snapshot with one that sees every commit made so
// far; called when a Commit is done, with no other commit in flight.
func (k *KV) renew() {
	next := &snapshot{txn: k.db.NewTransaction(false)}
	k.snapMu.Lock()
	old := k.snap
	k.snap = next
	if old != nil {
		old.retired = true
		if old.refs == 0 {
			old.txn.Discard()
		}
	}
	k.snapMu.Unlock()
}

// view runs fn on the read snapshot.
func (k *KV) view(fn func(txn *badger.Txn) error) error {
	s := k.acquire()
	defer k.release(s)
	return fn(s.txn)
}

// enter registers a call; false when the store is closed.
func (k *KV) enter() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return false
	}
	k.active++
	return true
}

func (k *KV) leave() {
	k.mu.Lock()
	k.active--
	if k.active == 0 {
		k.idle.Broadcast()
	}
	k.mu.Unlock()
}

var (
	_ backend.KV          = (*KV)(nil)
	_ backend.LentScanner = (*KV)(nil)
)

// Options tune the on-disk backend.
type Options struct {
	Logger hclog.Logger
	// ReadOnly opens the directory for offline reading (audit verify). It
	// fails while a control plane holds the directory.
	ReadOnly bool
}

// Open opens (or creates) a Badger directory.
func Open(dir string, o Options) (*KV, error) {
	opts := badger.DefaultOptions(dir).
		WithSyncWrites(true).
		WithReadOnly(o.ReadOnly).
		WithMetricsEnabled(false).
		WithDetectConflicts(false). // one writer (the store's) serialises every update
		WithLogger(badgerLogger{o.Logger})
	if o.Logger == nil {
		opts = opts.WithLogger(nil)
	}
	db, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w (is another latch process using this data dir? if the directory is damaged, move it aside and restore from backup; `latch audit verify` tells what its journal holds)", dir, err)
	}
	k := &KV{db: db}
	k.idle = sync.NewCond(&k.mu)
	return k, nil
}

func (k *KV) Get(key []byte) ([]byte, error) {
	if !k.enter() {
		return nil, backend.ErrClosed
	}
	defer k.leave()
	var out []byte
	err := k.view(func(txn *badger.Txn) error {
		it, err := txn.Get(key)
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, backend.ErrNotFound
	}
	return out, err
}

func (k *KV) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.ScanFrom(prefix, nil, reverse, fn)
}

func (k *KV) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	// One allocation per item for the key and the value together (fn owns
	// both: the KV contract hands over copies).
	return k.ScanFromLent(prefix, start, reverse, func(key, value []byte) bool {
		buf := make([]byte, len(key)+len(value))
		copy(buf, key)
		copy(buf[len(key):], value)
		return fn(buf[:len(key):len(key)], buf[len(key):])
	})
}

// ScanFromLent is ScanFrom lending Badger's own bytes: key and value are
// valid only during the call to fn, which must copy what it keeps. Long
// read-only passes (the state check, audit's journal read) use it to skip
// a copy and an allocation per item (see lentScanner).
func (k *KV) ScanFromLent(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	if !k.enter() {
		return backend.ErrClosed
	}
	defer k.leave()
	return k.view(func(txn *badger.Txn) error {
		opts := badger.DefaultIteratorOptions
		opts.Prefix = prefix
		opts.Reverse = reverse
		opts.PrefetchValues = false
		it := txn.NewIterator(opts)
		defer it.Close()
		seek := prefix
		switch {
		case start != nil:
			// Reverse iterators seek to the last key <= start.
			seek = start
		case reverse:
			// Seek to the last key with the prefix: prefix followed by 0xff...
			seek = append(append([]byte{}, prefix...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		}
		for it.Seek(seek); it.ValidForPrefix(prefix); it.Next() {
			item := it.Item()
			more := true
			if err := item.Value(func(v []byte) error {
				more = fn(item.Key(), v)
				return nil
			}); err != nil {
				return err
			}
			if !more {
				return nil
			}
		}
		return nil
	})
}

// Commit writes the batch in one transaction, so one fsync covers the whole
// group. A batch larger than Badger's transaction limit is split; each part is
// atomic on its own (the writer keeps groups far below the limit).
func (k *KV) Commit(writes []backend.Write) error {
	if !k.enter() {
		return backend.ErrClosed
	}
	defer k.leave()
	// Even a failed commit may have written a part (a split batch): the
	// next reads see whatever landed.
	defer k.renew()
	txn := k.db.NewTransaction(true)
	defer func() { txn.Discard() }()
	apply := func(w backend.Write) error {
		if w.Delete {
			return txn.Delete(w.Key)
		}
		return txn.Set(w.Key, w.Value)
	}
	for _, w := range writes {
		err := apply(w)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return fmt.Errorf("store: commit: %w", err)
			}
			txn = k.db.NewTransaction(true)
			err = apply(w)
		}
		if err != nil {
			return fmt.Errorf("store: write: %w", err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

func (k *KV) Close() error {
	k.mu.Lock()
	if k.closed {
		k.mu.Unlock()
		return nil
	}
	k.closed = true
	for k.active > 0 {
		k.idle.Wait()
	}
	k.mu.Unlock()
	k.snapMu.Lock()
	if k.snap != nil { // no read is active: Close waited for them
		k.snap.txn.Discard()
		k.snap = nil
	}
	k.snapMu.Unlock()
	return k.db.Close()
}

// Compact flushes the memtable and compacts every level into one: a
// maintenance step (and what benchmarks use to compare stores of different
// sizes in the same on-disk shape).
func (k *KV) Compact() error {
	if !k.enter() {
		return backend.ErrClosed
	}
	defer k.leave()
	if err := k.db.Flatten(2); err != nil {
		return fmt.Errorf("store: compact: %w", err)
	}
	return nil
}

// badgerLogger sends Badger's messages to hclog: warnings and errors as
// they are, its info and debug chatter at trace.
type badgerLogger struct{ l hclog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Infof(f string, a ...any)    { b.l.Trace(fmt.Sprintf(f, a...)) } // Badger chatter: --log-level trace only
func (b badgerLogger) Debugf(f string, a ...any)   { b.l.Trace(fmt.Sprintf(f, a...)) }
