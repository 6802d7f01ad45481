package pgkv

import (
	"context"
	"testing"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/testing/kvtest"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// openPG opens the PostgreSQL backend on url (migrating it) with small
// pages (7 rows or 40 bytes: every contract scan crosses pages) and closes
// it when tb ends.
func openPG(tb testing.TB, url string) *KV {
	tb.Helper()
	kv, err := Open(context.Background(), url, Options{Migrate: true, PageSize: 7, PageBytes: 40})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { kv.Close() })
	return kv
}

// TestKVContract holds the PostgreSQL backend to
// the KV contract.
func TestKVContract(t *testing.T) {
	kvtest.Run(t, func(t testing.TB) backend.KV { return openPG(t, pgtest.URL(t)) })
}

// TestConcurrentGetsCoalesce: many Gets at once on PostgreSQL are
// answered right (kvtest.ConcurrentGets) in fewer queries than Gets.
func TestConcurrentGetsCoalesce(t *testing.T) {
	kv := openPG(t, pgtest.URL(t))
	q0 := kv.gets.queries.Load()
	kvtest.ConcurrentGets(t, kv)
	if q := kv.gets.queries.Load() - q0; q >= kvtest.Workers*kvtest.PerWorker {
		t.Errorf("%d Gets at once took %d queries: want them coalesced into fewer", kvtest.Workers*kvtest.PerWorker, q)
	}
}
