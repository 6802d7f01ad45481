package pgkv

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/internal/testing/pgtest"
)

// TestPostgresVaultStorage: the vault's row in the store. Replicas racing
// to create it: one wins, the others get fs.ErrExist and read the
// winner's. A replica writing over a version it has not read is refused
// (ErrVaultConflict) and writes nothing; once this backend holds the lease
// and another replica takes it, its writes are fenced.
func TestPostgresVaultStorage(t *testing.T) {
	url := pgtest.URL(t)
	const n = 4
	kvs := make([]*KV, n)
	vs := make([]*Vault, n)
	for i := range n {
		kvs[i] = openPG(t, url)
		vs[i] = kvs[i].VaultStorage()
	}
	if _, err := vs[0].Load(); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load of an empty store = %v, want fs.ErrNotExist", err)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = vs[i].Create([]byte{byte('a' + i)}) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won < 0:
			won = i
		case err == nil:
			t.Fatalf("replicas %d and %d both created the vault", won, i)
		case !errors.Is(err, fs.ErrExist):
			t.Fatalf("replica %d: Create = %v, want fs.ErrExist", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no replica created the vault")
	}
	for i := range n {
		got, err := vs[i].Load()
		if err != nil || !bytes.Equal(got, []byte{byte('a' + won)}) {
			t.Fatalf("replica %d reads %q, %v; want the winner's", i, got, err)
		}
	}

	if err := vs[0].Replace([]byte("v2 from 0")); err != nil {
		t.Fatal(err)
	}
	if err := vs[1].Replace([]byte("v2 from 1")); !errors.Is(err, ErrVaultConflict) {
		t.Fatalf("Replace over an unread version = %v, want ErrVaultConflict", err)
	}
	if got, _ := vs[2].Load(); string(got) != "v2 from 0" {
		t.Fatalf("after a refused Replace the vault holds %q", got)
	}
	if _, err := vs[1].Load(); err != nil {
		t.Fatal(err)
	}
	if err := vs[1].Replace([]byte("v3 from 1")); err != nil {
		t.Fatalf("Replace after reading the current version: %v", err)
	}

	ctx := context.Background()
	if _, err := kvs[1].AcquireLease(ctx, "one", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := kvs[1].ReleaseLease(ctx, "one"); err != nil { // as after its expiry
		t.Fatal(err)
	}
	if _, err := kvs[2].AcquireLease(ctx, "two", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := vs[1].Replace([]byte("v4 from the stale active")); !errors.Is(err, backend.ErrFenced) {
		t.Errorf("Replace by a fenced replica = %v, want backend.ErrFenced", err)
	}
	if got, _ := vs[3].Load(); string(got) != "v3 from 1" {
		t.Errorf("the fenced write landed: the vault holds %q", got)
	}
}
