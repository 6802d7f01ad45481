package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latchhq/latch/controlplane/catalog"
	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/controlplane/store/pgtest"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestLeaseLostStopsTheActive: while a control plane on PostgreSQL is
// active, another replica takes its lease (as after a partition that
// outlasted it). The old active's next commit is fenced, and Run stops
// with ErrLeaseLost at its next renewal instead of serving on.
func TestLeaseLostStopsTheActive(t *testing.T) {
	url := pgtest.URL(t)
	srv, err := New(Config{DataDir: t.TempDir(), CatalogSource: catalog.Bytes("c.yaml", []byte(catalogYAML)), Store: url, Replica: "a", LeaseTTL: 1500 * time.Millisecond, KeySealer: testKeySealer(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	put := func() error {
		return srv.Store.Update(ctx, func(tx *store.Tx) error {
			_, err := tx.PutResult("probe", &recordv1.Result{Status: 200})
			return err
		})
	}
	if err := put(); err != nil {
		t.Fatalf("the active's commit: %v", err)
	}

	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "UPDATE latch_lease SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	other, err := store.OpenPostgres(ctx, url, store.PostgresOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.AcquireLease(ctx, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := put(); !errors.Is(err, store.ErrFenced) {
		t.Errorf("the stale active's commit = %v, want ErrFenced", err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Run = %v, want ErrLeaseLost", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stale active still runs 30s after losing its lease")
	}
}

type countingChannel struct{ sent int }

func (c *countingChannel) Dispatch(context.Context, engine.Call) engine.Attempt {
	c.sent++
	return engine.Attempt{Class: engine.Observed}
}
func (c *countingChannel) Identity(_ *tools.Tool, t *tools.Target) engine.Identity {
	return engine.Identity{Target: t.BaseURL}
}

func (c *countingChannel) Query(context.Context, engine.Call) engine.Attempt {
	return engine.Attempt{Class: engine.Unsupported}
}

// TestNothingIsSentPastTheLeaseDeadline: the check before every dispatch
// uses the local deadline; past it the channel is not called.
func TestNothingIsSentPastTheLeaseDeadline(t *testing.T) {
	inner := &countingChannel{}
	k := &leaseKeeper{}
	ch := fencedChannel{Channel: inner, lease: k}
	future, past := time.Now().Add(time.Hour), time.Now().Add(-time.Millisecond)
	k.deadline.Store(&future)
	if a := ch.Dispatch(context.Background(), engine.Call{}); a.Class != engine.Observed || inner.sent != 1 {
		t.Fatalf("within the deadline: %v, sent %d", a.Class, inner.sent)
	}
	k.deadline.Store(&past)
	if a := ch.Dispatch(context.Background(), engine.Call{}); a.Class != engine.NotSent || a.Final || inner.sent != 1 {
		t.Errorf("past the deadline: %+v, sent %d; want NotSent without a send", a, inner.sent)
	}
}
