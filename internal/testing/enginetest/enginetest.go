// Package enginetest starts an engine on a store for the tests that run a
// call end to end through a channel or a backend written outside the core
// (a new channel kind, a new store backend): a store on the given backend,
// a fixed fingerprint key, recovery rounds fast enough for a test. Only
// tests import it.
package enginetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/fingerprint"
	"github.com/latchhq/latch/controlplane/store"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// Start opens a store on kv and a started engine on it serving cat
// through chans. Both close when tb ends (closing them earlier, to reopen
// the backend, is allowed: Close is idempotent).
func Start(tb testing.TB, kv store.KV, cat *tools.Catalog, chans map[tools.Channel]engine.Channel) (*store.Store, *engine.Engine) {
	tb.Helper()
	st, err := store.New(store.Config{KV: kv})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	fp, err := fingerprint.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		tb.Fatal(err)
	}
	e, err := engine.New(engine.Config{
		Store: st, Catalog: cat, Fingerprinter: fp, Channels: chans,
		Recovery: engine.RecoveryConfig{Interval: 5 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 2 * time.Millisecond},
	})
	if err != nil {
		tb.Fatal(err)
	}
	if err := e.Start(tb.Context()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(e.Close) // runs before the store's Close: cleanups run last first
	return st, e
}

// AwaitCompleted watches execution id (as actor) until it is completed and
// returns it; it fails tb when the watch ends first (10s bound).
func AwaitCompleted(tb testing.TB, e *engine.Engine, id, actor string) *recordv1.Execution {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), 10*time.Second)
	defer cancel()
	w, err := e.Watch(ctx, id, actor)
	if err != nil {
		tb.Fatal(err)
	}
	var x *recordv1.Execution
	for x = range w {
		if x.GetState() == recordv1.State_STATE_COMPLETED {
			break
		}
	}
	if x.GetState() != recordv1.State_STATE_COMPLETED {
		tb.Fatalf("execution %s is %v, want completed", id, x.GetState())
	}
	return x
}
