package store

import (
	"bytes"
	"errors"
	"sync"
)

// cacheGeneration bounds one generation of the read cache (entries).
const cacheGeneration = 16384

// maxCachedRead is the largest value a read puts in the cache (a large
// result read once is not worth holding).
const maxCachedRead = 16 << 10

// cachedKV keeps recently committed values in memory so the hot reads of the
// dispatch path (an execution read back at every transition, the Merkle
// hashes the next leaf needs, the fingerprint index) skip the backend. Every
// write passes through Commit, so the cache is never stale; it holds values
// only after they are durable. Two generations give a cheap LRU-ish bound.
//
// What a Get reads is cached too, a miss as deleted, so the writer's
// lookups cost the backend once, and Store.WarmLatest can read ahead
// outside the writer: on PostgreSQL each lookup is a round trip, which
// inside the single writer would delay the whole group. Only one process writes a store (Badger's lock, PostgreSQL's
// lease and fence), so the backend changes only through this Commit.
type cachedKV struct {
	KV
	mu       sync.RWMutex
	cur, old map[string]cached
	// rotations counts generation swaps: a miss read across one is not
	// cached, since a commit made meanwhile may have been rotated out.
	rotations uint64
}

type cached struct {
	value   []byte
	deleted bool
}

func newCachedKV(kv KV) *cachedKV {
	return &cachedKV{KV: kv, cur: map[string]cached{}, old: map[string]cached{}}
}

func (c *cachedKV) Get(key []byte) ([]byte, error) {
	v, shared, err := c.read(key)
	if shared {
		v = bytes.Clone(v)
	}
	return v, err
}

// lend is Get without the copy: the bytes may be the cache's own, so the
// caller reads them (decodes, or copies what it keeps) and never modifies
// them, as every reader of an update's Tx already does with the writes of
// its batch. For the hot reads of the dispatch, wait and receipt paths,
// which decode each value at once.
func (c *cachedKV) lend(key []byte) ([]byte, error) {
	v, _, err := c.read(key)
	return v, err
}

// read returns key's value; shared reports that it is the cache's own.
func (c *cachedKV) read(key []byte) (value []byte, shared bool, err error) {
	c.mu.RLock()
	v, ok := c.cur[string(key)]
	if !ok {
		v, ok = c.old[string(key)]
	}
	c.mu.RUnlock()
	if ok {
		if v.deleted {
			return nil, false, ErrNotFound
		}
		return v.value, true, nil
	}
	if uncached(key) {
		value, err = c.KV.Get(key)
		return value, false, err
	}
	c.mu.RLock()
	rot := c.rotations
	c.mu.RUnlock()
	value, err = c.KV.Get(key)
	if err == nil || errors.Is(err, ErrNotFound) {
		c.mu.Lock()
		// A commit of key since the read left it in the cache (Commit
		// stores every key it writes, after the backend has it): then the
		// cache already holds the truth and what was read may be stale.
		_, inCur := c.cur[string(key)]
		_, inOld := c.old[string(key)]
		if c.rotations == rot && !inCur && !inOld && len(value) <= maxCachedRead {
			c.put(string(key), cached{value: value, deleted: err != nil})
			shared = err == nil
		}
		c.mu.Unlock()
	}
	return value, shared, err
}

// put stores one entry, starting a new generation when the current is full.
func (c *cachedKV) put(key string, v cached) {
	if len(c.cur) >= cacheGeneration {
		c.old, c.cur = c.cur, make(map[string]cached, cacheGeneration)
		c.rotations++
	}
	c.cur[key] = v
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
		c.put(string(w.Key), cached{value: w.Value, deleted: w.Delete})
	}
	return nil
}

// uncached reports whether key is an index entry, which is only scanned:
// caching it would cost the commit path for no read. A whole prefix is left
// out (sets and deletes alike), so no stale entry can exist for one.
func uncached(key []byte) bool {
	return len(key) > 1 && key[1] == '/' && (key[0] == 'a' || key[0] == 's' || key[0] == 'n')
}
