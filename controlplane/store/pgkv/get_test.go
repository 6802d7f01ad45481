package pgkv

import (
	"errors"
	"testing"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

// TestPostgresReadBatch: one batch with a key twice, an absent key and an
// empty value: each Get gets its answer, the repeated key two distinct
// copies.
func TestPostgresReadBatch(t *testing.T) {
	kv := openPG(t, pgtest.URL(t))
	if err := kv.Commit([]backend.Write{{Key: []byte("a"), Value: []byte("va")}, {Key: []byte("e")}}); err != nil {
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
	if !errors.Is(batch[1].err, backend.ErrNotFound) {
		t.Errorf("missing: %v, want backend.ErrNotFound", batch[1].err)
	}
	if batch[3].err != nil || len(batch[3].value) != 0 {
		t.Errorf("e: %q %v, want the empty value", batch[3].value, batch[3].err)
	}
	kv.Close()
	after := []*getReq{req("a"), req("e")}
	kv.readBatch(after)
	for _, r := range after {
		if !errors.Is(r.err, backend.ErrClosed) {
			t.Errorf("a batch read after Close = %v, want backend.ErrClosed", r.err)
		}
	}
}
