package dueq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func newQueue(t *testing.T, cfg Config) *Queue[string] {
	t.Helper()
	q, err := New[string](cfg)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestNewRefusesBadConfig(t *testing.T) {
	for _, cfg := range []Config{{}, {GroupLimit: -1}, {GroupLimit: 1, MaxWait: -time.Second}} {
		if _, err := New[int](cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", cfg, err)
		}
	}
}

// take returns the next item and the (bubble) time it was handed out.
func take(t *testing.T, q *Queue[string]) (Item[string], time.Time) {
	t.Helper()
	it, err := q.Take(t.Context())
	if err != nil {
		t.Fatalf("Take() = %v", err)
	}
	return it, time.Now()
}

func TestTakeWaitsUntilDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, Config{GroupLimit: 1, MaxWait: time.Hour})
		start := time.Now()
		q.Push(Item[string]{ID: "b", Group: "g", Due: start.Add(2 * time.Minute)})
		q.Push(Item[string]{ID: "a", Group: "g", Due: start.Add(time.Minute)})
		it, when := take(t, q)
		if it.ID != "a" || !when.Equal(start.Add(time.Minute)) {
			t.Errorf("Take() = %s at +%s, want a at +1m", it.ID, when.Sub(start))
		}
		q.Done(it.ID)
		it, when = take(t, q)
		if it.ID != "b" || !when.Equal(start.Add(2*time.Minute)) {
			t.Errorf("Take() = %s at +%s, want b at +2m", it.ID, when.Sub(start))
		}
	})
}

func TestPushWakesASleepingTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, Config{GroupLimit: 1, MaxWait: time.Hour})
		start := time.Now()
		q.Push(Item[string]{ID: "later", Group: "g", Due: start.Add(time.Hour)})
		got := make(chan string)
		go func() {
			it, _ := take(t, q)
			got <- it.ID
		}()
		time.Sleep(time.Second)
		q.Push(Item[string]{ID: "now", Group: "g", Due: time.Now()})
		if id := <-got; id != "now" || time.Since(start) != time.Second {
			t.Errorf("Take() = %s after %s, want now after 1s", id, time.Since(start))
		}
	})
}

func TestGroupLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, Config{GroupLimit: 2})
		now := time.Now()
		// The slow group's items are all older than the other group's.
		for i := range 5 {
			q.Push(Item[string]{ID: fmt.Sprintf("slow%d", i), Group: "slow", Due: now.Add(-time.Hour), Since: now.Add(time.Duration(i - 100))})
		}
		q.Push(Item[string]{ID: "fast0", Group: "fast", Due: now})
		var got []string
		for range 3 {
			it, _ := take(t, q)
			got = append(got, it.ID)
		}
		if diff := cmp.Diff([]string{"slow0", "slow1", "fast0"}, got); diff != "" {
			t.Errorf("with slow at its limit the other group goes next (-want +got):\n%s", diff)
		}
		// Nothing else is takeable until a slow item is done.
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if it, err := q.Take(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Take() with every group at its limit = %s, %v; want to wait", it.ID, err)
		}
		q.Done("slow1")
		if it, _ := take(t, q); it.ID != "slow2" {
			t.Errorf("after Done(slow1) Take() = %s, want slow2", it.ID)
		}
		if q.Taken() != 3 || q.Len() != 2 {
			t.Errorf("Taken() = %d, Len() = %d; want 3 and 2", q.Taken(), q.Len())
		}
	})
}

func TestTakenIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, Config{GroupLimit: 4})
		now := time.Now()
		q.Push(Item[string]{ID: "a", Group: "g", Due: now, Value: "first"})
		it, _ := take(t, q)
		if q.Pull(Item[string]{ID: "a", Group: "g", Due: now}) {
			t.Error("Pull of a taken id changed the queue")
		}
		q.Push(Item[string]{ID: "a", Group: "g", Due: now.Add(time.Minute), Value: "again"})
		if q.Len() != 0 {
			t.Fatalf("a Push of a taken id was queued before Done: Len() = %d", q.Len())
		}
		q.Done(it.ID)
		got, ok := q.Get("a")
		if !ok || got.Value != "again" || !got.Due.Equal(now.Add(time.Minute)) {
			t.Errorf("after Done, Get(a) = %+v, %v; want the push made while taken", got, ok)
		}
		q.Done("a") // not taken: no effect
		if q.Taken() != 0 {
			t.Errorf("Taken() = %d, want 0", q.Taken())
		}
	})
}

