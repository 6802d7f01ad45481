// Package memkv is the in-memory store backend: an ordered map behind a
// lock, for unit tests (not durable). Its FailCommit injects a commit
// failure. Any package's tests may import it.
package memkv

import (
	"bytes"
	"sort"
	"sync"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// KV is an in-memory backend for unit tests. It is not durable.
type KV struct {
	mu     sync.RWMutex
	m      map[string][]byte
	closed bool
	// FailCommit, when set, is returned by the next Commit (then cleared).
	FailCommit error
}

var _ backend.KV = (*KV)(nil)

// New returns an empty in-memory backend.
func New() *KV { return &KV{m: map[string][]byte{}} }

func (k *KV) Get(key []byte) ([]byte, error) {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if k.closed {
		return nil, backend.ErrClosed
	}
	v, ok := k.m[string(key)]
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
		if w.Delete {
			delete(k.m, string(w.Key))
		} else {
			k.m[string(w.Key)] = bytes.Clone(w.Value)
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
