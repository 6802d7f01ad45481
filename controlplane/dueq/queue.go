// Package dueq is a due-time work queue: timed items keyed by ID (one per
// ID), taken in order of the time they become due by a bounded set of
// workers, with a limit on how many items of one group are worked at once so
// one slow group cannot hold every worker. It is the shape of Nomad's
// lib/delayheap (a container/heap ordered by when, deduplicated by ID) with
// the worker side added.
//
// The engine uses it to schedule recovery of executions whose outcome is
// unknown (group = target). It has no Latch dependencies; anything may
// import it.
//
// # Order
//
// Items are ordered by Due, then Since, then ID. Take hands out the first
// item, among the groups with a free slot, whose Due is not after the
// clock. Within a group order is strict: an item waits only for items due
// before it, so none starves while workers keep calling Take and Done.
//
// # Items being worked
//
// Between Take and Done an ID is "taken": a Push of that ID is kept and
// applied at Done (so a worker may reschedule its own item before it calls
// Done), and a Pull of it is ignored (the work it asks for is under way).
package dueq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ErrInvalidConfig is returned by New for a config it cannot run with.
var ErrInvalidConfig = errors.New("dueq: invalid config")

// Config configures a Queue.
type Config struct {
	// Clock says what time it is; due times are compared with it
	// (default time.Now).
	Clock func() time.Time
	// GroupLimit is how many items of one group may be taken and not yet
	// Done at once (required, > 0).
	GroupLimit int
	// MaxWait bounds how long Take sleeps before it reads Clock again
	// (default 1s), so a clock that is stepped (an injected test clock, a
	// wall-clock jump) is followed within MaxWait.
	MaxWait time.Duration
}

// Queue is safe for concurrent use.
type Queue[V any] struct {
	clock    func() time.Time
	limit    int
	maxWait  time.Duration
	mu       sync.Mutex
	groups   map[string]*group[V]
	waiting  map[string]string // id -> group of a waiting item
	taken    map[string]*taken[V]
	changed  chan struct{} // closed and replaced whenever a Take may succeed
	numTaken int
}

type group[V any] struct {
	heap *Heap[V]
	busy int
}

type taken[V any] struct {
	group   string
	pending *Item[V] // a Push made while taken, applied at Done
}

// New returns an empty queue.
func New[V any](cfg Config) (*Queue[V], error) {
	if cfg.GroupLimit <= 0 {
		return nil, fmt.Errorf("%w: GroupLimit is %d, it must be at least 1", ErrInvalidConfig, cfg.GroupLimit)
	}
	if cfg.MaxWait < 0 {
		return nil, fmt.Errorf("%w: MaxWait is %s, it must not be negative", ErrInvalidConfig, cfg.MaxWait)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.MaxWait == 0 {
		cfg.MaxWait = time.Second
	}
	return &Queue[V]{
		clock: cfg.Clock, limit: cfg.GroupLimit, maxWait: cfg.MaxWait,
		groups: map[string]*group[V]{}, waiting: map[string]string{}, taken: map[string]*taken[V]{},
		changed: make(chan struct{}),
	}, nil
}

// Push schedules the item, replacing the waiting item with the same ID if
// there is one. If the ID is taken, the item is scheduled when it is Done.
func (q *Queue[V]) Push(it Item[V]) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t, ok := q.taken[it.ID]; ok {
		t.pending = &it
		return
	}
	q.put(it)
}

// Pull schedules the item no later than it.Due: a waiting item with the ID
// is moved earlier (keeping its group, order and value) if it.Due is
// before its due time; with no item of that ID the item is inserted. A
// taken ID is left alone. Pull reports whether it changed the queue.
func (q *Queue[V]) Pull(it Item[V]) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.taken[it.ID]; ok {
		return false
	}
	if g, ok := q.waiting[it.ID]; ok {
		cur, _ := q.groups[g].heap.Get(it.ID)
		if !it.Due.Before(cur.Due) {
			return false
		}
		cur.Due = it.Due
		it = cur
	}
	q.put(it)
	return true
}

// put inserts or replaces a waiting item; q.mu is held.
func (q *Queue[V]) put(it Item[V]) {
	if g, ok := q.waiting[it.ID]; ok && g != it.Group {
		q.removeWaiting(it.ID)
	}
	g := q.groups[it.Group]
	if g == nil {
		g = &group[V]{heap: NewHeap[V]()}
		q.groups[it.Group] = g
	}
	g.heap.Push(it)
	q.waiting[it.ID] = it.Group
	q.signal()
}

// Remove drops the waiting item with the ID, and a Push kept for it if it
// is taken. It reports whether there was anything to drop.
func (q *Queue[V]) Remove(id string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t, ok := q.taken[id]; ok && t.pending != nil {
		t.pending = nil
		return true
	}
	return q.removeWaiting(id)
}

func (q *Queue[V]) removeWaiting(id string) bool {
	name, ok := q.waiting[id]
	if !ok {
		return false
	}
	g := q.groups[name]
	g.heap.Remove(id)
	delete(q.waiting, id)
	q.prune(name, g)
	return true
}

// prune forgets an idle, empty group so the map does not grow with every
// group ever seen.
func (q *Queue[V]) prune(name string, g *group[V]) {
	if g.busy == 0 && g.heap.Len() == 0 {
		delete(q.groups, name)
	}
}

// Get returns the waiting item with the ID.
func (q *Queue[V]) Get(id string) (Item[V], bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	name, ok := q.waiting[id]
	if !ok {
		return Item[V]{}, false
	}
	return q.groups[name].heap.Get(id)
}

// Len is the number of waiting items.
func (q *Queue[V]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.waiting)
}

// Taken is the number of items taken and not yet Done.
func (q *Queue[V]) Taken() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.numTaken
}

// Take waits until an item is due in a group with a free slot, marks its
// ID taken and returns it. It returns ctx's error when ctx ends first. The
// caller must call Done with the item's ID when the work is over.
func (q *Queue[V]) Take(ctx context.Context) (Item[V], error) {
	for {
		q.mu.Lock()
		now := q.clock()
		var best *Item[V]
		var bestGroup *group[V]
		for _, g := range q.groups {
			if g.busy >= q.limit {
				continue
			}
			head, ok := g.heap.Peek()
			if ok && (best == nil || before(&head, best)) {
				best, bestGroup = &head, g
			}
		}
		if best != nil && !best.Due.After(now) {
			it, _ := bestGroup.heap.Pop()
			delete(q.waiting, it.ID)
			bestGroup.busy++
			q.numTaken++
			q.taken[it.ID] = &taken[V]{group: it.Group}
			q.mu.Unlock()
			return it, nil
		}
		wait := q.maxWait
		if best != nil {
			wait = min(wait, best.Due.Sub(now))
		}
		changed := q.changed
		q.mu.Unlock()

		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return Item[V]{}, ctx.Err()
		case <-changed:
		case <-t.C:
		}
		t.Stop()
	}
}

// Done ends the work on a taken ID: its group slot is freed and a Push made
// while it was taken is applied. Done of an ID that is not taken does
// nothing.
func (q *Queue[V]) Done(id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	t, ok := q.taken[id]
	if !ok {
		return
	}
	delete(q.taken, id)
	q.numTaken--
	g := q.groups[t.group]
	g.busy--
	if t.pending != nil {
		q.put(*t.pending)
	}
	q.prune(t.group, g)
	q.signal()
}

// signal wakes every waiting Take; q.mu is held.
func (q *Queue[V]) signal() {
	close(q.changed)
	q.changed = make(chan struct{})
}
