package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/store/memkv"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// countingKV counts commits.
type countingKV struct {
	*memkv.KV
	mu      sync.Mutex
	commits int
	keys    map[string]bool // every key committed
}

func (c *countingKV) Commit(w []Write) error {
	c.mu.Lock()
	c.commits++
	if c.keys == nil {
		c.keys = map[string]bool{}
	}
	for _, x := range w {
		c.keys[string(x.Key)] = true
	}
	c.mu.Unlock()
	return c.KV.Commit(w)
}

func (c *countingKV) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commits
}

func putExec(id string) func(*Tx) error {
	return func(tx *Tx) error {
		return tx.PutExecution(exec(id, "fp-"+id, "a", recordv1.State_STATE_ACCEPTED), true)
	}
}

// TestLazyUpdateJoinsTheNextGroup: a lazy update starts no commit: it is
// committed with the next update's group (one commit for both), and its
// caller is answered after that commit, like the other's.
func TestLazyUpdateJoinsTheNextGroup(t *testing.T) {
	kv := &countingKV{KV: memkv.New()}
	s := newStore(t, kv)
	s.lazyDelay = time.Hour // only another update (or Close) commits it
	lazy := &request{fn: putExec("act_lazy"), done: make(chan error, 1), lazy: true}
	if err := s.enqueue(context.Background(), lazy); err != nil {
		t.Fatal(err)
	}
	if err := s.Update(context.Background(), putExec("act_next")); err != nil {
		t.Fatal(err)
	}
	if err := <-lazy.done; err != nil {
		t.Fatalf("lazy update = %v", err)
	}
	if got := kv.count(); got != 1 {
		t.Errorf("commits = %d, want 1 (the lazy update shares the next update's commit)", got)
	}
	for _, id := range []string{"act_lazy", "act_next"} {
		if _, err := s.Execution(id); err != nil {
			t.Errorf("Execution(%q) = %v, want it committed", id, err)
		}
	}
}

// TestLazyUpdateCommitsAlone: with no other update, a lazy update is
// committed on its own after its delay, and only then answered.
func TestLazyUpdateCommitsAlone(t *testing.T) {
	kv := &countingKV{KV: memkv.New()}
	s := newStore(t, kv)
	if err := s.UpdateLazy(context.Background(), putExec("act_alone")); err != nil {
		t.Fatal(err)
	}
	if got := kv.count(); got != 1 {
		t.Errorf("commits = %d, want 1", got)
	}
	if _, err := s.Execution("act_alone"); err != nil {
		t.Errorf("Execution after UpdateLazy returned = %v, want it committed", err)
	}
}

// TestCloseCommitsHeldLazyUpdates: Close commits what lazy updates are
// held before it stops the writer; none is dropped.
func TestCloseCommitsHeldLazyUpdates(t *testing.T) {
	kv := &countingKV{KV: memkv.New()}
	s, err := New(Config{KV: kv})
	if err != nil {
		t.Fatal(err)
	}
	s.lazyDelay = time.Hour
	lazy := &request{fn: putExec("act_held"), done: make(chan error, 1), lazy: true}
	if err := s.enqueue(context.Background(), lazy); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-lazy.done; err != nil {
		t.Fatalf("held lazy update at Close = %v, want committed", err)
	}
	if got := kv.count(); got != 1 {
		t.Errorf("commits = %d, want 1", got)
	}
	if !kv.keys[string(execKey("act_held"))] {
		t.Errorf("act_held was not in the commit Close made")
	}
}

// heldKV holds its first commit until release is closed, then commits
// everything; it counts commits.
type heldKV struct {
	countingKV
	entered, release chan struct{}
	once             sync.Once
}

func (h *heldKV) Commit(w []Write) error {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	return h.countingKV.Commit(w)
}

// TestUpdatesJoinTheGroupBeingBuilt: while one group is being synced, the
// next is open: an update that arrives after it was started still joins
// it, so it is committed right after the group in flight instead of a
// whole commit later.
func TestUpdatesJoinTheGroupBeingBuilt(t *testing.T) {
	kv := &heldKV{countingKV: countingKV{KV: memkv.New()}, entered: make(chan struct{}), release: make(chan struct{})}
	s := newStore(t, kv)
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(kv.release) }) }
	t.Cleanup(release) // before the store's Close (cleanups run last first)
	errs := make(chan error, 3)
	go func() { errs <- s.Update(context.Background(), putExec("act_1")) }()
	<-kv.entered // group 1 is committing
	built := make(chan struct{})
	go func() {
		errs <- s.Update(context.Background(), func(tx *Tx) error {
			close(built) // group 2 is being built
			return putExec("act_2")(tx)
		})
	}()
	<-built
	third := &request{fn: putExec("act_3"), done: make(chan error, 1)}
	if err := s.enqueue(context.Background(), third); err != nil {
		t.Fatal(err)
	}
	// Release group 1 once the writer has taken act_3 off the queue.
	for deadline := time.Now().Add(10 * time.Second); len(s.reqs) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer did not take act_3 while group 1 was committing")
		}
	}
	release()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := <-third.done; err != nil {
		t.Fatal(err)
	}
	if got := kv.count(); got != 2 {
		t.Errorf("commits = %d, want 2 (act_2 and act_3 in the group built while act_1 was committing)", got)
	}
}

// TestFlushCommitsHeldLazyUpdates: Flush returns once the lazy updates held
// before it are committed.
func TestFlushCommitsHeldLazyUpdates(t *testing.T) {
	kv := &countingKV{KV: memkv.New()}
	s := newStore(t, kv)
	s.lazyDelay = time.Hour
	lazy := &request{fn: putExec("act_flushed"), done: make(chan error, 1), lazy: true}
	if err := s.enqueue(context.Background(), lazy); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Execution("act_flushed"); err != nil {
		t.Errorf("Execution after Flush = %v, want the held lazy update committed", err)
	}
	if err := <-lazy.done; err != nil {
		t.Errorf("lazy update = %v", err)
	}
}
