package pgkv_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/backend"
	"github.com/latchhq/latch/controlplane/store/pgkv"
	"github.com/latchhq/latch/internal/testing/pgtest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// openPG is the internal tests' openPG for this external test (it runs an
// execution store on the backend, which the package itself cannot import).
func openPG(tb testing.TB, url string) *pgkv.KV {
	tb.Helper()
	kv, err := pgkv.Open(context.Background(), url, pgkv.Options{Migrate: true, PageSize: 7, PageBytes: 40})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { kv.Close() })
	return kv
}

// TestPostgresLeaseFencesAStaleActive: one replica holds the lease; another
// cannot take it until it expires; once taken, the old holder's commits and
// renewals fail with ErrFenced (through the Store too) and nothing it wrote
// after the takeover is in the database.
func TestPostgresLeaseFencesAStaleActive(t *testing.T) {
	url := pgtest.URL(t)
	ctx := context.Background()
	a, b := openPG(t, url), openPG(t, url)
	la, err := a.AcquireLease(ctx, "replica-a", "10.0.0.1:7400", 300*time.Millisecond)
	if err != nil || la.Epoch != 1 {
		t.Fatalf("first AcquireLease = %+v, %v; want epoch 1", la, err)
	}
	if err := a.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("a1")}}); err != nil {
		t.Fatalf("the holder's commit: %v", err)
	}
	if _, err := b.AcquireLease(ctx, "replica-b", "10.0.0.2:7400", time.Second); !errors.Is(err, backend.ErrLeaseHeld) || !strings.Contains(err.Error(), "replica-a") {
		t.Fatalf("AcquireLease while held = %v, want ErrLeaseHeld naming replica-a", err)
	}
	if _, err := a.RenewLease(ctx, "replica-a", 300*time.Millisecond); err != nil {
		t.Fatalf("RenewLease by the holder: %v", err)
	}
	var lb *backend.Lease
	for deadline := time.Now().Add(10 * time.Second); ; {
		lb, err = b.AcquireLease(ctx, "replica-b", "10.0.0.2:7400", 10*time.Second)
		if err == nil || !errors.Is(err, backend.ErrLeaseHeld) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || lb.Epoch != 2 {
		t.Fatalf("AcquireLease after expiry = %+v, %v; want epoch 2", lb, err)
	}
	if cur, err := a.ReadLease(ctx); err != nil || cur.Holder != "replica-b" || cur.Address != "10.0.0.2:7400" || cur.Remaining() <= 0 {
		t.Errorf("ReadLease after the takeover = %+v, %v; want replica-b at 10.0.0.2:7400 with time left", cur, err)
	}
	if err := a.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("stale")}}); !errors.Is(err, backend.ErrFenced) {
		t.Errorf("the stale active's commit = %v, want ErrFenced", err)
	}
	if _, err := a.RenewLease(ctx, "replica-a", time.Second); !errors.Is(err, backend.ErrFenced) {
		t.Errorf("the stale active's renewal = %v, want ErrFenced", err)
	}
	s, err := store.New(store.Config{KV: a, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	err = s.Update(ctx, func(tx *store.Tx) error {
		_, err := tx.PutResult("r", &recordv1.Result{Status: 200})
		return err
	})
	if !errors.Is(err, backend.ErrFenced) {
		t.Errorf("Store.Update on the stale active = %v, want ErrFenced", err)
	}
	if err := b.Commit([]backend.Write{{Key: []byte("k"), Value: []byte("b1")}}); err != nil {
		t.Fatalf("the new holder's commit: %v", err)
	}
	if v, _ := b.Get([]byte("k")); string(v) != "b1" {
		t.Errorf("k = %q, want the new holder's b1", v)
	}
	st, err := b.Status(ctx)
	if err != nil || st.Lease.Holder != "replica-b" || st.Lease.Epoch != 2 || st.SchemaVersion != pgkv.SchemaVersion {
		t.Errorf("Status = %+v, %v", st, err)
	}
	if err := b.ReleaseLease(ctx, "replica-b"); err != nil {
		t.Fatal(err)
	}
	if l, err := a.AcquireLease(ctx, "replica-a", "10.0.0.1:7400", time.Second); err != nil || l.Epoch != 3 {
		t.Errorf("AcquireLease after a release = %+v, %v; want epoch 3 at once", l, err)
	}
}
