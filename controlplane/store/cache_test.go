package store

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/latchhq/latch/controlplane/store/memkv"
)

// racingKV runs during, once, inside its next Get after the backend read:
// a commit that lands between a reader's miss and the cache update.
type racingKV struct {
	*memkv.KV
	during func()
}

func (r *racingKV) Get(key []byte) ([]byte, error) {
	v, err := r.KV.Get(key)
	if f := r.during; f != nil {
		r.during = nil
		f()
	}
	return v, err
}

// TestCachedMissNeverHidesACommit: a miss is cached, a commit replaces it,
// and a miss or value read while a commit of the same key landed is not
// cached over the committed value.
func TestCachedMissNeverHidesACommit(t *testing.T) {
	kv := &racingKV{KV: memkv.New()}
	c := newCachedKV(kv)
	if _, err := c.Get([]byte("x/a")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(missing) = %v", err)
	}
	if _, ok := c.cur["x/a"]; !ok {
		t.Error("a miss was not cached")
	}
	if err := c.Commit([]Write{{Key: []byte("x/a"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}
	if v, err := c.Get([]byte("x/a")); err != nil || string(v) != "1" {
		t.Errorf("Get after commit = %q, %v", v, err)
	}

	kv.during = func() {
		if err := c.Commit([]Write{{Key: []byte("x/b"), Value: []byte("2")}}); err != nil {
			t.Error(err)
		}
	}
	if _, err := c.Get([]byte("x/b")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the racing Get = %v, want the miss it read", err)
	}
	if v, err := c.Get([]byte("x/b")); err != nil || string(v) != "2" {
		t.Errorf("Get after a commit raced a miss = %q, %v: the stale miss was cached", v, err)
	}

	// The same for a value read while a commit replaced it.
	if err := kv.Commit([]Write{{Key: []byte("x/d"), Value: []byte("old")}}); err != nil {
		t.Fatal(err)
	}
	kv.during = func() {
		if err := c.Commit([]Write{{Key: []byte("x/d"), Value: []byte("new")}}); err != nil {
			t.Error(err)
		}
	}
	c.Get([]byte("x/d")) //nolint:errcheck // the value after it is what is tested
	if v, err := c.Get([]byte("x/d")); err != nil || string(v) != "new" {
		t.Errorf("Get after a commit raced a read = %q, %v: the stale value was cached", v, err)
	}

	// A generation swap during the read: the miss is not cached.
	kv.during = func() {
		c.mu.Lock()
		for i := range cacheGeneration + 1 {
			c.put(strconv.Itoa(i)+"/pad", cached{value: []byte{1}})
		}
		c.mu.Unlock()
	}
	c.Get([]byte("x/c")) //nolint:errcheck // the miss is what is tested
	if _, ok := c.cur["x/c"]; ok {
		t.Error("a miss read across a generation swap was cached")
	}
}

// TestCachedLendAndGet: lend hands out the cache's own bytes, Get a copy
// its caller may change without changing what later reads see.
func TestCachedLendAndGet(t *testing.T) {
	kv := memkv.New()
	if err := kv.Commit([]Write{{Key: []byte("x/read"), Value: []byte("from the backend")}}); err != nil {
		t.Fatal(err)
	}
	c := newCachedKV(kv)
	if err := c.Commit([]Write{{Key: []byte("x/a"), Value: []byte("committed")}}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"x/a", "x/read"} {
		lent, err := c.lend([]byte(key))
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Get([]byte(key))
		if err != nil || string(got) != string(lent) {
			t.Fatalf("Get(%s) = %q, %v; lend gave %q", key, got, err, lent)
		}
		got[0] = '!'
		again, err := c.lend([]byte(key))
		if err != nil || again[0] == '!' || &again[0] != &lent[0] {
			t.Errorf("%s: after the caller of Get changed its copy, lend reads %q (the cache's own bytes: %v)", key, again, &again[0] == &lent[0])
		}
	}
	if _, err := c.lend([]byte("x/none")); !errors.Is(err, ErrNotFound) {
		t.Errorf("lend(missing) = %v, want ErrNotFound", err)
	}
}

// TestIndexKey: journal and checkpoint keys are spelled as fmt's
// "%c/%016x" spells them, which is what every stored key is.
func TestIndexKey(t *testing.T) {
	for _, i := range []int64{0, 1, 9, 10, 15, 16, 255, 4096, 1<<32 + 7, 1<<62 + 12345, 1<<63 - 1, -1, -4096} {
		for _, p := range []byte{'j', 'c'} {
			if got, want := string(indexKey(p, i)), fmt.Sprintf("%c/%016x", p, i); got != want {
				t.Errorf("indexKey(%c, %d) = %q, want %q", p, i, got, want)
			}
		}
	}
}
