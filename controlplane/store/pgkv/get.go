package pgkv

import (
	"bytes"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"

	"github.com/latchhq/latch/controlplane/store/backend"
)

// Gets on PostgreSQL are coalesced: a Get that arrives while
// maxGetsInFlight queries are running waits for the next one, which reads
// every key waiting then (up to maxGetBatch) in one statement. On a busy
// replica the reads of the hot path (the fingerprint lookup of each new
// intent, Store.WarmLatest) then cost the database one round trip per
// batch instead of one per key, and hold at most maxGetsInFlight of the
// pool's connections; alone, a Get is sent at once as before. A waiting
// Get is answered only by a query sent after it arrived (it never sees a
// value older than a commit that returned before it), and its wait is
// bounded by the queries ahead of it: up to about twice OpTimeout when the
// database hangs.
const (
	maxGetsInFlight = 2
	maxGetBatch     = 256
)

const (
	qGet     = "SELECT v FROM latch_kv WHERE k = $1"
	qGetMany = "SELECT k, v FROM latch_kv WHERE k = ANY($1::bytea[])"
)

type getBatcher struct {
	mu      sync.Mutex
	pending []*getReq
	running int // queries being read (at most maxGetsInFlight)
	// queries counts the read queries sent (for tests).
	queries atomic.Int64
}

type getReq struct {
	key   []byte
	value []byte
	err   error
	done  chan struct{}
}

func (k *KV) Get(key []byte) ([]byte, error) {
	if k.closed.Load() {
		return nil, backend.ErrClosed
	}
	r := &getReq{key: key, done: make(chan struct{})}
	b := &k.gets
	b.mu.Lock()
	b.pending = append(b.pending, r)
	if b.running < maxGetsInFlight {
		b.running++
		batch := b.take()
		b.mu.Unlock()
		k.readBatch(batch)
		k.nextBatch()
	} else {
		b.mu.Unlock()
	}
	<-r.done
	return r.value, r.err
}

// take removes the oldest waiting Gets (up to maxGetBatch); b.mu is held.
func (b *getBatcher) take() []*getReq {
	n := min(len(b.pending), maxGetBatch)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	if len(b.pending) == 0 {
		b.pending = nil
	}
	return batch
}

// nextBatch, after a query, reads the Gets that queued meanwhile on a new
// goroutine (so the Get that ran the query returns now), or ends this
// query slot when none wait.
func (k *KV) nextBatch() {
	b := &k.gets
	b.mu.Lock()
	if len(b.pending) == 0 {
		b.running--
		b.mu.Unlock()
		return
	}
	batch := b.take()
	b.mu.Unlock()
	go func() {
		k.readBatch(batch)
		k.nextBatch()
	}()
}

// readBatch reads the keys of batch in one query and answers each Get.
func (k *KV) readBatch(batch []*getReq) {
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	k.gets.queries.Add(1)
	ctx, cancel := k.ctx()
	defer cancel()
	if len(batch) == 1 {
		r := batch[0]
		err := k.pool.QueryRow(ctx, qGet, r.key).Scan(&r.value)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			r.err = backend.ErrNotFound
		case err != nil:
			r.err = k.readErr("read", err)
		}
		return
	}
	keys := make([][]byte, len(batch))
	for i, r := range batch {
		keys[i] = r.key
	}
	found := make(map[string][]byte, len(batch))
	rows, err := k.pool.Query(ctx, qGetMany, keys)
	if err == nil {
		for rows.Next() {
			var kk, vv []byte
			if err = rows.Scan(&kk, &vv); err != nil {
				break
			}
			found[string(kk)] = vv
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	seen := make(map[string]bool, len(batch))
	for _, r := range batch {
		switch v, ok := found[string(r.key)]; {
		case err != nil:
			r.err = k.readErr("read", err)
		case !ok:
			r.err = backend.ErrNotFound
		case seen[string(r.key)]:
			r.value = bytes.Clone(v) // each Get owns its copy
		default:
			r.value, seen[string(r.key)] = v, true
		}
	}
}