func TestPull(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name    string
		have    *Item[string]
		pull    Item[string]
		changed bool
		want    Item[string]
	}{
		{"absent: inserted", nil, Item[string]{ID: "a", Group: "g", Due: now, Value: "new"}, true,
			Item[string]{ID: "a", Group: "g", Due: now, Value: "new"}},
		{"earlier: moved, rest kept", &Item[string]{ID: "a", Group: "g", Due: now.Add(time.Hour), Since: now.Add(-time.Hour), Value: "old"},
			Item[string]{ID: "a", Group: "other", Due: now, Value: "new"}, true,
			Item[string]{ID: "a", Group: "g", Due: now, Since: now.Add(-time.Hour), Value: "old"}},
		{"later: never moves an item back", &Item[string]{ID: "a", Group: "g", Due: now, Value: "old"},
			Item[string]{ID: "a", Group: "g", Due: now.Add(time.Hour), Value: "new"}, false,
			Item[string]{ID: "a", Group: "g", Due: now, Value: "old"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := newQueue(t, Config{GroupLimit: 1})
			if tt.have != nil {
				q.Push(*tt.have)
			}
			if got := q.Pull(tt.pull); got != tt.changed {
				t.Errorf("Pull() = %v, want %v", got, tt.changed)
			}
			got, _ := q.Get("a")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("item after Pull (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPushMovesGroupAndRemove(t *testing.T) {
	q := newQueue(t, Config{GroupLimit: 1})
	now := time.Now()
	q.Push(Item[string]{ID: "a", Group: "g1", Due: now})
	q.Push(Item[string]{ID: "a", Group: "g2", Due: now})
	if q.Len() != 1 {
		t.Fatalf("Len() = %d after moving one id between groups, want 1", q.Len())
	}
	it, err := q.Take(t.Context())
	if err != nil || it.Group != "g2" {
		t.Fatalf("Take() = %+v, %v; want the item in g2", it, err)
	}
	q.Push(Item[string]{ID: "a", Group: "g2", Due: now})
	if !q.Remove("a") {
		t.Error("Remove of the push kept for a taken id reported false")
	}
	q.Done("a")
	if q.Len() != 0 || q.Remove("a") {
		t.Errorf("the removed push came back: Len() = %d", q.Len())
	}
}

func TestTakeEndsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, Config{GroupLimit: 1})
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error)
		go func() {
			_, err := q.Take(ctx)
			errc <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("Take() after cancel = %v, want context.Canceled", err)
		}
	})
}

// TestSteppedClock: with an injected clock that is stepped rather than
// ticking, Take notices within MaxWait.
func TestSteppedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		fake := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return fake }
		q := newQueue(t, Config{GroupLimit: 1, Clock: clock, MaxWait: 5 * time.Second})
		q.Push(Item[string]{ID: "a", Group: "g", Due: fake.Add(24 * time.Hour)})
		start := time.Now()
		got := make(chan string)
		go func() {
			it, _ := take(t, q)
			got <- it.ID
		}()
		time.Sleep(time.Second)
		mu.Lock()
		fake = fake.Add(25 * time.Hour)
		mu.Unlock()
		<-got
		if waited := time.Since(start); waited > 5*time.Second {
			t.Errorf("Take noticed the stepped clock after %s, want within MaxWait (5s)", waited)
		}
	})
}

// TestNothingStarves runs workers over a stream of pushes in several groups,
// one of them slow, and checks that every item is taken and that within a
// group items are taken in queue order.
func TestNothingStarves(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(t, Config{GroupLimit: 2})
		r := rand.New(rand.NewPCG(3, 4))
		start := time.Now()
		const n = 600
		var mu sync.Mutex
		takenAt := map[string]int{} // id -> sequence number of its Take
		var seq int
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var done atomic.Int32
		for range 4 {
			wg.Go(func() {
				for {
					it, err := q.Take(ctx)
					if err != nil {
						return
					}
					mu.Lock()
					takenAt[it.ID] = seq
					seq++
					mu.Unlock()
					if it.Group == "slow" {
						time.Sleep(50 * time.Millisecond)
					} else {
						time.Sleep(time.Millisecond)
					}
					q.Done(it.ID)
					done.Add(1)
				}
			})
		}
		type pushed struct {
			id, group string
			due       time.Time
		}
		var all []pushed
		for i := range n {
			group := []string{"slow", "a", "b"}[r.IntN(3)]
			due := start.Add(time.Duration(r.IntN(2000)) * time.Millisecond)
			id := fmt.Sprintf("x%04d", i)
			q.Push(Item[string]{ID: id, Group: group, Due: due, Since: start})
			all = append(all, pushed{id, group, due})
			time.Sleep(time.Duration(r.IntN(3)) * time.Millisecond)
		}
		for done.Load() < n {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		wg.Wait()
		// Within a group, an item due strictly earlier and already queued
		// when the other was taken is never taken after it.
		var inversions int
		for _, a := range all {
			for _, b := range all {
				if a.group == b.group && a.due.Before(b.due) && takenAt[a.id] > takenAt[b.id] && a.id < b.id {
					inversions++
				}
			}
		}
		if len(takenAt) != n || inversions != 0 {
			t.Errorf("%d of %d items taken, %d order inversions within a group; want all and 0", len(takenAt), n, inversions)
		}
	})
}

// BenchmarkPushTake measures one Push and one Take+Done of a queue holding
// 5,000 waiting items in 8 groups.
func BenchmarkPushTake(b *testing.B) {
	q, err := New[int](Config{GroupLimit: 1 << 30})
	if err != nil {
		b.Fatal(err)
	}
	past := time.Now().Add(-time.Hour)
	for i := range 5000 {
		q.Push(Item[int]{ID: fmt.Sprintf("x%d", i), Group: fmt.Sprintf("g%d", i%8), Due: past.Add(time.Duration(i))})
	}
	ctx := context.Background()
	i := 5000
	for b.Loop() {
		q.Push(Item[int]{ID: fmt.Sprintf("x%d", i), Group: fmt.Sprintf("g%d", i%8), Due: past.Add(time.Duration(i))})
		it, err := q.Take(ctx)
		if err != nil {
			b.Fatal(err)
		}
		q.Done(it.ID)
		i++
	}
}
