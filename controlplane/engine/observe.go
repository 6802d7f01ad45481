package engine

import "context"

// AttemptKind names a channel call for an Observer.
type AttemptKind string

// Kinds of channel call.
const (
	// AttemptDispatch is a dispatch attempt (the first send or one after
	// not_executed).
	AttemptDispatch AttemptKind = "dispatch"
	// AttemptQuery is a recovery status query.
	AttemptQuery AttemptKind = "query"
	// AttemptReplay is a recovery re-send under the same execution ID.
	AttemptReplay AttemptKind = "replay"
)

// Observer is told about each channel call (metrics, traces). Implemented by
// *telemetry.Telemetry; nil in Config: nothing is observed.
type Observer interface {
	// Attempt is called before a channel call. The context it returns is
	// the call's (it carries the attempt's span, so the channel propagates
	// it to the target); done is called with what the call proved.
	Attempt(ctx context.Context, kind AttemptKind, c Call) (_ context.Context, done func(Attempt))
}

// observe starts observing a channel call; without an Observer it costs
// nothing.
func (e *Engine) observe(ctx context.Context, kind AttemptKind, c Call) (context.Context, func(Attempt)) {
	if e.cfg.Observer == nil {
		return ctx, func(Attempt) {}
	}
	return e.cfg.Observer.Attempt(ctx, kind, c)
}
