package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/lifecycle"
	"github.com/latchhq/latch/internal/tracing"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
	"github.com/latchhq/latch/tools"
)

var _ engine.Observer = (*Telemetry)(nil)

// Attempt implements engine.Observer: a span per dispatch attempt or
// recovery call (a child of the execution's submit span, from the
// traceparent its evidence keeps), the dispatch duration histogram and the
// recovery attempt counter.
func (t *Telemetry) Attempt(ctx context.Context, kind engine.AttemptKind, c engine.Call) (context.Context, func(engine.Attempt)) {
	x := c.Execution
	if !trace.SpanContextFromContext(ctx).IsValid() {
		ctx = tracing.WithTraceparent(ctx, x.GetEvidence().GetTraceparent(), "")
	}
	name := "latch.dispatch"
	if kind != engine.AttemptDispatch {
		name = "latch.recovery." + string(kind)
	}
	tool := t.tool(x.GetTool())
	ctx, span := t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		tracing.AttrExecutionID.String(x.GetId()), tracing.AttrTool.String(tool),
		tracing.AttrState.String(lifecycle.Name(x.GetState())),
		attribute.String("latch.channel", x.GetChannel()), attribute.Int64("latch.attempt", int64(x.GetAttempts())),
	))
	start := time.Now()
	return ctx, func(a engine.Attempt) {
		class := className(a.Class)
		if kind == engine.AttemptDispatch {
			t.dispatch.WithLabelValues(t.channelLabel(x.GetChannel()), tool).Observe(time.Since(start).Seconds())
			if a.Class == engine.Unknown && x.GetObservation() != nil {
				t.observe.uncertain.WithLabelValues(tool).Inc()
			}
		} else {
			t.recovery.WithLabelValues(tool, class).Inc()
		}
		span.SetAttributes(attribute.String("latch.result", class))
		if a.Class == engine.Unknown {
			span.SetStatus(codes.Error, "outcome unknown")
		}
		span.End()
	}
}

// channelLabel is the bounded channel label: a built-in kind, or a kind
// of a target of the catalog at start; "other" otherwise.
func (t *Telemetry) channelLabel(ch string) string {
	if tools.Channel(ch).Known() || t.channels[ch] {
		return ch
	}
	return "other"
}

func className(c engine.AttemptClass) string {
	switch c {
	case engine.Observed:
		return "observed"
	case engine.NotSent:
		return "not_sent"
	case engine.Unknown:
		return "unknown"
	case engine.Absent:
		return "absent"
	case engine.Unsupported:
		return "unsupported"
	}
	return "other"
}

// dispositionName is the disposition label.
func dispositionName(d recordv1.Disposition) string {
	switch d {
	case recordv1.Disposition_DISPOSITION_NEW:
		return "new"
	case recordv1.Disposition_DISPOSITION_ATTACHED:
		return "attached"
	case recordv1.Disposition_DISPOSITION_RECOVERED:
		return "recovered"
	case recordv1.Disposition_DISPOSITION_REJECTED:
		return "rejected"
	}
	return "other"
}

// Submit starts the span of one Submit (a child of the caller's trace
// context in ctx) and returns its context and the function the API calls
// with what the submit became. The returned context's traceparent is what
// the API records in the execution's evidence.
func (t *Telemetry) Submit(ctx context.Context, toolName string) (context.Context, func(recordv1.Disposition, *recordv1.Execution, error)) {
	tool := t.tool(toolName)
	ctx, span := t.tracer.Start(ctx, "latch.submit", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(tracing.AttrTool.String(tool)))
	return ctx, func(d recordv1.Disposition, x *recordv1.Execution, err error) {
		if err != nil {
			t.submits.WithLabelValues(tool, "error").Inc()
			span.SetStatus(codes.Error, err.Error())
			span.End()
			return
		}
		disp := dispositionName(d)
		t.submits.WithLabelValues(tool, disp).Inc()
		t.observed(tool, x)
		span.SetAttributes(tracing.AttrExecutionID.String(x.GetId()), tracing.AttrDisposition.String(disp),
			tracing.AttrState.String(lifecycle.Name(x.GetState())))
		if d == recordv1.Disposition_DISPOSITION_NEW && x.GetState() == recordv1.State_STATE_AWAITING_APPROVAL {
			t.approvals.start(ctx, t.tracer, x.GetId(), tool)
		}
		span.End()
	}
}

// approvalSpans are the open "approval wait" spans, by execution ID: one
// per execution awaiting approval in this process, ended by the
// transition that leaves awaiting_approval (approved, denied, expired,
// voided, cancelled). A restart forgets them: the wait goes on, untraced.
type approvalSpans struct {
	mu    sync.Mutex
	spans map[string]trace.Span
}

func (a *approvalSpans) start(ctx context.Context, tr trace.Tracer, id, tool string) {
	_, span := tr.Start(ctx, "latch.approval_wait", trace.WithAttributes(
		tracing.AttrExecutionID.String(id), tracing.AttrTool.String(tool),
		tracing.AttrState.String(lifecycle.Name(recordv1.State_STATE_AWAITING_APPROVAL))))
	if !span.IsRecording() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.spans == nil {
		a.spans = map[string]trace.Span{}
	}
	a.spans[id] = span
}

func (a *approvalSpans) end(id string, to recordv1.State) {
	a.mu.Lock()
	span, ok := a.spans[id]
	delete(a.spans, id)
	a.mu.Unlock()
	if ok {
		span.SetAttributes(tracing.AttrState.String(lifecycle.Name(to)))
		span.End()
	}
}
