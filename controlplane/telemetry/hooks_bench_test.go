package telemetry

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/controlplane/store"
	"github.com/latchhq/latch/internal/opshttp"
	"github.com/latchhq/latch/internal/tracing"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

// BenchmarkHooksPerCall is the control plane's instrumentation cost of one
// call, by itself: the submit hook and span, one dispatch attempt with its
// span and histogram, and the store hook for the call's four transitions
// (accepted, authorized, dispatched in the submit's commit; completed in
// the next), with spans recorded by a batching processor. Compare it with
// the CPU time of a whole call (BenchmarkObservedToolCall's cpu-µs/call).
//
//	go test -run '^$' -bench HooksPerCall ./controlplane/telemetry/
func BenchmarkHooksPerCall(b *testing.B) {
	cat := &tools.Catalog{Tools: map[string]*tools.Tool{"deploy_release": {Name: "deploy_release"}}}
	tp := trace.NewTracerProvider(trace.WithBatcher(tracetest.NewNoopExporter()))
	defer tp.Shutdown(context.Background())
	tel, err := New(Config{Registry: opshttp.NewRegistry(), Tracer: tp, Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	defer tel.Close()
	x := &recordv1.Execution{Id: "act_01BENCH", Tool: "deploy_release", Channel: "http", State: recordv1.State_STATE_DISPATCHED, Attempts: 1,
		Evidence: &recordv1.Evidence{Traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	now := time.Now()
	tr := func(from, to recordv1.State) store.Transition {
		return store.Transition{ExecutionID: x.Id, Tool: x.Tool, Actor: "alice", Kind: recordv1.EntryKind_ENTRY_KIND_TRANSITION, From: from, To: to, AcceptedAt: now, At: now}
	}
	submitGroup := store.Group{Updates: 8, Transitions: []store.Transition{
		tr(recordv1.State_STATE_UNSPECIFIED, recordv1.State_STATE_ACCEPTED),
		tr(recordv1.State_STATE_ACCEPTED, recordv1.State_STATE_AUTHORIZED),
		tr(recordv1.State_STATE_AUTHORIZED, recordv1.State_STATE_DISPATCHED),
	}}
	doneGroup := store.Group{Updates: 8, Transitions: []store.Transition{tr(recordv1.State_STATE_DISPATCHED, recordv1.State_STATE_COMPLETED)}}
	doneGroup.Transitions[0].Outcome = recordv1.Outcome_OUTCOME_SUCCEEDED
	// The settled-execution line goes to a null logger: its cost is the
	// logger's, off the writer goroutine.
	parent := tracing.WithTraceparent(context.Background(), x.Evidence.Traceparent, "")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ctx, submitted := tel.Submit(parent, "deploy_release")
		_ = tracing.Traceparent(ctx)
		tel.group(submitGroup)
		submitted(recordv1.Disposition_DISPOSITION_NEW, x, nil)
		_, attempted := tel.Attempt(context.Background(), engine.AttemptDispatch, engine.Call{Execution: x})
		attempted(engine.Attempt{Class: engine.Observed})
		tel.group(doneGroup)
	}
}
