package store

import (
	"bytes"
	"sync"
)

// cacheGeneration bounds one generation of the read cache (entries).
const cacheGeneration = 16384

// cachedKV keeps recently committed values in memory so the hot reads of the
// dispatch path (an execution read back at every transition, the Merkle
// hashes the next leaf needs, the fingerprint index) skip the backend. Every
// write passes through Commit, so the cache is never stale; it holds values
// only after they are durable. Two generations give a cheap LRU-ish bound.
type cachedKV struct {
	KV
	mu       sync.RWMutex
	cur, old map[string]cached
}

type cached struct {
	value   []byte
	deleted bool
}

func newCachedKV(kv KV) *cachedKV {
	return &cachedKV{KV: kv, cur: map[string]cached{}, old: map[string]cached{}}
}

func (c *cachedKV) Get(key []byte) ([]byte, error) {
	c.mu.RLock()
	v, ok := c.cur[string(key)]
	if !ok {
		v, ok = c.old[string(key)]
	}
	c.mu.RUnlock()
	if ok {
		if v.deleted {
			return nil, ErrNotFound
		}
		return bytes.Clone(v.value), nil
	}
	return c.KV.Get(key)
}

func (c *cachedKV) Commit(writes []Write) error {
	if err := c.KV.Commit(writes); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range writes {
		if uncached(w.Key) {
			continue
		}
		if len(c.cur) >= cacheGeneration {
			c.old, c.cur = c.cur, make(map[string]cached, cacheGeneration)
		}
		c.cur[string(w.Key)] = cached{value: w.Value, deleted: w.Delete}
	}
	return nil
}

// uncached reports whether key is an index entry, which is only scanned:
// caching it would cost the commit path for no read. A whole prefix is left
// out (sets and deletes alike), so no stale entry can exist for one.
func uncached(key []byte) bool {
	return len(key) > 1 && key[1] == '/' && (key[0] == 'a' || key[0] == 's' || key[0] == 'n')
}
