package engine

import (
	"context"
	"testing"
	"time"

	"github.com/latchhq/latch/internal/lifecycle"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

func resting(x *recordv1.Execution) bool { return lifecycle.Resting(x.GetState()) }

// TestAwaitResting: the Submit wait follows an execution to completion,
// answers the state it has when its ctx ends, and does not miss a change
// committed before it subscribed (the caller's copy is stale).
func TestAwaitResting(t *testing.T) {
	ch := &fakeChannel{block: make(chan struct{})}
	h := newHarness(t, t.TempDir(), ch)
	r := h.submit(t, "alice", "deploy", `{"service":"api","version":"9.9.9"}`)
	stale := r.Execution
	if stale.GetState() != recordv1.State_STATE_DISPATCHED {
		t.Fatalf("Submit state = %s, want dispatched", lifecycle.Name(stale.GetState()))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got := h.e.AwaitResting(ctx, stale, resting); got.GetState() != recordv1.State_STATE_DISPATCHED {
		t.Errorf("AwaitResting(ended ctx) = %s, want dispatched (the state it had)", lifecycle.Name(got.GetState()))
	}

	done := make(chan *recordv1.Execution, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- h.e.AwaitResting(ctx, stale, resting)
	}()
	close(ch.block)
	got := <-done
	if got.GetState() != recordv1.State_STATE_COMPLETED || got.GetResultRef() == "" {
		t.Fatalf("AwaitResting = %s (result %q), want completed with its result", lifecycle.Name(got.GetState()), got.GetResultRef())
	}

	// Completed before this wait subscribed: the stale copy still says
	// dispatched, and the wait must not sit until its bound.
	h.waitState(t, stale.GetId(), recordv1.State_STATE_COMPLETED)
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if got := h.e.AwaitResting(ctx, stale, resting); got.GetState() != recordv1.State_STATE_COMPLETED {
		t.Errorf("AwaitResting(stale copy of a completed execution) = %s, want completed", lifecycle.Name(got.GetState()))
	}
	if ctx.Err() != nil {
		t.Errorf("AwaitResting waited until its bound for a change it had missed")
	}
}
