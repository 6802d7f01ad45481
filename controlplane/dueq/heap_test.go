package dueq

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func drain(h *Heap[int]) []string {
	var out []string
	for {
		it, ok := h.Pop()
		if !ok {
			return out
		}
		out = append(out, it.ID)
	}
}

func TestHeapOrder(t *testing.T) {
	tests := []struct {
		name   string
		push   []Item[int]
		remove []string
		want   []string
	}{
		{
			name: "earliest due first",
			push: []Item[int]{{ID: "c", Due: at(3)}, {ID: "a", Due: at(1)}, {ID: "b", Due: at(2)}},
			want: []string{"a", "b", "c"},
		},
		{
			name: "same due: oldest since first, then lower id",
			push: []Item[int]{
				{ID: "z", Due: at(1), Since: at(-5)}, {ID: "y", Due: at(1), Since: at(-9)},
				{ID: "b", Due: at(1), Since: at(-5)}, {ID: "late", Due: at(2), Since: at(-100)},
			},
			want: []string{"y", "b", "z", "late"},
		},
		{
			name: "a second push of an id replaces the first",
			push: []Item[int]{{ID: "a", Due: at(1)}, {ID: "b", Due: at(2)}, {ID: "a", Due: at(3)}},
			want: []string{"b", "a"},
		},
		{
			name: "replace can move an item earlier",
			push: []Item[int]{{ID: "a", Due: at(5)}, {ID: "b", Due: at(2)}, {ID: "a", Due: at(1)}},
			want: []string{"a", "b"},
		},
		{
			name:   "removed items are gone",
			push:   []Item[int]{{ID: "a", Due: at(1)}, {ID: "b", Due: at(2)}, {ID: "c", Due: at(3)}},
			remove: []string{"b", "missing"},
			want:   []string{"a", "c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := NewHeap[int]()
			for _, it := range tt.push {
				h.Push(it)
			}
			for _, id := range tt.remove {
				h.Remove(id)
			}
			if diff := cmp.Diff(tt.want, drain(h)); diff != "" {
				t.Errorf("pop order (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHeapGetPeekValue(t *testing.T) {
	h := NewHeap[int]()
	if _, ok := h.Peek(); ok {
		t.Fatal("Peek of an empty heap reported an item")
	}
	h.Push(Item[int]{ID: "a", Due: at(2), Value: 1})
	h.Push(Item[int]{ID: "a", Due: at(2), Value: 2})
	if got, ok := h.Get("a"); !ok || got.Value != 2 {
		t.Errorf("Get(%q) = %v, %v; want the value of the last push (2)", "a", got.Value, ok)
	}
	if h.Len() != 1 {
		t.Errorf("Len() = %d after two pushes of one id, want 1", h.Len())
	}
	if !h.Remove("a") || h.Remove("a") {
		t.Error("Remove should report true once, then false")
	}
}

// TestHeapMatchesSort pushes, replaces and removes at random and compares
// the pop order with a sort of what should remain.
func TestHeapMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	h := NewHeap[int]()
	want := map[string]Item[int]{}
	for range 5000 {
		id := fmt.Sprintf("x%03d", r.IntN(400))
		if r.IntN(5) == 0 {
			h.Remove(id)
			delete(want, id)
			continue
		}
		it := Item[int]{ID: id, Due: at(r.IntN(50)), Since: at(-r.IntN(20))}
		h.Push(it)
		want[id] = it
	}
	var items []Item[int]
	for _, it := range want {
		items = append(items, it)
	}
	slices.SortFunc(items, func(a, b Item[int]) int {
		if before(&a, &b) {
			return -1
		}
		return 1
	})
	var ids []string
	for _, it := range items {
		ids = append(ids, it.ID)
	}
	if diff := cmp.Diff(ids, drain(h)); diff != "" {
		t.Errorf("pop order differs from sorted order (-want +got):\n%s", diff)
	}
}
