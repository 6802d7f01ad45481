package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/latchhq/latch/controlplane/store/pgtest"
)

// TestConcurrentGets: many Gets at once, of keys present, absent, empty
// and repeated, each answer right and its own copy, on every backend. On
// PostgreSQL they are coalesced: fewer queries than Gets.
func TestConcurrentGets(t *testing.T) {
	const workers, per, keys = 64, 40, 50
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			kv := b.open(t, t.TempDir())
			t.Cleanup(func() { kv.Close() })
			var ws []Write
			for i := range keys {
				if i%5 == 4 {
					continue // absent
				}
				v := []byte(fmt.Sprintf("v%d", i))
				if i%7 == 0 {
					v = nil // empty
				}
				ws = append(ws, Write{Key: []byte(fmt.Sprintf("k%d", i)), Value: v})
			}
			if err := kv.Commit(ws); err != nil {
				t.Fatal(err)
			}
			var q0 int64
			if pg, ok := kv.(*PostgresKV); ok {
				q0 = pg.gets.queries.Load()
			}
			start := make(chan struct{})
			errs := make(chan error, workers*per)
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for j := range per {
						i := (w*7 + j*3) % keys
						v, err := kv.Get([]byte(fmt.Sprintf("k%d", i)))
						var want string
						switch {
						case i%5 == 4:
							if !errors.Is(err, ErrNotFound) {
								errs <- fmt.Errorf("Get(k%d) = %q, %v; want ErrNotFound", i, v, err)
							}
							continue
						case i%7 == 0:
						default:
							want = fmt.Sprintf("v%d", i)
						}
						if err != nil || string(v) != want {
							errs <- fmt.Errorf("Get(k%d) = %q, %v; want %q", i, v, err, want)
							continue
						}
						if len(v) > 0 {
							v[0] = 'X' // must not reach another Get's answer
						}
					}
				}()
			}
			close(start)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			if pg, ok := kv.(*PostgresKV); ok {
				if q := pg.gets.queries.Load() - q0; q >= workers*per {
					t.Errorf("%d Gets at once took %d queries: want them coalesced into fewer", workers*per, q)
				}
			}
		})
	}
}

// TestPostgresReadBatch: one batch with a key twice, an absent key and an
// empty value: each Get gets its answer, the repeated key two distinct
// copies.
func TestPostgresReadBatch(t *testing.T) {
	kv := openPG(t, pgtest.URL(t))
	if err := kv.Commit([]Write{{Key: []byte("a"), Value: []byte("va")}, {Key: []byte("e")}}); err != nil {
		t.Fatal(err)
	}
	req := func(k string) *getReq { return &getReq{key: []byte(k), done: make(chan struct{})} }
	batch := []*getReq{req("a"), req("missing"), req("a"), req("e")}
	kv.readBatch(batch)
	for i, r := range batch {
		select {
		case <-r.done:
		default:
			t.Errorf("request %d not answered", i)
		}
	}
	if string(batch[0].value) != "va" || batch[0].err != nil || string(batch[2].value) != "va" || batch[2].err != nil {
		t.Errorf("a: %q %v and %q %v, want va twice", batch[0].value, batch[0].err, batch[2].value, batch[2].err)
	}
	batch[0].value[0] = 'X'
	if string(batch[2].value) != "va" {
		t.Errorf("the two Gets of a share one slice")
	}
	if !errors.Is(batch[1].err, ErrNotFound) {
		t.Errorf("missing: %v, want ErrNotFound", batch[1].err)
	}
	if batch[3].err != nil || len(batch[3].value) != 0 {
		t.Errorf("e: %q %v, want the empty value", batch[3].value, batch[3].err)
	}
	kv.Close()
	after := []*getReq{req("a"), req("e")}
	kv.readBatch(after)
	for _, r := range after {
		if !errors.Is(r.err, ErrClosed) {
			t.Errorf("a batch read after Close = %v, want ErrClosed", r.err)
		}
	}
}
