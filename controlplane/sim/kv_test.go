package sim

import (
	"fmt"
	"sync"
	"time"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/memkv"
)

// commitFault is what the schedule does to one commit.
type commitFault int

const (
	commitOK commitFault = iota
	// commitFails: nothing is written; the backend says so
	// (ErrNotCommitted), as PostgreSQL does when it was unreachable.
	commitFails
	// commitLost: the writes are applied but the answer is lost
	// (ErrCommitUnknown); every later commit of the process is refused
	// until it restarts, as pgkv does.
	commitLost
	// crashBefore, crashAfter: the process dies just before or just after
	// the commit reaches the disk.
	crashBefore
	crashAfter
)

// commitFaultNames name the faults in the schedule's trace.
var commitFaultNames = [...]string{commitOK: "ok", commitFails: "fails", commitLost: "loses its answer", crashBefore: "crashes the process before the disk", crashAfter: "crashes the process after the disk"}

// genKV is one process's view of the durable store (the shared memkv): a
// commit passes through the schedule's fault plan; after the process died
// (crash, lost answer) or was fenced by a newer replica, its commits fail.
type genKV struct {
	w   *world
	gen int
	kv  *memkv.KV

	mu     sync.Mutex
	dead   bool  // crashed: nothing more reaches the disk
	wedged bool  // a lost commit answer: refused until restart
	fenced int64 // the epoch that fenced this replica (0: none)
}

var _ backend.KV = (*genKV)(nil)

func (k *genKV) Get(key []byte) ([]byte, error) { return k.kv.Get(key) }

func (k *genKV) Scan(prefix []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.kv.Scan(prefix, reverse, fn)
}

func (k *genKV) ScanFrom(prefix, start []byte, reverse bool, fn func(key, value []byte) bool) error {
	return k.kv.ScanFrom(prefix, start, reverse, fn)
}

func (k *genKV) Commit(writes []backend.Write) error {
	// A slow disk (or a database under load): the commit takes a while of
	// the bubble's clock, outside the lock so that a crash can come
	// meanwhile. A process that can no longer commit draws nothing from
	// the plan: its goroutines fail in whatever order they run.
	if err := k.refused(); err != nil {
		return err
	}
	f, slow := k.w.nextCommit(k.gen)
	if slow > 0 {
		time.Sleep(slow)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.refusedLocked(); err != nil {
		return err
	}
	switch f {
	case commitFails:
		return backend.ErrNotCommitted
	case commitLost:
		k.wedged = true
		if err := k.kv.Commit(writes); err != nil {
			return err
		}
		return backend.ErrCommitUnknown
	case crashBefore:
		k.dead = true
		return backend.ErrClosed
	case crashAfter:
		k.dead = true
		if err := k.kv.Commit(writes); err != nil {
			return err
		}
		return backend.ErrClosed
	}
	return k.kv.Commit(writes)
}

func (k *genKV) refused() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.refusedLocked()
}

func (k *genKV) refusedLocked() error {
	switch {
	case k.dead:
		return backend.ErrClosed
	case k.fenced > 0:
		return fmt.Errorf("%w: epoch %d took the lease", backend.ErrFenced, k.fenced)
	case k.wedged:
		return backend.ErrCommitUnknown
	}
	return nil
}

// Close leaves the shared store open: the next process opens it.
func (k *genKV) Close() error { return nil }

func (k *genKV) kill() {
	k.mu.Lock()
	k.dead = true
	k.mu.Unlock()
}

func (k *genKV) fence(epoch int64) {
	k.mu.Lock()
	k.fenced = epoch
	k.mu.Unlock()
}

// broken reports whether the process can no longer commit and must be
// restarted (it crashed in a commit or lost a commit's answer).
func (k *genKV) broken() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.dead || k.wedged
}
