package api

import (
	"context"

	"github.com/latchhq/latch/controlplane/engine"
	"github.com/latchhq/latch/internal/tracing"
	recordv1 "github.com/latchhq/latch/proto/latch/record/v1"
)

// SubmitObserver is told about each Submit (the submit counter and span).
// Implemented by *telemetry.Telemetry; nil in Config: none.
type SubmitObserver interface {
	// Submit starts observing one submit of tool; done is called with
	// what it became (x nil when err is set).
	Submit(ctx context.Context, tool string) (_ context.Context, done func(d recordv1.Disposition, x *recordv1.Execution, err error))
}

// observeSubmit starts observing a submit and records the trace context the
// execution's dispatches continue (its evidence's traceparent: the submit
// span's, else the caller's) in in.Evidence.
func (s *Service) observeSubmit(ctx context.Context, in *engine.SubmitInput) (context.Context, func(*engine.SubmitResult, error)) {
	done := func(*engine.SubmitResult, error) {}
	if s.obs != nil {
		var observed func(recordv1.Disposition, *recordv1.Execution, error)
		ctx, observed = s.obs.Submit(ctx, in.Tool)
		done = func(r *engine.SubmitResult, err error) {
			if err != nil {
				observed(0, nil, err)
				return
			}
			observed(r.Disposition, r.Execution, nil)
		}
	}
	if tp := tracing.Traceparent(ctx); tp != "" {
		if in.Evidence == nil {
			in.Evidence = &recordv1.Evidence{}
		}
		in.Evidence.Traceparent = tp
	} else if in.Evidence != nil {
		in.Evidence.Traceparent = "" // only the control plane's own trace context is kept
	}
	return ctx, done
}
