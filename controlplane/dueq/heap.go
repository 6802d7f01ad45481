package dueq

import (
	"container/heap"
	"time"
)

// Item is one unit of timed work.
type Item[V any] struct {
	// ID identifies the work; a queue holds at most one item per ID.
	ID string
	// Group is the concurrency group (for Latch: the execution's target).
	Group string
	// Due is when the item may be taken.
	Due time.Time
	// Since is when the work was first wanted (for Latch: the execution's
	// acceptance). Among items due at the same instant the one with the
	// earliest Since goes first, then the lower ID.
	Since time.Time
	// Value is the caller's payload.
	Value V
}

// before is the queue order: Due, then Since, then ID.
func before[V any](a, b *Item[V]) bool {
	if !a.Due.Equal(b.Due) {
		return a.Due.Before(b.Due)
	}
	if !a.Since.Equal(b.Since) {
		return a.Since.Before(b.Since)
	}
	return a.ID < b.ID
}

// Heap is a due-time min-heap keyed by ID, the shape of Nomad's
// lib/delayheap: Push inserts or replaces, Peek and Pop give the earliest
// item. It is not safe for concurrent use; Queue wraps it with a lock.
type Heap[V any] struct {
	h     entries[V]
	index map[string]*entry[V]
}

type entry[V any] struct {
	item Item[V]
	pos  int
}

// NewHeap returns an empty heap.
func NewHeap[V any]() *Heap[V] {
	return &Heap[V]{index: map[string]*entry[V]{}}
}

// Len is the number of items.
func (h *Heap[V]) Len() int { return len(h.h) }

// Push inserts the item, or replaces the item with the same ID (its due
// time, group, order and value all become the new item's).
func (h *Heap[V]) Push(it Item[V]) {
	if e, ok := h.index[it.ID]; ok {
		e.item = it
		heap.Fix(&h.h, e.pos)
		return
	}
	e := &entry[V]{item: it}
	h.index[it.ID] = e
	heap.Push(&h.h, e)
}

// Get returns the item with the ID.
func (h *Heap[V]) Get(id string) (Item[V], bool) {
	e, ok := h.index[id]
	if !ok {
		return Item[V]{}, false
	}
	return e.item, true
}

// Peek returns the earliest item without removing it.
func (h *Heap[V]) Peek() (Item[V], bool) {
	if len(h.h) == 0 {
		return Item[V]{}, false
	}
	return h.h[0].item, true
}

// Pop removes and returns the earliest item.
func (h *Heap[V]) Pop() (Item[V], bool) {
	if len(h.h) == 0 {
		return Item[V]{}, false
	}
	e := heap.Pop(&h.h).(*entry[V])
	delete(h.index, e.item.ID)
	return e.item, true
}

// Remove deletes the item with the ID and reports whether it was there.
func (h *Heap[V]) Remove(id string) bool {
	e, ok := h.index[id]
	if !ok {
		return false
	}
	heap.Remove(&h.h, e.pos)
	delete(h.index, id)
	return true
}

// entries implements container/heap.Interface.
type entries[V any] []*entry[V]

func (s entries[V]) Len() int           { return len(s) }
func (s entries[V]) Less(i, j int) bool { return before(&s[i].item, &s[j].item) }
func (s entries[V]) Swap(i, j int) {
	s[i], s[j] = s[j], s[i]
	s[i].pos = i
	s[j].pos = j
}

func (s *entries[V]) Push(x any) {
	e := x.(*entry[V])
	e.pos = len(*s)
	*s = append(*s, e)
}

func (s *entries[V]) Pop() any {
	old := *s
	n := len(old)
	e := old[n-1]
	old[n-1] = nil
	e.pos = -1
	*s = old[:n-1]
	return e
}
