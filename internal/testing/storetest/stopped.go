package storetest

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/badgerkv"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/internal/testing/pgtest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// A forgery test's steps: build a store, stop it, edit its backend the way
// an attacker with the files (or the database) would, open it again and
// check what the control plane finds. Backends, OpenStore and Reopen are
// those steps; Put and Rewrite are the edits.

// Backend is a durable backend a forgery test stops and reopens.
type Backend struct {
	Name string
	// New makes a fresh backend of tb's and returns its opener: every call
	// opens the same files or database again.
	New func(tb testing.TB) func() store.KV
}

// Backends are Badger and PostgreSQL.
var Backends = []Backend{{"badger", Badger}, {"postgres", Postgres}}

// Badger is a Badger backend in a directory of tb's.
func Badger(tb testing.TB) func() store.KV {
	dir := tb.TempDir()
	return func() store.KV {
		kv, err := badgerkv.Open(dir, badgerkv.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		return kv
	}
}

// Postgres is a PostgreSQL backend in a database of tb's own (pgtest: the
// test binary's TestMain runs pgtest.Main).
func Postgres(tb testing.TB) func() store.KV {
	url := pgtest.URL(tb)
	return func() store.KV {
		kv, err := pgkv.Open(context.Background(), url, pgkv.Options{Migrate: true})
		if err != nil {
			tb.Fatal(err)
		}
		return kv
	}
}

// OpenStore opens a Store on kv; the caller closes it.
func OpenStore(tb testing.TB, kv store.KV) *store.Store {
	tb.Helper()
	s, err := store.New(store.Config{KV: kv})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// Reopen stops s, applies forge to the backend open opens (alone, as an
// attacker with the files would), and returns a Store opened again on the
// forged backend, closed when tb ends.
func Reopen(tb testing.TB, s *store.Store, open func() store.KV, forge func(store.KV) error) *store.Store {
	tb.Helper()
	s.Close()
	kv := open()
	if err := forge(kv); err != nil {
		kv.Close()
		tb.Fatal(err)
	}
	kv.Close()
	s = OpenStore(tb, open())
	tb.Cleanup(func() { s.Close() })
	return s
}

// Put writes m at key, bypassing the store.
func Put(kv store.KV, key string, m proto.Message) error {
	v, err := proto.Marshal(m)
	if err != nil {
		return err
	}
	return kv.Commit([]store.Write{{Key: []byte(key), Value: v}})
}

// Rewrite edits the execution record id in place, bypassing the store.
func Rewrite(kv store.KV, id string, edit func(x *recordv1.Execution)) error {
	x, err := execution(kv, id)
	if err != nil {
		return err
	}
	edit(x)
	return Put(kv, "x/"+id, x)
}
