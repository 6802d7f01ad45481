// Package memkv is the in-memory store backend: an ordered map behind a
// lock, for unit tests (not durable). Its FailCommit injects a commit
// failure. Any package's tests may import it.
package memkv

import (
	"bytes"
	"slices"
	"sort"
	"sync"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// KV is an in-memory backend for unit tests. It is not durable. It keeps
// the key space as a sorted slice, so a scan costs the keys it returns.
// The file-backed test backend (kvtest/filekv) keeps its key space in one.
type KV struct {
	mu     sync.RWMutex
	keys   []string // sorted
	vals   map[string][]byte
	closed bool
	// FailCommit, when set, is returned by the next Commit (then cleared).
	FailCommit error
}

var _ backend.KV = (*KV)(nil)

// New returns an empty in-memory backend.
func New() *KV { return &KV{vals: map[string][]byte{}} }

func (k *KV) Get(key []byte) ([]byte, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return nil, backend.ErrClosed
	}
	v, ok := k.vals[string(key)]
	if !ok {
		return nil, backend.ErrNotFound
	}
	return bytes.Clone(v), nil
}

func (k *KV) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.ScanFrom(prefix, nil, reverse, fn)
}

func (k *KV) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	k.mu.RLock()
	if k.closed {
		k.mu.RUnlock()
		return backend.ErrClosed
	}
	// The range of keys with the prefix, cut at start.
	lo := sort.SearchStrings(k.keys, string(prefix))
	hi := lo + sort.Search(len(k.keys)-lo, func(i int) bool { return !bytes.HasPrefix([]byte(k.keys[lo+i]), prefix) })
	if start != nil {
		if !reverse {
			lo = max(lo, sort.SearchStrings(k.keys, string(start)))
		} else {
			hi = min(hi, sort.Search(len(k.keys), func(i int) bool { return k.keys[i] > string(start) }))
		}
	}
	var keys []string
	var vals [][]byte
	if lo < hi {
		keys = slices.Clone(k.keys[lo:hi])
		vals = make([][]byte, len(keys))
		for i, key := range keys {
			vals[i] = bytes.Clone(k.vals[key])
		}
	}
	// Callbacks run unlocked: a read nested in one must not wait on a
	// Commit waiting on this scan.
	k.mu.RUnlock()
	for n := range keys {
		i := n
		if reverse {
			i = len(keys) - 1 - n
		}
		if !fn([]byte(keys[i]), vals[i]) {
			break
		}
	}
	return nil
}

// FailNextCommit makes the next Commit return err (FailCommit, set under
// the lock, for a test whose other goroutines may be committing).
func (k *KV) FailNextCommit(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.FailCommit = err
}

// Commit sets or deletes each write in order.
func (k *KV) Commit(writes []backend.Write) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return backend.ErrClosed
	}
	if err := k.FailCommit; err != nil {
		k.FailCommit = nil
		return err
	}
	for _, w := range writes {
		key := string(w.Key)
		i, found := slices.BinarySearch(k.keys, key)
		switch {
		case w.Delete && found:
			k.keys = slices.Delete(k.keys, i, i+1)
			delete(k.vals, key)
		case !w.Delete:
			if !found {
				k.keys = slices.Insert(k.keys, i, key)
			}
			k.vals[key] = bytes.Clone(w.Value)
		}
	}
	return nil
}

func (k *KV) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	return nil
}
