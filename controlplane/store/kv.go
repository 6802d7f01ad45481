package store

import (
	"bytes"
	"errors"
	"sort"
	"sync"
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("store: not found")
	ErrClosed   = errors.New("store: closed")
)

// Write is one key set (Delete false) or deletion in a committed batch.
type Write struct {
	Key, Value []byte
	Delete     bool
}

// KV is a backend: an ordered key-value space with atomic, durable batch
// commits. Implemented by *BadgerKV and *MemKV; the contract tests in
// store_test.go run against both.
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

// MemKV is an in-memory KV for unit tests. It is not durable.
type MemKV struct {
	mu     sync.RWMutex
	m      map[string][]byte
	closed bool
	// FailCommit, when set, is returned by the next Commit (then cleared).
	FailCommit error
}

var _ KV = (*MemKV)(nil)

// NewMemKV returns an empty in-memory backend.
func NewMemKV() *MemKV { return &MemKV{m: map[string][]byte{}} }

func (k *MemKV) Get(key []byte) ([]byte, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return nil, ErrClosed
	}
	v, ok := k.m[string(key)]
	if !ok {
		return nil, ErrNotFound
	}
	return bytes.Clone(v), nil
}

func (k *MemKV) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.ScanFrom(prefix, nil, reverse, fn)
}

func (k *MemKV) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	k.mu.RLock()
	if k.closed {
		k.mu.RUnlock()
		return ErrClosed
	}
	var keys []string
	for key := range k.m {
		if !bytes.HasPrefix([]byte(key), prefix) {
			continue
		}
		if c := bytes.Compare([]byte(key), start); start == nil || (!reverse && c >= 0) || (reverse && c <= 0) {
			keys = append(keys, key)
		}
	}
	sort.Strings(keys)
	if reverse {
		for i, j := 0, len(keys)-1; i < j; i, j = i+1, j-1 {
			keys[i], keys[j] = keys[j], keys[i]
		}
	}
	vals := make([][]byte, len(keys))
	for i, key := range keys {
		vals[i] = bytes.Clone(k.m[key])
	}
	k.mu.RUnlock()
	for i, key := range keys {
		if !fn([]byte(key), vals[i]) {
			break
		}
	}
	return nil
}

func (k *MemKV) Commit(writes []Write) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return ErrClosed
	}
	if err := k.FailCommit; err != nil {
		k.FailCommit = nil
		return err
	}
	for _, w := range writes {
		if w.Delete {
			delete(k.m, string(w.Key))
		} else {
			k.m[string(w.Key)] = bytes.Clone(w.Value)
		}
	}
	return nil
}

func (k *MemKV) Close() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed = true
	return nil
}
